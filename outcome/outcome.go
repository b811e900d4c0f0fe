package outcome

import (
	"context"
	"errors"
	"strconv"
)

// Status is how a unit of work ended. The zero Status is no outcome: the
// work has not ended, or the value was never set.
type Status uint8

const (
	// Success: the work ran and returned a nil error.
	Success Status = iota + 1
	// Failed: the work ran and returned an error that is not a
	// cancellation, or panicked.
	Failed
	// Cancelled: the work was cancelled, or returned an error that is or
	// wraps context.Canceled.
	Cancelled
	// Rejected: the work was refused and never ran.
	Rejected
)

// String returns the constant's name ("Success", "Failed", "Cancelled",
// "Rejected"), or "Status(n)" for any other value.
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
	return "Status(" + strconv.Itoa(int(s)) + ")"
}

// Classify returns the status of work that ran and returned err: Success
// for nil; Cancelled if err is, or wraps at any depth, context.Canceled
// (someone lost interest in the work: it did not fail); Failed otherwise.
// context.DeadlineExceeded is Failed: the work did not finish in the time it
// was given.
func Classify(err error) Status {
	switch {
	case err == nil:
		return Success
	case errors.Is(err, context.Canceled):
		return Cancelled
	}
	return Failed
}
