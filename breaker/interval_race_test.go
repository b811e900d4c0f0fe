package breaker_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/breaker"
)

// stallClock is a fakeClock whose nth Now call made by one chosen goroutine
// blocks until released: a test stops that goroutine at a chosen point
// inside the breaker and runs others meanwhile.
type stallClock struct {
	fakeClock
	gid     atomic.Uint64 // the goroutine whose calls are counted; 0: none
	calls   atomic.Int64
	stallAt int64
	entered chan struct{}
	release chan struct{}
}

func newStallClock(n int64) *stallClock {
	return &stallClock{stallAt: n, entered: make(chan struct{}), release: make(chan struct{})}
}

func (c *stallClock) Now() time.Time {
	if id := c.gid.Load(); id != 0 && id == goid() && c.calls.Add(1) == c.stallAt {
		close(c.entered)
		<-c.release
	}
	return c.fakeClock.Now()
}

// A request made after the end of the interval belongs to the next period,
// even while another request is still starting that period: its failure
// must not be counted with the ended period's failures, nor trip the
// breaker on them.
func TestRequestAfterIntervalEndIsNotCountedInTheEndedPeriod(t *testing.T) {
	// The stalled goroutine's first Now is admit's look at the interval's
	// end; its second is the new period's, as it starts it.
	clk := newStallClock(2)
	var rec recorder
	cb := mustNew(t, breaker.Settings{Interval: 10 * time.Second, Clock: clk, OnStateChange: rec.record})
	for range 4 {
		wantErr(t, run(cb, false), errBoom)
	}
	clk.Advance(10 * time.Second) // the period has ended

	var wg sync.WaitGroup
	var errA error
	wg.Add(1)
	go func() {
		defer wg.Done()
		clk.gid.Store(goid())
		errA = run(cb, true)
	}()
	select {
	case <-clk.entered: // A is starting the next period
	case <-time.After(10 * time.Second):
		t.Fatal("the first request after the interval never started the next period")
	}
	// B, after the end too: serially, whichever of A and B came first
	// cleared the four failures, and B's is the first of the new period.
	wantErr(t, run(cb, false), errBoom)
	close(clk.release)
	wg.Wait()

	if got := rec.take(); len(got) != 0 {
		t.Fatalf("transitions %v, want none", got)
	}
	wantState(t, cb, breaker.StateClosed)
	wantErr(t, errA, nil)
	wantCounts(t, cb, breaker.Counts{Requests: 2, TotalSuccesses: 1, TotalFailures: 1, ConsecutiveSuccesses: 1})
}
