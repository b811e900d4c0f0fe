package breaker_test

import (
	"testing"
	"time"

	"github.com/groupexec/groupexec/breaker"
)

// A probe that is never finished keeps its slot however long it takes, as
// Settings.MaxRequests says: the breaker stays half-open, refusing, until
// the probe reports. Nothing times a probe out.
func TestUnfinishedProbeKeepsItsSlot(t *testing.T) {
	clk := &fakeClock{}
	cb := mustNew(t, breaker.Settings{Timeout: time.Second, Clock: clk})
	trip(t, cb)
	clk.Advance(time.Second)
	probe, err := cb.AllowTicket()
	wantErr(t, err, nil)
	for range 3 {
		clk.Advance(24 * time.Hour)
		wantErr(t, run(cb, true), breaker.ErrTooManyRequests)
		wantState(t, cb, breaker.StateHalfOpen)
	}
	probe.Success()
	wantState(t, cb, breaker.StateClosed)
	wantErr(t, run(cb, true), nil)
}
