package breaker_test

import (
	"testing"
	"time"

	"github.com/groupexec/groupexec/breaker"
)

// A failure reported after the interval has ended, before any request has
// started the next period, must not trip the breaker on the ended period's
// failures: those have stopped counting.
func TestFailureAfterIntervalEndDoesNotTripOnTheEndedPeriod(t *testing.T) {
	clk := &fakeClock{}
	var rec recorder
	cb := mustNew(t, breaker.Settings{Interval: 10 * time.Second, Clock: clk, OnStateChange: rec.record})
	for range 4 {
		wantErr(t, run(cb, false), errBoom)
	}
	tk, err := cb.AllowTicket()
	wantErr(t, err, nil)
	clk.Advance(10 * time.Second) // the period has ended
	tk.Failure()
	if got := rec.take(); len(got) != 0 {
		t.Fatalf("transitions %v, want none", got)
	}
	wantState(t, cb, breaker.StateClosed)
	wantErr(t, run(cb, true), nil)
	wantCounts(t, cb, breaker.Counts{Requests: 1, TotalSuccesses: 1, ConsecutiveSuccesses: 1})
}

// steppingClock moves on by step at every reading, as a real clock does
// between two readings of a request: an Interval shorter than that time
// ends each period before the request that started it looks at it again.
type steppingClock struct {
	fakeClock
	step time.Duration
}

func (c *steppingClock) Now() time.Time {
	c.Advance(c.step)
	return c.fakeClock.Now()
}

// A request that finds the period ended starts the next one and counts in
// it, however short the Interval: it does not look at the clock again and
// find that period ended too, which loops for ever once each reading of the
// clock is more than the Interval after the last.
func TestIntervalShorterThanAClockReading(t *testing.T) {
	clk := &steppingClock{step: time.Second}
	cb := mustNew(t, breaker.Settings{Interval: time.Nanosecond, Clock: clk})
	done := make(chan error, 1)
	go func() {
		done <- run(cb, true)
		if err := run(cb, false); err != errBoom {
			done <- err
			return
		}
		tk, err := cb.AllowTicket()
		if err == nil {
			tk.Success()
		}
		done <- err
	}()
	for range 2 {
		select {
		case err := <-done:
			wantErr(t, err, nil)
		case <-time.After(10 * time.Second):
			t.Fatal("a request never got through a breaker whose periods end between two readings of its clock")
		}
	}
	wantState(t, cb, breaker.StateClosed)
}

// A clock that steps back (a Settings.Clock without a monotonic reading)
// must not keep the counts of a closed period for the step on top of
// Interval: the first request that finds the clock earlier than the moment
// the period started starts the next one, and the failures before it stop
// counting, as they would have an Interval later.
func TestBackwardClockDoesNotStretchInterval(t *testing.T) {
	clk := &fakeClock{}
	clk.Set(2 * time.Hour)
	cb := mustNew(t, breaker.Settings{Interval: 10 * time.Second, Clock: clk})
	for range 4 {
		wantErr(t, run(cb, false), errBoom)
	}
	clk.Set(time.Hour) // an hour back
	clk.Advance(10 * time.Second)
	wantErr(t, run(cb, false), errBoom) // the first failure of a new period
	wantState(t, cb, breaker.StateClosed)
	wantCounts(t, cb, breaker.Counts{Requests: 1, TotalFailures: 1, ConsecutiveFailures: 1})
}
