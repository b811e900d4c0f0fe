package breaker_test

import (
	"math"
	"testing"
	"time"

	"github.com/groupexec/groupexec/breaker"
)

// forever is the largest Duration, the value a caller picks for "never".
const forever = time.Duration(math.MaxInt64)

// A clock stepped back must restart the Timeout even when the Timeout is
// the largest Duration: the time left until the old end is then more than
// a Duration holds, and Time.Sub saturates at exactly the Timeout.
func TestBackwardClockRestartsTheLargestTimeout(t *testing.T) {
	clk := &timeClock{t: t0}
	cb := mustNew(t, breaker.Settings{Timeout: forever, Clock: clk})
	trip(t, cb)
	clk.t = t0.Add(-time.Hour)                      // an hour back
	wantErr(t, run(cb, true), breaker.ErrOpenState) // restarts the Timeout from here
	clk.t = t0.Add(-time.Hour).Add(forever)         // a Timeout later, an hour before the old end
	wantErr(t, run(cb, true), nil)
	wantState(t, cb, breaker.StateClosed)
}

// Likewise a closed period of the largest Interval ends when the clock
// steps back past its start: its failures stop counting.
func TestBackwardClockEndsThePeriodOfTheLargestInterval(t *testing.T) {
	clk := &timeClock{t: t0}
	cb := mustNew(t, breaker.Settings{Interval: forever, Clock: clk})
	for range 4 {
		wantErr(t, run(cb, false), errBoom)
	}
	clk.t = t0.Add(-time.Second)
	wantErr(t, run(cb, false), errBoom) // the first failure of a new period
	wantState(t, cb, breaker.StateClosed)
	wantCounts(t, cb, breaker.Counts{Requests: 1, TotalFailures: 1, ConsecutiveFailures: 1})
}
