package bulkhead_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/bulkhead"
)

// exitingText is an error whose Error exits the goroutine.
type exitingText struct{}

func (exitingText) Error() string {
	runtime.Goexit()
	return ""
}

// exitingErrContext is a context that has ended, with an exitingText error.
type exitingErrContext struct{ context.Context }

func (exitingErrContext) Err() error { return exitingText{} }

// The refusal of a request whose context ended before it could wait names
// the context's error (Event.Detail): the caller's code, which may exit
// the goroutine. Read under the bulkhead's mutex, it left the mutex held,
// and every later call blocked; read before, it ends the caller's
// goroutine alone, as any code of its own would.
func TestContextErrorTextExitingBeforeTheWaitLeavesNoLockHeld(t *testing.T) {
	b := newBH(t, 1, bulkhead.WithQueue(2, time.Hour), bulkhead.WithEventLog(16))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = b.Acquire(exitingErrContext{context.Background()}, 1)
		t.Error("Acquire returned: the context's error text did not exit the goroutine")
	}()
	<-done
	if bulkhead.Locked(b) {
		t.Fatal("the bulkhead's mutex is held after the context's error text exited the goroutine")
	}
	whole(t, b, 0)
}

// endingCtx is a context that ends as the bulkhead serving its request
// asks its Err (the release that issues it a permit): its Done closes
// then, while that Err still reports nil, and every later Err is an
// exitingText.
type endingCtx struct {
	context.Context
	done  chan struct{}
	armed atomic.Bool
	ended atomic.Bool
}

func (c *endingCtx) Done() <-chan struct{} { return c.done }

func (c *endingCtx) Err() error {
	if c.ended.Load() {
		return exitingText{}
	}
	// Once, and ended before Done closes: the request's goroutine, woken by
	// Done, reads Err at once, and must find the exitingText.
	if c.armed.CompareAndSwap(true, false) {
		c.ended.Store(true)
		close(c.done)
	}
	return nil
}

// A request issued a permit as its context ended gives the permit back,
// its refusal naming the context's error: read under the mutex, an Error
// that exits the goroutine left the mutex held, and every later call
// blocked.
func TestContextErrorTextExitingAsThePermitGoesBackLeavesNoLockHeld(t *testing.T) {
	b := newBH(t, 1, bulkhead.WithQueue(2, time.Hour), bulkhead.WithEventLog(16))
	held := acquire(t, b, 1)
	ctx := &endingCtx{Context: context.Background(), done: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = b.Acquire(ctx, 1)
		t.Error("Acquire returned: the context's error text did not exit the goroutine")
	}()
	eventually(t, "the request to queue", func() bool { return b.QueueDepth() == 1 })
	ctx.armed.Store(true)
	if err := b.Release(held); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		// The exit under the mutex left the goroutine blocked on it, in
		// the deferred release.
		t.Fatal("the request's goroutine still there 10s after its context's error text exited it")
	}
	if bulkhead.Locked(b) {
		t.Fatal("the bulkhead's mutex is held after the context's error text exited the goroutine")
	}
	whole(t, b, 0)
}
