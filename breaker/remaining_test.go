package breaker_test

import (
	"testing"
	"time"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/clock"
)

// RemainingDelay is what is left of Timeout while the breaker is open, on
// the breaker's clock, and 0 in every other state: what a service tells a
// refused client to wait (Retry-After).
func TestRemainingDelayIsOpenTimeLeft(t *testing.T) {
	clk := clock.NewFake(t0)
	cb := mustNew(t, breaker.Settings{Timeout: 30 * time.Second, Clock: clk})
	wantRemaining(t, cb, 0) // closed

	trip(t, cb)
	wantRemaining(t, cb, 30*time.Second)
	clk.Advance(12 * time.Second)
	wantRemaining(t, cb, 18*time.Second)
	wantErr(t, run(cb, true), breaker.ErrOpenState) // a refusal does not move it
	wantRemaining(t, cb, 18*time.Second)

	clk.Advance(18*time.Second - time.Nanosecond)
	wantRemaining(t, cb, time.Nanosecond)
	wantErr(t, run(cb, true), breaker.ErrOpenState)

	// Open past its Timeout, it lets the next request through: nothing
	// left to wait, though State still says open until that request.
	clk.Advance(time.Hour)
	wantState(t, cb, breaker.StateOpen)
	wantRemaining(t, cb, 0)

	// Half-open, a probe in flight: 0, the answer comes within a request.
	done, err := cb.Allow()
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, cb, breaker.StateHalfOpen)
	wantRemaining(t, cb, 0)

	// The probe fails: open again, for a whole Timeout from now.
	done(false)
	wantState(t, cb, breaker.StateOpen)
	wantRemaining(t, cb, 30*time.Second)
}

// The default Timeout counts: a breaker of zero Settings stays open 60 s.
func TestRemainingDelayDefaultTimeout(t *testing.T) {
	clk := clock.NewFake(t0)
	cb := mustNew(t, breaker.Settings{Clock: clk})
	trip(t, cb)
	wantRemaining(t, cb, breaker.DefaultTimeout)
}

func wantRemaining(t *testing.T, cb *breaker.CircuitBreaker, want time.Duration) {
	t.Helper()
	if got := cb.RemainingDelay(); got != want {
		t.Fatalf("RemainingDelay() = %v, want %v (state %v)", got, want, cb.State())
	}
}

// A clock that steps backwards (a Settings.Clock without a monotonic
// reading, set back by an hour) must not keep the breaker open for the step
// on top of its Timeout, nor make RemainingDelay promise more than Timeout:
// the breaker restarts its Timeout from the first request that sees the
// clock earlier than the moment it opened.
func TestBackwardClockDoesNotStretchOpen(t *testing.T) {
	clk := &fakeClock{}
	clk.Set(2 * time.Hour)
	var rec recorder
	cb := mustNew(t, breaker.Settings{Timeout: 30 * time.Second, Clock: clk, OnStateChange: rec.record})
	trip(t, cb)
	rec.take()
	clk.Set(time.Hour) // an hour back
	if got := cb.RemainingDelay(); got != 30*time.Second {
		t.Fatalf("RemainingDelay() = %v after the clock stepped back, want the Timeout, 30s", got)
	}
	wantErr(t, run(cb, true), breaker.ErrOpenState) // restarts the Timeout
	clk.Advance(30*time.Second - time.Nanosecond)
	wantRemaining(t, cb, time.Nanosecond)
	wantErr(t, run(cb, true), breaker.ErrOpenState)
	clk.Advance(time.Nanosecond)
	wantErr(t, run(cb, true), nil) // the probe
	wantState(t, cb, breaker.StateClosed)
	if got := rec.take(); !equal(got, []string{"open->half-open", "half-open->closed"}) {
		t.Fatalf("transitions %v: restarting the Timeout is no change of state", got)
	}
}
