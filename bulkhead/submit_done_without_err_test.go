package bulkhead_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/bulkhead"
)

// A caller's context whose Done is closed while its Err reports nil breaks
// context.Context's contract, and the standard library, deriving fn's
// context from it, panics ("missing cancel error"): in Submit's caller if
// Done was closed before Submit, or, if it closes while fn runs, on a
// goroutine of its own, which ends the program. Submit takes such a
// context for a cancelled one: without a queue fn runs, as for a cancelled
// context, with its context already cancelled (context.Canceled); if Done
// closes while fn runs, fn's context is cancelled with context.Canceled.
func TestSubmitContextDoneWithoutErr(t *testing.T) {
	t.Run("done before Submit", func(t *testing.T) {
		b := newBH(t, 1)
		ctx := &doneNoErrContext{Context: bg, done: make(chan struct{})}
		close(ctx.done)
		var fnErr error
		h, err := submitRecovering(t, b, ctx, func(c context.Context) (int, error) {
			fnErr = c.Err()
			return 1, nil
		})
		if err != nil {
			t.Fatalf("Submit: %v", err)
		}
		if r := result(t, h); r.Status != bulkhead.Success || r.Value != 1 {
			t.Fatalf("result %+v, want Success with 1", r)
		}
		if fnErr != context.Canceled {
			t.Fatalf("fn's context's Err %v, want context.Canceled", fnErr)
		}
		whole(t, b, 0)
	})
	t.Run("done while fn runs", func(t *testing.T) {
		b := newBH(t, 1)
		ctx := &doneNoErrContext{Context: bg, done: make(chan struct{})}
		running := make(chan struct{})
		h, err := submitRecovering(t, b, ctx, func(c context.Context) (int, error) {
			close(running)
			select {
			case <-c.Done():
				return 0, c.Err()
			case <-time.After(10 * time.Second):
				return 0, errors.New("fn's context was not cancelled")
			}
		})
		if err != nil {
			t.Fatalf("Submit: %v", err)
		}
		<-running
		close(ctx.done)
		r := result(t, h)
		if r.Status != bulkhead.Cancelled || r.Err != context.Canceled {
			t.Fatalf("result %+v, want Cancelled with context.Canceled", r)
		}
		whole(t, b, 0)
	})
	t.Run("done with a queue", func(t *testing.T) {
		// With a queue Submit refuses a cancelled context, as Acquire does:
		// and so one whose Done is closed with a nil Err, with an error that
		// matches context.Canceled, holding nothing.
		b := newBH(t, 1, bulkhead.WithQueue(1, time.Hour), bulkhead.WithEventLog(8))
		ctx := &doneNoErrContext{Context: bg, done: make(chan struct{})}
		close(ctx.done)
		ran := false
		h, err := submitRecovering(t, b, ctx, func(context.Context) (int, error) { ran = true; return 1, nil })
		if !errors.Is(err, context.Canceled) || h != nil {
			t.Fatalf("Submit: (%v, %v), want an error matching context.Canceled", h, err)
		}
		if ran {
			t.Fatal("fn ran")
		}
		whole(t, b, 0)
		wantOneCancelledRejection(t, b)
	})
}

// submitRecovering is Submit, failing the test if it panics.
func submitRecovering[T any](t *testing.T, b *bulkhead.Bulkhead, ctx context.Context, fn func(context.Context) (T, error)) (h *bulkhead.Handle[T], err error) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("Submit panicked: %v", r)
		}
	}()
	return bulkhead.Submit(b, ctx, fn)
}

// afterFuncContext is a context of the caller's that is no standard
// library context (its values are Background's) but runs functions once
// done (AfterFunc), as one that wraps another context may.
type afterFuncContext struct {
	context.Context
	inner      context.Context
	registered atomic.Int32
}

func (c *afterFuncContext) Done() <-chan struct{} { return c.inner.Done() }
func (c *afterFuncContext) Err() error            { return c.inner.Err() }

func (c *afterFuncContext) AfterFunc(f func()) (stop func() bool) {
	c.registered.Add(1)
	return context.AfterFunc(c.inner, f)
}

// fn's context follows a caller's context with an AfterFunc through that
// AfterFunc, as the standard library does, not with a goroutine of its own
// watching its Done; and is cancelled when the caller's is.
func TestSubmitContextWithAfterFunc(t *testing.T) {
	b := newBH(t, 1)
	inner, cancel := context.WithCancel(bg)
	ctx := &afterFuncContext{Context: bg, inner: inner}
	running := make(chan struct{})
	h, err := bulkhead.Submit(b, ctx, func(c context.Context) (int, error) {
		close(running)
		<-c.Done()
		return 0, c.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	<-running
	if n := ctx.registered.Load(); n != 1 {
		t.Errorf("the caller's context's AfterFunc was called %d times, want once", n)
	}
	cancel()
	if r := result(t, h); r.Status != bulkhead.Cancelled {
		t.Fatalf("result %+v, want Cancelled", r)
	}
	whole(t, b, 0)
}

// errBombContext is a context of the caller's, no standard library one,
// whose Err panics once its Done is closed.
type errBombContext struct {
	context.Context
	done chan struct{}
}

func (c *errBombContext) Done() <-chan struct{} { return c.done }
func (c *errBombContext) Err() error {
	select {
	case <-c.done:
		panic("errBombContext: Err")
	default:
		return nil
	}
}

// When a caller's context that is no standard library one ends while fn
// runs, the standard library cancels fn's context from a goroutine of its
// own, reading the caller's Err there: a panic from it, where nothing
// recovers, ended the program. Once fn's context is derived, such a panic
// reads as context.Canceled: the caller's Done is closed.
func TestSubmitContextErrPanickingWhileFnRuns(t *testing.T) {
	b := newBH(t, 1)
	ctx := &errBombContext{Context: bg, done: make(chan struct{})}
	running := make(chan struct{})
	h, err := bulkhead.Submit(b, ctx, func(c context.Context) (int, error) {
		close(running)
		<-c.Done()
		return 0, c.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	<-running
	close(ctx.done)
	if r := result(t, h); r.Status != bulkhead.Cancelled || r.Err != context.Canceled {
		t.Fatalf("result %+v, want Cancelled with context.Canceled", r)
	}
	whole(t, b, 0)
}

type submitKey struct{}

// fn's context is the caller's context's child for all that the caller can
// see: its values, and, when the caller's context is cancelled with a
// cause, that cause.
func TestSubmitContextKeepsCallersValuesAndCause(t *testing.T) {
	errCause := errors.New("the caller's cause")
	b := newBH(t, 1)
	parent, cancel := context.WithCancelCause(context.WithValue(bg, submitKey{}, "v"))
	running := make(chan struct{})
	var value any
	var cause error
	h, err := bulkhead.Submit(b, parent, func(c context.Context) (int, error) {
		value = c.Value(submitKey{})
		close(running)
		<-c.Done()
		cause = context.Cause(c)
		return 0, c.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	<-running
	cancel(errCause)
	if r := result(t, h); r.Status != bulkhead.Cancelled {
		t.Fatalf("result %+v, want Cancelled", r)
	}
	if value != "v" || cause != errCause {
		t.Fatalf("fn's context had the value %v and the cause %v, want v and %v", value, cause, errCause)
	}
	whole(t, b, 0)
}
