package breaker_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/groupexec/groupexec/breaker"
)

// An OnStateChange or ReadyToTrip that exits the goroutine
// (runtime.Goexit) as Execute records the failure of a function that
// panicked (or of an IsSuccessful that did) does not swallow that panic:
// Go drops a panic when a deferred call exits its goroutine, and Execute
// records that failure in a deferred call. The panic reaches Execute's
// caller, unchanged, and the failure is counted: it trips the breaker, or,
// where ReadyToTrip exits, stays in the closed state's counts.
func TestExecutePanicSurvivesCallbackGoexit(t *testing.T) {
	exit := func(string, breaker.State, breaker.State) { runtime.Goexit() }
	tripNow := func(breaker.Counts) bool { return true }
	for _, c := range []struct {
		name  string
		s     breaker.Settings
		fn    func() (int, error)
		want  any
		state breaker.State
	}{
		{"OnStateChange, fn", breaker.Settings{ReadyToTrip: tripNow, OnStateChange: exit},
			func() (int, error) { panic("fn") }, "fn", breaker.StateOpen},
		{"OnStateChange, IsSuccessful", breaker.Settings{ReadyToTrip: tripNow, OnStateChange: exit,
			IsSuccessful: func(error) bool { panic("IsSuccessful") }},
			func() (int, error) { return 0, errBoom }, "IsSuccessful", breaker.StateOpen},
		{"ReadyToTrip, fn", breaker.Settings{ReadyToTrip: func(breaker.Counts) bool { runtime.Goexit(); return true }},
			func() (int, error) { panic(errBoom) }, errBoom, breaker.StateClosed},
	} {
		cb := mustNew(t, c.s)
		done := make(chan any)
		go func() {
			defer func() { done <- recover() }()
			_, _ = breaker.Execute(cb, c.fn)
		}()
		if r := <-done; r != c.want {
			t.Errorf("%s: Execute's caller recovered %v, want %v", c.name, r, c.want)
		}
		if got := cb.State(); got != c.state {
			t.Errorf("%s: %v after the failure, want %v", c.name, got, c.state)
		}
		if got := cb.Counts().TotalFailures; c.state == breaker.StateClosed && got != 1 {
			t.Errorf("%s: %d failures counted, want 1", c.name, got)
		}
	}
}

// The same in half-open: the probe whose function panics reopens the
// breaker, OnStateChange exits the goroutine, and the panic reaches the
// caller; the probe's slot comes back.
func TestExecuteProbePanicSurvivesOnStateChangeGoexit(t *testing.T) {
	clk := &fakeClock{}
	exiting := false
	cb := mustNew(t, breaker.Settings{Timeout: time.Second, Clock: clk,
		OnStateChange: func(string, breaker.State, breaker.State) {
			if exiting {
				runtime.Goexit()
			}
		}})
	trip(t, cb)
	clk.Advance(time.Second)
	tk, err := cb.AllowTicket() // half-opens the breaker
	wantErr(t, err, nil)
	tk.Ignore()
	wantState(t, cb, breaker.StateHalfOpen)
	exiting = true
	done := make(chan any)
	go func() {
		defer func() { done <- recover() }()
		_, _ = breaker.Execute(cb, func() (int, error) { panic("probe") })
	}()
	if r := <-done; r != "probe" {
		t.Fatalf("Execute's caller recovered %v, want the probe's panic", r)
	}
	wantState(t, cb, breaker.StateOpen)
	exiting = false
	clk.Advance(time.Second)
	wantErr(t, run(cb, true), nil) // the slot came back
	wantState(t, cb, breaker.StateClosed)
}
