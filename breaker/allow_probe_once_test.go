package breaker_test

import (
	"testing"
	"time"

	"github.com/groupexec/groupexec/breaker"
)

// A half-open probe's done counts once while its period is still current:
// a second done(true) is no second consecutive success (it would close a
// breaker that needs two), and gives no second slot back (a third probe
// would then get in beside two others).
func TestHalfOpenDoneCalledTwiceCountsOnce(t *testing.T) {
	clk := &fakeClock{}
	cb := mustNew(t, breaker.Settings{Clock: clk, MaxRequests: 2, ReadyToTrip: func(breaker.Counts) bool { return true }})
	tripping, err := cb.Allow()
	wantErr(t, err, nil)
	tripping(false)
	wantState(t, cb, breaker.StateOpen)
	clk.Advance(time.Minute)

	done, err := cb.Allow()
	wantErr(t, err, nil)
	wantState(t, cb, breaker.StateHalfOpen)
	done(true)
	done(true)
	wantState(t, cb, breaker.StateHalfOpen)
	if c := cb.Counts(); c.TotalSuccesses != 1 || c.ConsecutiveSuccesses != 1 {
		t.Fatalf("counts after one probe's done called twice: %+v, want 1 success", c)
	}
	var open []func(bool)
	for range 2 {
		d, err := cb.Allow()
		wantErr(t, err, nil)
		open = append(open, d)
	}
	if _, err := cb.Allow(); err != breaker.ErrTooManyRequests {
		t.Fatalf("a third probe beside two in flight (MaxRequests 2): %v", err)
	}
	for _, d := range open {
		d(true)
	}
	wantState(t, cb, breaker.StateClosed)
}
