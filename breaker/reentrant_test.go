package breaker_test

import (
	"testing"
	"time"

	"github.com/groupexec/groupexec/breaker"
)

// ReadyToTrip and IsSuccessful may call back into the breaker (it holds no
// lock while calling them). A ReadyToTrip that records a failure of its
// own trips the breaker from inside the outer failure's call: the breaker
// opens once, reported once, and the outer call, returning true on a
// period that has ended meanwhile, makes no second transition.
func TestCallbacksCallingBackIntoTheBreaker(t *testing.T) {
	clk := &fakeClock{}
	var rec recorder
	var cb *breaker.CircuitBreaker
	depth := 0
	cb = mustNew(t, breaker.Settings{
		Timeout: time.Second,
		Clock:   clk,
		ReadyToTrip: func(c breaker.Counts) bool {
			if c.ConsecutiveFailures == 2 && depth == 0 {
				depth++
				defer func() { depth-- }()
				wantErr(t, run(cb, false), errBoom) // trips inside
				wantState(t, cb, breaker.StateOpen)
			}
			return c.ConsecutiveFailures >= 2
		},
		IsSuccessful: func(err error) bool {
			_ = cb.State()
			_ = cb.Counts()
			return err == nil
		},
		OnStateChange: rec.record,
	})
	wantErr(t, run(cb, false), errBoom)
	wantErr(t, run(cb, false), errBoom) // its ReadyToTrip records a third
	wantState(t, cb, breaker.StateOpen)
	if got, want := rec.take(), []string{"closed->open"}; !equal(got, want) {
		t.Fatalf("transitions %v, want %v", got, want)
	}
	wantErr(t, run(cb, true), breaker.ErrOpenState)
	clk.Advance(time.Second)
	wantErr(t, run(cb, true), nil)
	wantState(t, cb, breaker.StateClosed)
	if got, want := rec.take(), []string{"open->half-open", "half-open->closed"}; !equal(got, want) {
		t.Fatalf("transitions %v, want %v", got, want)
	}
}
