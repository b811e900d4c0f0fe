package breaker_test

import (
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/groupexec/groupexec/breaker"
)

// An OnStateChange that exits its goroutine (runtime.Goexit, which the
// breaker cannot recover) ends the call that made the change, and nothing
// else: the change stands, and no probe slot is kept by the request or
// outcome whose goroutine exited, for every transition: closed->open on a
// failure, open->half-open on an admission (the request that moved it is not
// let through), half-open->closed on a probe's success, half-open->open on a
// probe's failure.
func TestOnStateChangeExitingKeepsNoProbeSlot(t *testing.T) {
	clk := &fakeClock{}
	cb := mustNew(t, breaker.Settings{
		MaxRequests: 1,
		Timeout:     time.Second,
		Clock:       clk,
		OnStateChange: func(string, breaker.State, breaker.State) {
			runtime.Goexit()
		},
	})
	// exiting runs f on a goroutine of its own, which OnStateChange ends,
	// and reports whether f returned.
	exiting := func(f func()) (returned bool) {
		done := make(chan struct{})
		go func() {
			defer close(done)
			f()
			returned = true
		}()
		<-done
		return returned
	}
	fail := func() { _, _ = breaker.Execute(cb, func() (int, error) { return 0, errBoom }) }
	trip := func() {
		t.Helper()
		for range breaker.DefaultConsecutiveFailures - 1 {
			fail()
		}
		if exiting(fail) {
			t.Fatal("the failure that tripped the breaker returned: OnStateChange did not run")
		}
		if s := cb.State(); s != breaker.StateOpen {
			t.Fatalf("after the tripping failure: %v, want open", s)
		}
	}
	// halfOpen moves the open breaker to half-open through a request whose
	// goroutine exits, then takes the one probe slot, which must be free.
	halfOpen := func() breaker.Ticket {
		t.Helper()
		clk.Advance(time.Second)
		if exiting(func() { _, _ = cb.AllowTicket() }) {
			t.Fatal("the request that half-opened the breaker returned: OnStateChange did not run")
		}
		if s := cb.State(); s != breaker.StateHalfOpen {
			t.Fatalf("after the Timeout: %v, want half-open", s)
		}
		tk, err := cb.AllowTicket()
		if err != nil {
			t.Fatalf("the probe: %v; a goroutine that OnStateChange ended kept the slot", err)
		}
		if _, err := cb.AllowTicket(); !errors.Is(err, breaker.ErrTooManyRequests) {
			t.Fatalf("a second probe with MaxRequests 1: %v, want ErrTooManyRequests", err)
		}
		return tk
	}

	trip()
	tk := halfOpen()
	if exiting(tk.Success) {
		t.Fatal("the closing success returned: OnStateChange did not run")
	}
	if s := cb.State(); s != breaker.StateClosed {
		t.Fatalf("after the probe's success: %v, want closed", s)
	}

	trip()
	tk = halfOpen()
	if exiting(tk.Failure) {
		t.Fatal("the reopening failure returned: OnStateChange did not run")
	}
	if s := cb.State(); s != breaker.StateOpen {
		t.Fatalf("after the probe's failure: %v, want open", s)
	}
	tk = halfOpen() // the failed probe's slot came back
	tk.Ignore()
}
