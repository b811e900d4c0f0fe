package executor_test

import (
	"context"
	"errors"
	"testing"
)

var errLaterCause = errors.New("the call's context ended after the call")

// fn's context, kept past the call, was cancelled when the call ended: a
// cause that the call's context is given later is not its cause, as it is
// not that of a context derived with a cancel deferred by the call. Err
// and context.Cause agree, whichever is asked first, with Done asked or
// not.
func TestDoContextKeptCauseStaysWhenTheParentEndsLater(t *testing.T) {
	for _, askDone := range []bool{false, true} {
		for _, causeFirst := range []bool{false, true} {
			ex := newExec(t, nil)
			parent, cancel := context.WithCancelCause(bg)
			kept := keptDoContext(t, ex, parent, "g", askDone)
			var first error
			if causeFirst {
				first = context.Cause(kept)
			} else {
				first = kept.Err()
			}
			cancel(errLaterCause)
			if err := kept.Err(); err != context.Canceled {
				t.Errorf("Done asked %v, Cause first %v: Err = %v, want context.Canceled", askDone, causeFirst, err)
			}
			if err := context.Cause(kept); err != first {
				t.Errorf("Done asked %v, Cause first %v: Cause once the call's context ended = %v, was %v", askDone, causeFirst, err, first)
			}
		}
	}
}

// A stop of fn's group while fn runs cancels its context: its Err, once
// non-nil, stays the same when the call's context ends afterwards with
// another error, with Done asked or not, as a derived context's does.
func TestDoContextErrStaysWhenTheParentEndsAfterAStop(t *testing.T) {
	ended, cancel := context.WithCancel(bg)
	cancel()
	for _, askDone := range []bool{false, true} {
		ex := newExec(t, nil)
		parent := newExpiringCtx()
		err := ex.Do(parent, "g", func(ctx context.Context) error {
			if askDone {
				ctx.Done()
			}
			if err := ex.ShutdownGroup(ended, "g"); !errors.Is(err, context.Canceled) {
				t.Errorf("ShutdownGroup = %v", err)
			}
			first, cause := ctx.Err(), context.Cause(ctx)
			if first == nil {
				t.Errorf("Done asked %v: Err = nil once the group stopped", askDone)
			}
			parent.expire()
			if err := ctx.Err(); err != first {
				t.Errorf("Done asked %v: Err once the call's context expired = %v, was %v", askDone, err, first)
			}
			if err := context.Cause(ctx); err != cause {
				t.Errorf("Done asked %v: Cause once the call's context expired = %v, was %v", askDone, err, cause)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
