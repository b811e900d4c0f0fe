package bulkhead_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/bulkhead"
	"github.com/groupexec/groupexec/clock"
)

// nowBrokenClock is a fake clock whose Now panics while broken is set and
// whose timers keep working.
type nowBrokenClock struct {
	*clock.Fake
	broken atomic.Bool
}

func (c *nowBrokenClock) Now() time.Time {
	if c.broken.Load() {
		panic("nowBrokenClock: Now")
	}
	return c.Fake.Now()
}

// While Now panics time stands still to the bulkhead, but a waiter's timer
// armed before still times it out when the clock fires it (WithClock): the
// clock says the maximum wait has passed, and nothing else would end the
// wait. The refusal is a queue time-out, the waiter holds nothing, and the
// bulkhead goes on once Now answers again.
func TestWaiterTimerFiresWhileNowPanics(t *testing.T) {
	clk := &nowBrokenClock{Fake: clock.NewFake(t0)}
	b := newBH(t, 1, bulkhead.WithClock(clk), bulkhead.WithQueue(1, time.Second))
	held := acquire(t, b, 1)
	w := acquireAsync(bg, b, 1)
	armed(t, clk.Fake, 1)
	clk.broken.Store(true)
	clk.Advance(time.Second)
	_, err := w.wait(t)
	var rej *bulkhead.RejectedError
	if !errors.As(err, &rej) || rej.Err != bulkhead.ErrQueueTimeout {
		t.Fatalf("a waiter whose timer fired while Now panics: %v, want ErrQueueTimeout", err)
	}
	if s := stateOf(b); s.inFlight != 1 || s.queued != 0 {
		t.Fatalf("after the time-out: %+v", s)
	}
	clk.broken.Store(false)
	release(t, b, held)
	release(t, b, acquire(t, b, 1))
}
