package bulkhead

import "context"

// doneParent is the caller's context as the parent of fn's context
// (Submit). A context whose Done is closed while its Err reports nil breaks
// context.Context's contract, and the standard library, deriving a context
// from it or cancelling one when its Done closes, panics ("missing cancel
// error"): in Submit's caller if Done was closed before, or on a goroutine
// of its own if it closes while fn runs, which ends the program. doneParent
// reads such a context as a cancelled one: its Err is context.Canceled once
// its Done is closed. Everything else is the caller's context's own: a
// context of the standard library's (found through Value, its Done the
// same) is still followed without a goroutine, and so is one with an
// AfterFunc (doneParentAfterFunc).
//
// If the caller's Done was still open as fn's context was derived
// (lenient), the standard library reads Err only to cancel fn's context
// once Done closes, on a goroutine of its own (or the caller's
// AfterFunc's), where a panic from it would end the program: it then reads
// as context.Canceled. Otherwise Err is read in Submit's caller, as fn's
// context is derived, and its panic goes on up there.
type doneParent struct {
	context.Context
	lenient bool // set before fn's context is derived, never after
}

// afterFuncer is a context that runs a function once it is done, as the
// standard library's do: context.WithCancelCause asks a parent it does
// not know for AfterFunc, rather than start a goroutine to watch its Done.
type afterFuncer interface {
	AfterFunc(f func()) (stop func() bool)
}

// doneParentAfterFunc is doneParent for a context with an AfterFunc,
// which it keeps in sight of context.WithCancelCause: hidden, every Submit
// with such a context would start a goroutine to watch it. The function
// given is the standard library's, which reads doneParent's Err.
type doneParentAfterFunc struct{ doneParent }

// AfterFunc is the context's AfterFunc.
func (c *doneParentAfterFunc) AfterFunc(f func()) (stop func() bool) {
	return c.Context.(afterFuncer).AfterFunc(f)
}

// parentOf returns p holding ctx, as the parent for fn's context: p
// itself, or p's doneParent if ctx has no AfterFunc. p is a field of fn's
// handle, so that this costs no allocation.
func parentOf(p *doneParentAfterFunc, ctx context.Context) context.Context {
	p.Context = ctx
	p.lenient = doneWithoutErr(ctx) == nil // Done still open
	if _, ok := ctx.(afterFuncer); ok {
		return p
	}
	return &p.doneParent
}

// Err is the context's Err, or context.Canceled if that is nil while its
// Done is closed.
func (c *doneParent) Err() (err error) {
	if c.lenient {
		defer func() {
			if recover() != nil {
				err = context.Canceled
			}
		}()
	}
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
