package bulkhead_test

import (
	"context"
	"testing"

	"github.com/groupexec/groupexec/bulkhead"
)

// Submit's goroutine cancels fn's context as the run ends, and cancelling
// it reads the caller's context (its Done, to unlink fn's context from it):
// the caller's code, run where nothing above recovers, so that a panic
// from it would end the program. fn's context is cancelled before that
// read, the permit released and the handle completed: the panic is dropped,
// as a clock's is on that goroutine. Also for a run that starts as its
// handle is cancelled, and cancels fn's context before Cancel does.
func TestSubmitContextPanickingAsTheRunEnds(t *testing.T) {
	t.Run("run ends", func(t *testing.T) {
		b := newBH(t, 1)
		ctx := &doneBomb{Context: bg}
		var fnCtx context.Context
		h, start, err := bulkhead.SubmitUnstarted(b, ctx, func(c context.Context) (int, error) {
			fnCtx = c
			ctx.armed.Store(true) // the caller's context fails while the run goes on
			return 1, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		<-start() // the run's goroutine ends, without panicking
		if r := result(t, h); r.Status != bulkhead.Success || r.Value != 1 {
			t.Fatalf("result %+v, want Success with 1", r)
		}
		if fnCtx.Err() == nil {
			t.Fatal("fn's context is not cancelled after its run ended")
		}
		whole(t, b, 0)
	})
	t.Run("cancelled as it starts", func(t *testing.T) {
		ctx := &doneBomb{Context: bg}
		var start func() <-chan struct{}
		b := newBH(t, 1, bulkhead.WithListener(bulkhead.ListenerFunc(func(e bulkhead.Event) {
			if e.Code == bulkhead.EventPermitReleased {
				// Cancel has completed the handle and released its
				// permit, and not yet cancelled fn's context: the run
				// starts now, finds the handle completed, and cancels
				// fn's context itself, reading the caller's.
				ctx.armed.Store(true)
				<-start() // the run's goroutine ends, without panicking
			}
		})))
		ran := false
		h, s, err := bulkhead.SubmitUnstarted(b, ctx, func(context.Context) (int, error) {
			ran = true
			return 1, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		start = s
		h.Cancel()
		if r := result(t, h); r.Status != bulkhead.Cancelled || ran {
			t.Fatalf("result %+v, ran %v: want Cancelled, fn not run", r, ran)
		}
		whole(t, b, 0)
	})
}
