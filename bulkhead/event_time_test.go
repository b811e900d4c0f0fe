package bulkhead_test

import (
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
