package bulkhead_test

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/bulkhead"
	"github.com/groupexec/groupexec/clock"
)

// exitingClock is a fake clock whose methods, once armed, exit the
// goroutine that calls them next (runtime.Goexit), as a test's clock that
// calls t.FailNow might. Each arming is for one call.
type exitingClock struct {
	*clock.Fake
	now, after, stop atomic.Bool
}

func newExitingClock() *exitingClock { return &exitingClock{Fake: clock.NewFake(t0)} }

func (c *exitingClock) Now() time.Time {
	if c.now.CompareAndSwap(true, false) {
		runtime.Goexit()
	}
	return c.Fake.Now()
}

func (c *exitingClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	if c.after.CompareAndSwap(true, false) {
		runtime.Goexit()
	}
	return exitingTimer{c, c.Fake.AfterFunc(d, f)}
}

type exitingTimer struct {
	c *exitingClock
	clock.Timer
}

func (t exitingTimer) Stop() bool {
	if t.c.stop.CompareAndSwap(true, false) {
		runtime.Goexit()
	}
	return t.Timer.Stop()
}

// exits runs f on a goroutine of its own and waits for it to end,
// reporting whether f returned (false: it exited the goroutine).
func exits(t *testing.T, f func()) (returned bool) {
	t.Helper()
	done := make(chan bool, 1)
	go func() {
		ok := false
		defer func() { done <- ok }()
		f()
		ok = true
	}()
	select {
	case ok := <-done:
		return ok
	case <-time.After(10 * time.Second):
		t.Fatal("the goroutine did not end")
		return false
	}
}

// whole fails the test unless b's mutex is free, its books balance, and it
// holds inFlight permits and no waiter.
func whole(t *testing.T, b *bulkhead.Bulkhead, inFlight int) {
	t.Helper()
	if bulkhead.Locked(b) {
		t.Fatal("the clock exited a goroutine that held the bulkhead's mutex: every later call blocks")
	}
	if err := b.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	if s := stateOf(b); s.inFlight != inFlight || s.queued != 0 {
		t.Fatalf("%+v, want %d in flight and none queued", s, inFlight)
	}
}

