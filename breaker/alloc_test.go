package breaker_test

import (
	"testing"
	"time"

	"github.com/groupexec/groupexec/breaker"
)

// TestNoAllocations checks the requests that must not allocate: every closed
// state path, with the counters in base and spread over cells, refusals, and
// half-open probes through AllowTicket.
func TestNoAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation counts")
	}
	fn := func() (int, error) { return 1, nil }
	failFn := func() (int, error) { return 0, errBoom }
	never := func(breaker.Counts) bool { return false }
	for _, spread := range []bool{false, true} {
		cb := mustNew(t, breaker.Settings{ReadyToTrip: never})
		if spread {
			breaker.Spread(cb)
		}
		for name, op := range map[string]func(){
			"Execute":        func() { _, _ = breaker.Execute(cb, fn) },
			"Execute/fail":   func() { _, _ = breaker.Execute(cb, failFn) },
			"Allow+done":     func() { done, _ := cb.Allow(); done(true) },
			"Allow+done/f":   func() { done, _ := cb.Allow(); done(false) },
			"Ticket+Success": func() { tk, _ := cb.AllowTicket(); tk.Success() },
			"Ticket+Failure": func() { tk, _ := cb.AllowTicket(); tk.Failure() },
			"Ticket+Ignore":  func() { tk, _ := cb.AllowTicket(); tk.Ignore() },
			"State+Counts":   func() { _ = cb.State(); _ = cb.Counts() },
		} {
			if n := testing.AllocsPerRun(1000, op); n != 0 {
				t.Errorf("spread=%v %s: %v allocations per run, want 0", spread, name, n)
			}
		}
	}

	clk := &fakeClock{}
	cb := mustNew(t, breaker.Settings{MaxRequests: 1 << 20, Clock: clk})
	trip(t, cb)
	if n := testing.AllocsPerRun(1000, func() { _, _ = breaker.Execute(cb, fn) }); n != 0 {
		t.Errorf("refused while open: %v allocations per run, want 0", n)
	}
	clk.Advance(time.Minute)
	_ = run(cb, true) // half-open now; a million probes to close
	if n := testing.AllocsPerRun(1000, func() { tk, _ := cb.AllowTicket(); tk.Ignore() }); n != 0 {
		t.Errorf("half-open probe ticket: %v allocations per run, want 0", n)
	}
}
