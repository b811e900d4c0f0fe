package executor

import (
	"context"
	"time"

	"github.com/groupexec/groupexec/outcome"
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

// Status is how a task ended: the module's one outcome vocabulary (package
// outcome), under the executor's name.
type Status = outcome.Status

// A task's Status, as package outcome defines them.
const (
	// Success: Fn returned a nil error.
	Success = outcome.Success
	// Failed: Fn returned an error that is not a cancellation, panicked, or
	// called runtime.Goexit.
	Failed = outcome.Failed
	// Cancelled: the task was cancelled while waiting, or Fn returned an
	// error that is or wraps context.Canceled.
	Cancelled = outcome.Cancelled
	// Rejected: the task was refused and Fn never ran.
	Rejected = outcome.Rejected
)

// Result is the outcome of a task.
type Result[T any] struct {
	Status Status // Success, Failed, Cancelled or Rejected
	Value  T      // Fn's value; the zero value unless Fn ran
	Err    error  // Fn's error, a *PanicError, or why the task was rejected or cancelled
	Group  string // the task's group
	ID     string // the task's ID, possibly empty
	// Queued is the time from Submit to the start of Fn; for a task that
	// never started, the time from Submit until it was refused or removed.
	Queued time.Duration
	// Duration is the time Fn ran, excluding any wait.
	Duration time.Duration
}