// A clock given to WithClock is user code: a Now that exits the goroutine
// (runtime.Goexit, which cannot be stopped) must not leave the bulkhead's
// mutex held, nor leave undone a release, a waiter's leaving or timing
// out, or the serving of waiters, which no other call would redo. An
// acquire, a refusal or a change of limit is simply not made.
func TestClockNowExitingTheGoroutine(t *testing.T) {
	observed := func(c *exitingClock, opts ...bulkhead.Option) *bulkhead.Bulkhead {
		return newBH(t, 1, append(opts, bulkhead.WithClock(c), bulkhead.WithEventLog(64))...)
	}
	t.Run("acquire", func(t *testing.T) {
		c := newExitingClock()
		b := observed(c)
		c.now.Store(true)
		if exits(t, func() { _, _ = b.TryAcquire(bg, 1) }) {
			t.Fatal("TryAcquire returned: Now was not read")
		}
		whole(t, b, 0)
		release(t, b, acquire(t, b, 1))
	})
	t.Run("set limit", func(t *testing.T) {
		c := newExitingClock()
		b := observed(c)
		c.now.Store(true)
		exits(t, func() { _ = b.SetLimit(2) })
		whole(t, b, 0)
		if err := b.SetLimit(3); err != nil || b.Limit() != 3 {
			t.Fatalf("SetLimit(3): %v, limit %d", err, b.Limit())
		}
	})
	t.Run("release", func(t *testing.T) {
		c := newExitingClock()
		b := observed(c)
		p := acquire(t, b, 1)
		c.now.Store(true)
		if exits(t, func() { _ = b.Release(p) }) {
			t.Fatal("Release returned: Now was not read")
		}
		whole(t, b, 0) // released all the same
		if err := b.Release(p); !errors.Is(err, bulkhead.ErrUnknownPermit) {
			t.Fatalf("the permit released again: %v, want ErrUnknownPermit", err)
		}
	})
	t.Run("leave", func(t *testing.T) {
		c := newExitingClock()
		b := observed(c, bulkhead.WithQueue(1, time.Hour))
		held := acquire(t, b, 1)
		ctx, cancel := context.WithCancel(bg)
		w := queueWith(t, ctx, b, 1)[0]
		c.now.Store(true)
		cancel()  // the waiter leaves, reading Now on its goroutine
		w.wait(t) // its goroutine exits
		whole(t, b, 1)
		release(t, b, held)
		whole(t, b, 0)
	})
	t.Run("time out", func(t *testing.T) {
		c := newExitingClock()
		b := observed(c, bulkhead.WithQueue(1, time.Second))
		held := acquire(t, b, 1)
		w := queueWith(t, bg, b, 1)[0]
		armed(t, c, 1)
		c.now.Store(true) // read by the timer, on a goroutine of its own
		c.Advance(time.Second)
		if _, err := w.wait(t); !errors.Is(err, bulkhead.ErrQueueTimeout) {
			t.Fatalf("the waiter whose timer fired: %v, want ErrQueueTimeout", err)
		}
		// The timer's goroutine wakes the waiter before it lets go of the
		// mutex, as it exits.
		eventually(t, "the timer to let go of the mutex", func() bool { return !bulkhead.Locked(b) })
		whole(t, b, 1)
		release(t, b, held)
	})
	t.Run("serve after a lock-free release", func(t *testing.T) {
		c := newExitingClock()
		b := newBH(t, 1, bulkhead.WithClock(c), bulkhead.WithQueue(1, time.Hour)) // no observer: Release is lock-free
		held := acquire(t, b, 1)
		w := queueWith(t, bg, b, 1)[0]
		c.now.Store(true)
		exits(t, func() { _ = b.Release(held) }) // serves the waiter, reading Now
		p, err := w.wait(t)
		if err != nil {
			t.Fatalf("the waiter a release made room for: %v", err)
		}
		whole(t, b, 1)
		release(t, b, p)
	})
	t.Run("submit", func(t *testing.T) {
		c := newExitingClock()
		b := newBH(t, 1, bulkhead.WithClock(c))
		ran := false
		h, start, err := bulkhead.SubmitUnstarted(b, bg, func(context.Context) (int, error) {
			ran = true
			return 1, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		c.now.Store(true) // as the run is timed
		<-start()
		ctx, cancel := context.WithTimeout(bg, 10*time.Second) // a hang guard
		defer cancel()
		r, err := h.Wait(ctx)
		if err != nil || r.Status != bulkhead.Failed || !errors.Is(r.Err, bulkhead.ErrGoexit) || ran {
			t.Fatalf("Wait: %+v, %v, ran %v; want Failed with ErrGoexit, fn not run", r, err, ran)
		}
		whole(t, b, 0)
	})
}

// A clock's AfterFunc, arming a waiter's maximum wait, and its timer's
// Stop, once the wait is over, are user code too: one that exits the
// goroutine ends the acquire it was called for as a context that does
// (ErrGoexit): the waiter leaves the queue, or its permit goes back.
func TestClockTimerExitingTheGoroutine(t *testing.T) {
	t.Run("AfterFunc", func(t *testing.T) {
		c := newExitingClock()
		b := newBH(t, 1, bulkhead.WithClock(c), bulkhead.WithQueue(1, time.Hour))
		held := acquire(t, b, 1)
		c.after.Store(true)
		if exits(t, func() { _, _ = b.Acquire(bg, 1) }) {
			t.Fatal("Acquire returned: it did not wait")
		}
		whole(t, b, 1)
		release(t, b, held)
		whole(t, b, 0)
	})
	t.Run("Stop", func(t *testing.T) {
		c := newExitingClock()
		b := newBH(t, 1, bulkhead.WithClock(c), bulkhead.WithQueue(1, time.Hour))
		held := acquire(t, b, 1)
		w := queueWith(t, bg, b, 1)[0]
		c.stop.Store(true)
		exits(t, func() { _ = b.Release(held) }) // serves the waiter
		w.wait(t)                                // its goroutine exits
		whole(t, b, 0)                           // the permit issued to it went back
	})
}

// A Stop that exits the goroutine while an acquire is already ending
// (its listener exited the goroutine, or its context's Done panicked, after
// the waiter was granted) must not give the permit back a second time: the
// second release finds it no longer out and panics. Nor does the exit drop
// the context's panic: the caller gets it.
func TestClockStopExitingAsAnAcquireEnds(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(*doneBomb) // what ends the acquire, once its waiter is granted
		want any             // what the caller recovers
	}{
		{"listener exits", func(*doneBomb) { runtime.Goexit() }, nil},
		{"context panics", func(ctx *doneBomb) { ctx.armed.Store(true) }, "Done"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newExitingClock()
			ctx := &doneBomb{Context: bg}
			var b *bulkhead.Bulkhead
			var held bulkhead.Permit
			var queued atomic.Bool
			b = newBH(t, 1, bulkhead.WithClock(c), bulkhead.WithQueue(1, time.Hour),
				bulkhead.WithListener(bulkhead.ListenerFunc(func(e bulkhead.Event) {
					if e.Code == bulkhead.EventRequestQueued && queued.CompareAndSwap(false, true) {
						_ = b.Release(held) // grants the waiter before it waits
						c.stop.Store(true)  // for the stop of its timer as it ends
						tc.end(ctx)
					}
				})))
			held = acquire(t, b, 1)
			done := make(chan any, 1)
			go func() {
				var r any
				defer func() { done <- r }()
				defer func() { r = recover() }()
				_, _ = b.Acquire(ctx, 1)
			}()
			select {
			case r := <-done:
				if r != tc.want {
					t.Fatalf("the acquire's caller recovered %v, want %v", r, tc.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the goroutine did not end")
			}
			whole(t, b, 0) // the permit granted to the waiter went back, once
		})
	}
}

// doneBomb is a context whose Done panics once armed.
type doneBomb struct {
	context.Context
	armed atomic.Bool
}

func (c *doneBomb) Done() <-chan struct{} {
	if c.armed.Load() {
		panic("Done")
	}
	return c.Context.Done()
}
