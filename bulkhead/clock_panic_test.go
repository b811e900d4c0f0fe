package bulkhead_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/bulkhead"
	"github.com/groupexec/groupexec/clock"
)

// brokenClock is a fake clock whose methods panic while broken is set, as
// a faulty clock given to WithClock might.
type brokenClock struct {
	*clock.Fake
	broken atomic.Bool
}

func (c *brokenClock) Now() time.Time {
	if c.broken.Load() {
		panic("brokenClock: Now")
	}
	return c.Fake.Now()
}

func (c *brokenClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	if c.broken.Load() {
		panic("brokenClock: AfterFunc")
	}
	return c.Fake.AfterFunc(d, f)
}

// A clock given to WithClock is read ahead of the bulkhead's mutex, and its
// timers armed by the waiters: a panic there must not leave the mutex held,
// or every later call would block for good. Time stands still while Now panics, and
// a waiter whose timer could not be armed times out when a later call finds
// it past its maximum wait.
func TestPanickingClockLeavesNoLockHeld(t *testing.T) {
	clk := &brokenClock{Fake: clock.NewFake(t0)}
	g := newGate()
	b := newBH(t, 1, bulkhead.WithClock(clk), bulkhead.WithQueue(1, time.Second), bulkhead.WithListener(g))
	clk.Advance(time.Minute)
	held := acquire(t, b, 1)
	clk.broken.Store(true)

	// queue starts an Acquire that must wait, and returns once it waits;
	// it fails the test if the Acquire panics instead.
	queue := func() *pending {
		t.Helper()
		w := &pending{done: make(chan struct{})}
		panicked := make(chan any, 1)
		go func() {
			defer close(w.done)
			defer func() { panicked <- recover() }()
			w.p, w.err = b.Acquire(bg, 1)
		}()
		select {
		case <-g.queued:
			g.proceed <- struct{}{}
		case r := <-panicked:
			if bulkhead.Locked(b) {
				t.Fatalf("Acquire panicked (%v) and left the bulkhead's mutex held", r)
			}
			t.Fatalf("Acquire panicked: %v", r)
		}
		return w
	}

	// Now panics as the acquire stamps its events and its deadline, and
	// AfterFunc as it arms the waiter's timer.
	w1 := queue()
	release(t, b, held) // Now panics as the release stamps its events and serves w1
	p1, err := w1.wait(t)
	if err != nil {
		t.Fatalf("the waiter served by the release: %v", err)
	}
	if got := p1.IssuedAt(); !got.Equal(t0.Add(time.Minute)) {
		t.Errorf("permit issued at %v while Now panicked, want the latest reading, %v", got, t0.Add(time.Minute))
	}

	// A waiter with no timer times out when a call finds it past its
	// maximum wait.
	w2 := queue()
	clk.broken.Store(false)
	clk.Advance(time.Second)
	if _, err := b.TryAcquire(bg, 1); !errors.Is(err, bulkhead.ErrAtCapacity) {
		t.Fatalf("TryAcquire with the permit held: %v, want ErrAtCapacity", err)
	}
	if _, err := w2.wait(t); !errors.Is(err, bulkhead.ErrQueueTimeout) {
		t.Fatalf("the waiter whose timer could not be armed: %v, want ErrQueueTimeout", err)
	}
	release(t, b, p1)
	if s := stateOf(b); s.inFlight != 0 || s.queued != 0 {
		t.Fatalf("%+v", s)
	}
	if err := b.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// Submit's goroutine reads the clock to time the run. A clock whose Now
// panics there must not end the program, nor keep the permit: the handle
// completes as the function did, and the run, which the clock could not
// time, records no latency.
func TestPanickingClockOnSubmitsGoroutine(t *testing.T) {
	for _, tc := range []struct {
		name       string
		breakFirst bool // the clock breaks before the run starts, or as fn runs
		panics     bool // fn panics
		want       bulkhead.Status
	}{
		{"at the start", true, false, bulkhead.Success},
		{"at the end", false, false, bulkhead.Success},
		{"at the end of a panicking run", false, true, bulkhead.Failed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := &brokenClock{Fake: clock.NewFake(t0)}
			b := newBH(t, 1, bulkhead.WithClock(clk))
			h, start, err := bulkhead.SubmitUnstarted(b, bg, func(context.Context) (int, error) {
				clk.broken.Store(true)
				if tc.panics {
					panic("fn")
				}
				return 7, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			clk.broken.Store(tc.breakFirst)
			<-start()
			r, err := h.Wait(bg)
			if err != nil || r.Status != tc.want {
				t.Fatalf("Wait: %+v, %v; want %v", r, err, tc.want)
			}
			if n := b.InFlight(); n != 0 {
				t.Errorf("%d permits in flight after the handle completed", n)
			}
			if d, ok := b.P99(); ok {
				t.Errorf("P99 = %v: a run the clock could not time recorded a latency", d)
			}
		})
	}
}
