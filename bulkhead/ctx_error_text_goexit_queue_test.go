package bulkhead_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/bulkhead"
)

// closingErrCtx is a context whose Done is a channel the test closes, and
// whose Err is an exitingText once it is closed (once ended is set, for a
// context read by the queue's server before its Done closes), nil before.
type closingErrCtx struct {
	context.Context
	done  chan struct{}
	ended atomic.Bool
}

func newClosingErrCtx() *closingErrCtx {
	return &closingErrCtx{Context: context.Background(), done: make(chan struct{})}
}

func (c *closingErrCtx) Done() <-chan struct{} { return c.done }

func (c *closingErrCtx) Err() error {
	if c.ended.Load() {
		return exitingText{}
	}
	select {
	case <-c.done:
		return exitingText{}
	default:
		return nil
	}
}

// lastRejection is the detail of the last EventRequestRejected in b's log.
func lastRejection(t *testing.T, b *bulkhead.Bulkhead) string {
	t.Helper()
	es := b.Events()
	for i := len(es) - 1; i >= 0; i-- {
		if es[i].Code == bulkhead.EventRequestRejected {
			return es[i].Detail
		}
	}
	t.Fatalf("no rejection in the log: %v", codes(es))
	return ""
}

// A queued request whose context ends leaves the queue under the mutex,
// its rejection naming the context's error: read there, an Error that
// exits the goroutine left the mutex held, every later call blocked, and
// the waiters behind it unserved. It fails with ErrGoexit, as a request
// whose context's Err exits does, and the queue is served on the way out.
func TestContextErrorTextExitingALeavingWaiterLeavesNoLockHeld(t *testing.T) {
	b := newBH(t, 2, bulkhead.WithQueue(2, time.Hour), bulkhead.WithEventLog(16))
	held := acquire(t, b, 1)
	ctx := newClosingErrCtx()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = b.Acquire(ctx, 2) // waits for both permits, holding up the next
		t.Error("Acquire returned: the context's error text did not exit the goroutine")
	}()
	eventually(t, "the request to queue", func() bool { return b.QueueDepth() == 1 })
	next := queueWith(t, bg, b, 1)[0] // fits, but waits behind the heavier one
	close(ctx.done)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the request's goroutine still there 10s after its context's error text exited it")
	}
	if bulkhead.Locked(b) {
		t.Fatal("the bulkhead's mutex is held after the context's error text exited the goroutine")
	}
	if d := lastRejection(t, b); d != bulkhead.ErrGoexit.Code() {
		t.Fatalf("the rejection's detail is %q, want %q", d, bulkhead.ErrGoexit.Code())
	}
	p, err := next.wait(t)
	if err != nil {
		t.Fatalf("the request behind the one that left: %v", err)
	}
	release(t, b, p)
	release(t, b, held)
	whole(t, b, 0)
}

// The queue's server (here a release's goroutine) reads each waiter's
// context under the mutex, and names a context's error in its request's
// rejection: an Error that exits that goroutine left the mutex held. The
// waiter fails with ErrGoexit, and the rest of the queue is served, as the
// goroutine exits.
func TestContextErrorTextExitingTheQueueServerLeavesNoLockHeld(t *testing.T) {
	b := newBH(t, 1, bulkhead.WithQueue(2, time.Hour), bulkhead.WithEventLog(16))
	held := acquire(t, b, 1)
	ctx := newClosingErrCtx()
	w := queueWith(t, ctx, b, 1)[0]
	next := queueWith(t, bg, b, 1)[0]
	ctx.ended.Store(true) // Err ends it, its Done still open: the waiter sleeps
	released := make(chan struct{})
	go func() {
		defer close(released)
		_ = b.Release(held)
		t.Error("Release returned: the context's error text did not exit the goroutine")
	}()
	select {
	case <-released:
	case <-time.After(10 * time.Second):
		t.Fatal("the release's goroutine still there 10s after a waiter's error text exited it")
	}
	if bulkhead.Locked(b) {
		t.Fatal("the bulkhead's mutex is held after a waiter's error text exited the goroutine serving the queue")
	}
	if _, err := w.wait(t); !errors.Is(err, bulkhead.ErrGoexit) {
		t.Fatalf("the waiter whose error text exited the goroutine: %v, want ErrGoexit", err)
	}
	if d := lastRejection(t, b); d != bulkhead.ErrGoexit.Code() {
		t.Fatalf("the rejection's detail is %q, want %q", d, bulkhead.ErrGoexit.Code())
	}
	p, err := next.wait(t)
	if err != nil {
		t.Fatalf("the next in line: %v", err)
	}
	release(t, b, p)
	whole(t, b, 0)
}
