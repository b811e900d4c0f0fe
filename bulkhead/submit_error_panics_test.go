package bulkhead_test

import (
	"context"
	"errors"
	"testing"

	"github.com/groupexec/groupexec/bulkhead"
)

// wrapErr is an error type whose Unwrap reads its receiver: a nil *wrapErr
// returned as an error (Go's typed-nil error) panics when unwrapped.
type wrapErr struct{ inner error }

func (e *wrapErr) Error() string { return "wrapped" }
func (e *wrapErr) Unwrap() error { return e.inner }

// Submit's goroutine classifies fn's error (errors.Is against
// context.Canceled), which calls the error's own methods: the caller's
// code, run where nothing above recovers. A typed-nil error whose Unwrap
// panics ended the program there, after the handle completed with no
// Status. The run fails as one whose function panicked: Failed, with a
// *PanicError, the permit back.
func TestSubmitErrorPanickingAsItIsClassified(t *testing.T) {
	b := newBH(t, 1)
	h := submit(t, b, func(context.Context) (int, error) {
		var e *wrapErr
		return 1, e
	})
	r := result(t, h)
	var pe *bulkhead.PanicError
	if r.Status != bulkhead.Failed || !errors.As(r.Err, &pe) || r.Value != 0 {
		t.Fatalf("result %+v, want Failed with a *PanicError and no value", r)
	}
	whole(t, b, 0)
}
