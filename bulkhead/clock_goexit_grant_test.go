package bulkhead_test

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/bulkhead"
	"github.com/groupexec/groupexec/clock"
)

// stopHookClock is an exitingClock whose timers' Stop calls onStop first, so
// that a test acts as a waiter's goroutine ends its wait.
type stopHookClock struct {
	*exitingClock
	onStop atomic.Pointer[func()]
}

func (c *stopHookClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	return stopHookTimer{c, c.exitingClock.AfterFunc(d, f)}
}

type stopHookTimer struct {
	c *stopHookClock
	clock.Timer
}

func (t stopHookTimer) Stop() bool {
	if f := t.c.onStop.Swap(nil); f != nil {
		(*f)()
	}
	return t.Timer.Stop()
}

// A waiter that is issued a permit as its acquire ends, and then leaves
// the queue reading a Now that exits the goroutine (runtime.Goexit), finds
// itself already out of the queue: the permit issued to it must still go
// back, as it does when Now returns. Left out, it stays in flight for good,
// and with it the capacity.
func TestClockNowExitingAsAGrantedWaiterLeaves(t *testing.T) {
	t.Run("timer stop exits first", func(t *testing.T) {
		// A clock that fails exits every goroutine that calls it next, as
		// one calling t.FailNow would: the granted waiter's Stop exits, and
		// so does the Now its leaving reads.
		c := &stopHookClock{exitingClock: newExitingClock()}
		b := newBH(t, 1, bulkhead.WithClock(c), bulkhead.WithQueue(1, time.Hour))
		held := acquire(t, b, 1)
		w := queueWith(t, bg, b, 1)[0]
		fail := func() {
			c.now.Store(true)
			runtime.Goexit()
		}
		c.onStop.Store(&fail)
		release(t, b, held) // issues the permit to the waiter
		w.wait(t)           // its goroutine exits
		whole(t, b, 0)
	})
	t.Run("context ends first", func(t *testing.T) {
		// The waiter's context ends (its Done closes with Err still nil,
		// so that the release below serves it) while the permit is still
		// held; as it stops its timer, the permit is issued to it; and
		// then its leaving reads a Now that exits.
		c := &stopHookClock{exitingClock: newExitingClock()}
		b := newBH(t, 1, bulkhead.WithClock(c), bulkhead.WithQueue(1, time.Hour))
		held := acquire(t, b, 1)
		stopping, proceed := make(chan struct{}), make(chan struct{})
		hold := func() {
			close(stopping)
			<-proceed
		}
		c.onStop.Store(&hold)
		ctx := &doneNoErrContext{Context: bg, done: make(chan struct{})}
		close(ctx.done)
		w := acquireAsync(ctx, b, 1)
		<-stopping
		release(t, b, held) // issues the permit to the waiter, whose Err is nil
		c.now.Store(true)
		close(proceed)
		w.wait(t) // its goroutine exits
		whole(t, b, 0)
	})
	t.Run("listener exits first", func(t *testing.T) {
		// The listener told of the queueing exits the acquire's goroutine
		// after a release issued the permit to it; its leaving then reads
		// a Now that exits too.
		c := &stopHookClock{exitingClock: newExitingClock()}
		var b *bulkhead.Bulkhead
		var held bulkhead.Permit
		b = newBH(t, 1, bulkhead.WithClock(c), bulkhead.WithQueue(1, time.Hour),
			bulkhead.WithListener(bulkhead.ListenerFunc(func(e bulkhead.Event) {
				if e.Code == bulkhead.EventRequestQueued {
					_ = b.Release(held) // issues the permit to the waiter
					c.now.Store(true)
					runtime.Goexit()
				}
			})))
		held = acquire(t, b, 1)
		if exits(t, func() { _, _ = b.Acquire(bg, 1) }) {
			t.Fatal("Acquire returned: the listener did not exit its goroutine")
		}
		whole(t, b, 0)
	})
}
