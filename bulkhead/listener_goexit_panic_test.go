package bulkhead_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/bulkhead"
)

// A listener that exits the goroutine (runtime.Goexit) as the bulkhead
// undoes an acquire whose context panicked does not swallow that panic: Go
// drops a panic when a deferred call exits its goroutine, and the undoing
// (the waiter leaving the queue, a permit going back) tells the listener
// from a deferred call. The caller gets the context's panic, and nothing is
// held: a waiter that leaves the queue ungranted, one granted as its
// context panics, and a Submit whose context panics as fn's is derived
// from it.
func TestContextPanicSurvivesListenerGoexit(t *testing.T) {
	for _, c := range []struct {
		name  string
		exit  string // the event whose listener exits the goroutine
		queue bool   // the permit is held: the request queues
		grant bool   // as it queues, the held permit is released to it
	}{
		{"waiter leaving the queue", bulkhead.EventRequestRejected, true, false},
		{"waiter granted as its context panics", bulkhead.EventRequestRejected, true, true},
		{"Submit", bulkhead.EventPermitReleased, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := &doneBomb{Context: bg}
			var b *bulkhead.Bulkhead
			var held bulkhead.Permit
			var exit atomic.Bool
			b = newBH(t, 1, bulkhead.WithQueue(1, time.Hour),
				bulkhead.WithListener(bulkhead.ListenerFunc(func(e bulkhead.Event) {
					switch {
					case e.Code == bulkhead.EventRequestQueued:
						if c.grant {
							_ = b.Release(held) // grants the waiter before it waits
						}
						ctx.armed.Store(true) // the waiter reads Done as it waits
					case e.Code == c.exit && exit.Load():
						runtime.Goexit()
					}
				})))
			call := func() { _, _ = b.Acquire(ctx, 1) }
			if c.queue {
				held = acquire(t, b, 1)
			} else {
				// Acquire reads no Done; deriving fn's context from ctx does.
				ctx.armed.Store(true)
				call = func() { _, _ = bulkhead.Submit(b, ctx, func(context.Context) (int, error) { return 0, nil }) }
			}
			exit.Store(true)
			done := make(chan any, 1)
			go func() {
				defer func() { done <- recover() }()
				call()
			}()
			select {
			case r := <-done:
				if r != "Done" {
					t.Fatalf("the caller recovered %v, want the context's panic", r)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the acquire's goroutine did not end")
			}
			exit.Store(false)
			if c.queue && !c.grant {
				whole(t, b, 1)
				release(t, b, held)
			}
			whole(t, b, 0)
		})
	}
}
