package bulkhead

import "context"

// doneParent is the caller's context as the parent of fn's context
// (Submit). A context whose Done is closed while its Err reports nil breaks
// context.Context's contract, and the standard library, deriving a context
// from it or cancelling one when its Done closes, panics ("missing cancel
// error"): in Submit's caller if Done was closed before, or on a goroutine
// of its own if it closes while fn runs, which ends the program. doneParent
// reads such a context as a cancelled one: its Err is context.Canceled once
// its Done is closed. Everything else is the caller's context's own; a
// context of the standard library's, whose Done is its own, is still
// followed without a goroutine of its own.
type doneParent struct{ context.Context }

// Err is the context's Err, or context.Canceled if that is nil while its
// Done is closed.
func (c *doneParent) Err() error {
	if err := c.Context.Err(); err != nil {
		return err
	}
	return doneWithoutErr(c.Context)
}

// doneWithoutErr returns context.Canceled if ctx's Done is closed, else
// nil: the error of a context whose Err reported nil.
func doneWithoutErr(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return context.Canceled
	default:
		return nil
	}
}
