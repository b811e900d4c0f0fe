package breaker_test

import (
	"testing"
	"time"

	"github.com/groupexec/groupexec/breaker"
)

// hookClock is a fakeClock that calls hook, once, the next time it is read:
// the breaker reads it to start a new period, so hook runs while the
// outcome that ends the current one is being recorded.
type hookClock struct {
	fakeClock
	hook func()
}

func (c *hookClock) Now() time.Time {
	if h := c.hook; h != nil {
		c.hook = nil
		h()
	}
	return c.fakeClock.Now()
}

// A probe's slot is given back only once the period its outcome ends has
// ended: a request that comes while the failure of the last probe is being
// recorded is refused, not let through the half-open period that the
// failure is closing, and a request that comes while the last success
// closes the breaker is not made a probe of the period that success ends,
// whose late outcome would count nowhere.
func TestProbeSlotHeldUntilItsOutcomeEndsThePeriod(t *testing.T) {
	for _, ok := range []bool{false, true} {
		clk := &hookClock{}
		cb := mustNew(t, breaker.Settings{MaxRequests: 1, Timeout: time.Second, Interval: time.Minute, Clock: clk})
		trip(t, cb)
		clk.Advance(time.Second)
		probe, err := cb.AllowTicket()
		if err != nil || !probe.Probe() {
			t.Fatalf("the probe after the timeout: %v, probe %v", err, probe.Probe())
		}
		var during breaker.Ticket
		var duringErr error
		clk.hook = func() { during, duringErr = cb.AllowTicket() }
		if ok {
			probe.Success()
			wantState(t, cb, breaker.StateClosed)
		} else {
			probe.Failure()
			wantState(t, cb, breaker.StateOpen)
		}
		if clk.hook != nil {
			t.Fatal("the breaker did not read the clock as the period ended")
		}
		if duringErr == nil && during.Probe() {
			t.Errorf("probe success %v: a request that came as the probe's outcome ended the half-open period was let through as another probe of it", ok)
		}
		during.Ignore()
	}
}

// A probe's slot goes back as its outcome moves the breaker, before
// OnStateChange: a callback slower than the breaker's Timeout does not keep
// the next half-open period from letting its probe through.
func TestProbeSlotBackBeforeOnStateChange(t *testing.T) {
	for _, ok := range []bool{false, true} {
		clk := &fakeClock{}
		entered, release := make(chan struct{}), make(chan struct{})
		var slow bool
		cb := mustNew(t, breaker.Settings{MaxRequests: 1, Timeout: time.Second, Interval: time.Minute, Clock: clk,
			OnStateChange: func(_ string, from, _ breaker.State) {
				if slow && from == breaker.StateHalfOpen {
					close(entered)
					<-release
				}
			}})
		trip(t, cb)
		clk.Advance(time.Second)
		probe, err := cb.AllowTicket()
		if err != nil || !probe.Probe() {
			t.Fatalf("the probe after the timeout: %v, probe %v", err, probe.Probe())
		}
		slow = true
		done := make(chan struct{})
		go func() {
			defer close(done)
			if ok {
				probe.Success()
			} else {
				probe.Failure()
			}
		}()
		<-entered // the callback of the probe's outcome runs, and waits
		if ok {
			// Closed: the next request goes through, no probe needed.
			next, err := cb.AllowTicket()
			if err != nil {
				t.Errorf("closed breaker, its callback still running: %v", err)
			}
			next.Ignore()
		} else {
			clk.Advance(time.Second) // the reopened breaker's Timeout passes
			next, err := cb.AllowTicket()
			if err != nil || !next.Probe() {
				t.Errorf("the next half-open period's probe, the last one's callback still running: %v, probe %v", err, next.Probe())
			}
			next.Ignore()
		}
		close(release)
		<-done
	}
}
