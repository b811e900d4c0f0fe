package bulkhead_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/bulkhead"
	"github.com/groupexec/groupexec/clock"
)

// tickingClock moves on by a nanosecond at every reading, as a real clock
// does between two readings; its timers never fire.
type tickingClock struct {
	ns atomic.Int64
}

func (c *tickingClock) Now() time.Time                              { return t0.Add(time.Duration(c.ns.Add(1))) }
func (c *tickingClock) AfterFunc(time.Duration, func()) clock.Timer { return stuckTimer{} }

// The event log is in time order: an acquire that first times out a waiter
// past its maximum wait and is then issued its permit logs the permit after
// the time-out, at a time no earlier.
func TestEventLogTimesNeverGoBack(t *testing.T) {
	clk := &tickingClock{}
	b := newBH(t, 2, bulkhead.WithQueue(1, time.Second), bulkhead.WithClock(clk), bulkhead.WithEventLog(32))
	held := acquire(t, b, 1)
	heavy := acquireAsync(bg, b, 2) // waits: one of two permits is out
	eventually(t, "the heavy request to queue", func() bool { return b.QueueDepth() == 1 })
	clk.ns.Add(int64(time.Hour)) // past its maximum wait; its timer never fires
	p := acquire(t, b, 1)        // times the heavy request out, then is issued
	if _, err := heavy.wait(t); err == nil {
		t.Fatal("the heavy request was granted")
	}
	release(t, b, p)
	release(t, b, held)
	es := b.Events()
	for i := 1; i < len(es); i++ {
		if es[i].Time.Before(es[i-1].Time) {
			t.Fatalf("event %d (%s at %v) is logged after event %d (%s at %v)", i, es[i].Code, es[i].Time.Sub(t0), i-1, es[i-1].Code, es[i-1].Time.Sub(t0))
		}
	}
}

// A clock given to WithClock that is set back (a test clock, a wall clock
// stepped by NTP) does not take the bulkhead back in time: event times,
// permit times and latencies read as if time stood still until the clock
// catches up, never earlier than a reading the bulkhead has already used,
// and no duration comes out negative.
func TestClockSetBackNeverTakesTimeBack(t *testing.T) {
	clk := &fakeNow{now: t0}
	b := newBH(t, 2, bulkhead.WithClock(clk), bulkhead.WithEventLog(32))
	clk.now = t0.Add(time.Hour)
	first := acquire(t, b, 1)
	clk.now = t0.Add(-time.Hour) // set back, before the bulkhead's start
	second := acquire(t, b, 1)
	if second.IssuedAt().Before(first.IssuedAt()) {
		t.Errorf("permit %d issued at %v, after permit %d issued at %v", second.ID(), second.IssuedAt().Sub(t0), first.ID(), first.IssuedAt().Sub(t0))
	}
	release(t, b, second)
	release(t, b, first)
	h, err := bulkhead.Submit(b, bg, func(context.Context) (int, error) {
		clk.now = t0.Add(-2 * time.Hour) // set back while the function runs
		return 0, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	result(t, h)
	if p, ok := b.P99(); !ok || p != 0 {
		t.Errorf("P99 %v (%v) for a run the clock saw end before it began, want 0", p, ok)
	}
	es := b.Events()
	for i, e := range es {
		if e.Latency < 0 {
			t.Errorf("event %d (%s) has latency %v", i, e.Code, e.Latency)
		}
		if i > 0 && e.Time.Before(es[i-1].Time) {
			t.Errorf("event %d (%s at %v) is logged after event %d (%s at %v)", i, e.Code, e.Time.Sub(t0), i-1, es[i-1].Code, es[i-1].Time.Sub(t0))
		}
	}
}

// The same for permits issued on the lock-free fast path, which reads the
// clock holding no lock.
func TestClockSetBackNeverDatesAFastPermitBack(t *testing.T) {
	clk := &fakeNow{now: t0}
	b := newBH(t, 2, bulkhead.WithClock(clk))
	clk.now = t0.Add(time.Hour)
	first := acquire(t, b, 1)
	clk.now = t0.Add(-time.Hour)
	second := acquire(t, b, 1)
	if slow, _ := b.Counters(); slow != 0 {
		t.Fatalf("%d permits issued under the mutex, want both on the fast path", slow)
	}
	if second.IssuedAt().Before(first.IssuedAt()) {
		t.Errorf("permit %d issued at %v, after permit %d issued at %v", second.ID(), second.IssuedAt().Sub(t0), first.ID(), first.IssuedAt().Sub(t0))
	}
	release(t, b, second)
	release(t, b, first)
}
