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
