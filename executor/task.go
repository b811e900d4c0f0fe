package executor

import (
	"context"
	"fmt"
	"time"
)

// Task is one unit of work for a group.
type Task[T any] struct {
	// Group is the key the task is admitted and limited under: a tenant, a
	// host, a customer. It must not be empty.
	Group string
	// ID names the task in results, events and errors. It may be empty.
	ID string
	// Weight is the permits the task takes at every limit. 0 means 1; a
	// negative weight is invalid.
	Weight int
	// Fn is the work. Its context is cancelled when the task is cancelled
	// (Handle.Cancel, Submit's context, a shutdown that ran out of time).
	Fn func(ctx context.Context) (T, error)
}

// Status is how a task ended.
type Status uint8

const (
	// Success: Fn returned a nil error.
	Success Status = iota + 1
	// Failed: Fn returned an error that is not a cancellation, or panicked.
	Failed
	// Cancelled: the task was cancelled while waiting, or Fn returned an
	// error that is or wraps context.Canceled.
	Cancelled
	// Rejected: the task was refused and Fn never ran.
	Rejected
)

func (s Status) String() string {
	switch s {
	case Success:
		return "Success"
	case Failed:
		return "Failed"
	case Cancelled:
		return "Cancelled"
	case Rejected:
		return "Rejected"
	}
	return fmt.Sprintf("Status(%d)", uint8(s))
}

// Result is the outcome of a task.
type Result[T any] struct {
	Status Status
	Value  T     // Fn's value; the zero value unless Fn ran
	Err    error // Fn's error, a *PanicError, or why the task was rejected or cancelled
	Group  string
	ID     string
	// Queued is the time from Submit to the start of Fn; for a task that
	// never started, the time from Submit until it was refused or removed.
	Queued time.Duration
	// Duration is the time Fn ran, excluding any wait.
	Duration time.Duration
}
