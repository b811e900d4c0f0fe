package breaker_test

import (
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/groupexec/groupexec/breaker"
)

func TestExecuteReturnsFnResults(t *testing.T) {
	cb := mustNew(t, breaker.Settings{})
	v, err := breaker.Execute(cb, func() (string, error) { return "ok", nil })
	if v != "ok" || err != nil {
		t.Fatalf("Execute = %q, %v", v, err)
	}
	v, err = breaker.Execute(cb, func() (string, error) { return "partial", errBoom })
	if v != "partial" || err != errBoom {
		t.Fatalf("Execute = %q, %v", v, err)
	}
	wantCounts(t, cb, breaker.Counts{Requests: 2, TotalSuccesses: 1, TotalFailures: 1, ConsecutiveFailures: 1})
}

func TestExecuteRefusedReturnsZeroWithoutCalling(t *testing.T) {
	cb := mustNew(t, breaker.Settings{})
	trip(t, cb)
	v, err := breaker.Execute(cb, func() (*int, error) { t.Fatal("fn called while open"); return nil, nil })
	if v != nil || err != breaker.ErrOpenState {
		t.Fatalf("Execute = %v, %v; want nil, ErrOpenState", v, err)
	}
}

func TestIsSuccessfulDecidesTheOutcome(t *testing.T) {
	errNotFound := errors.New("not found")
	cb := mustNew(t, breaker.Settings{
		IsSuccessful: func(err error) bool { return err == nil || errors.Is(err, errNotFound) },
	})
	for range 10 {
		if _, err := breaker.Execute(cb, func() (int, error) { return 0, errNotFound }); err != errNotFound {
			t.Fatalf("Execute error %v, want the fn's", err)
		}
	}
	wantCounts(t, cb, breaker.Counts{Requests: 10, TotalSuccesses: 10, ConsecutiveSuccesses: 10})
	for range 5 {
		_ = run(cb, false)
	}
	wantState(t, cb, breaker.StateOpen)
}

func TestExecutePanicCountsAsFailureAndPropagates(t *testing.T) {
	var rec recorder
	cb := mustNew(t, breaker.Settings{OnStateChange: rec.record})
	for i := range 5 {
		func() {
			defer func() {
				if r := recover(); r != "kaboom" {
					t.Fatalf("recovered %v, want the fn's panic value", r)
				}
			}()
			_, _ = breaker.Execute(cb, func() (int, error) { panic("kaboom") })
			t.Fatal("Execute returned after fn panicked")
		}()
		if i < 4 {
			wantCounts(t, cb, breaker.Counts{Requests: uint64(i + 1), TotalFailures: uint64(i + 1), ConsecutiveFailures: uint64(i + 1)})
		}
	}
	wantState(t, cb, breaker.StateOpen) // five panics are five failures
	if got := rec.take(); !equal(got, []string{"closed->open"}) {
		t.Fatalf("transitions %v", got)
	}
}

// A panic in ReadyToTrip, called as Execute records the failure of a
// function that panicked (or of an IsSuccessful that did), does not replace
// that panic: the caller recovers the first one, unchanged, and the failure
// is counted.
func TestExecutePanicSurvivesReadyToTripPanic(t *testing.T) {
	for _, c := range []struct {
		name string
		fn   func() (int, error)
		ok   func(error) bool
		want any
	}{
		{"fn", func() (int, error) { panic("fn") }, nil, "fn"},
		{"IsSuccessful", func() (int, error) { return 0, errBoom }, func(error) bool { panic("IsSuccessful") }, "IsSuccessful"},
	} {
		cb := mustNew(t, breaker.Settings{ReadyToTrip: func(breaker.Counts) bool { panic("ReadyToTrip") }, IsSuccessful: c.ok})
		func() {
			defer func() {
				if r := recover(); r != c.want {
					t.Errorf("%s: recovered %v, want %v", c.name, r, c.want)
				}
			}()
			_, _ = breaker.Execute(cb, c.fn)
		}()
		wantCounts(t, cb, breaker.Counts{Requests: 1, TotalFailures: 1, ConsecutiveFailures: 1})
	}
}

func TestExecutePanicInHalfOpenReopensAndFreesTheSlot(t *testing.T) {
	clk := &fakeClock{}
	cb := mustNew(t, breaker.Settings{Timeout: time.Second, Clock: clk})
	trip(t, cb)
	clk.Advance(time.Second)
	func() {
		defer func() { _ = recover() }()
		_, _ = breaker.Execute(cb, func() (int, error) { panic(errBoom) })
	}()
	wantState(t, cb, breaker.StateOpen)
	clk.Advance(time.Second)
	wantErr(t, run(cb, true), nil) // the slot came back
	wantState(t, cb, breaker.StateClosed)
}

func TestExecuteGoexitCountsAsFailure(t *testing.T) {
	cb := mustNew(t, breaker.Settings{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = breaker.Execute(cb, func() (int, error) { runtime.Goexit(); return 0, nil })
	}()
	wg.Wait()
	wantCounts(t, cb, breaker.Counts{Requests: 1, TotalFailures: 1, ConsecutiveFailures: 1})
}

func TestIsSuccessfulPanicCountsAsFailure(t *testing.T) {
	cb := mustNew(t, breaker.Settings{IsSuccessful: func(error) bool { panic("bad classifier") }})
	func() {
		defer func() {
			if r := recover(); r != "bad classifier" {
				t.Fatalf("recovered %v", r)
			}
		}()
		_ = run(cb, true)
	}()
	wantCounts(t, cb, breaker.Counts{Requests: 1, TotalFailures: 1, ConsecutiveFailures: 1})
}

func TestAllowDone(t *testing.T) {
	clk := &fakeClock{}
	cb := mustNew(t, breaker.Settings{Clock: clk, IsSuccessful: func(error) bool { t.Fatal("Allow consulted IsSuccessful"); return false }})
	done, err := cb.Allow()
	wantErr(t, err, nil)
	done(true)
	for range 5 {
		done, err := cb.Allow()
		wantErr(t, err, nil)
		done(false)
	}
	wantState(t, cb, breaker.StateOpen)
	if done, err := cb.Allow(); done != nil || err != breaker.ErrOpenState {
		t.Fatalf("Allow while open = %p, %v", done, err)
	}

	// A half-open probe's done counts once, however often it is called.
	clk.Advance(time.Minute)
	done, err = cb.Allow()
	wantErr(t, err, nil)
	if _, err := cb.Allow(); err != breaker.ErrTooManyRequests {
		t.Fatalf("second probe: %v", err)
	}
	done(false)
	done(true)
	done(false)
	wantState(t, cb, breaker.StateOpen)
	clk.Advance(time.Minute)
	done, err = cb.Allow()
	wantErr(t, err, nil) // one slot, given back once
	done(true)
	wantState(t, cb, breaker.StateClosed)
}

func TestTicketFinishesOnce(t *testing.T) {
	cb := mustNew(t, breaker.Settings{})
	tk, err := cb.AllowTicket()
	wantErr(t, err, nil)
	if tk.Probe() {
		t.Fatal("a closed-state ticket is a probe")
	}
	tk.Success()
	tk.Success()
	tk.Failure()
	tk.Ignore()
	wantCounts(t, cb, breaker.Counts{Requests: 1, TotalSuccesses: 1, ConsecutiveSuccesses: 1})

	tk, _ = cb.AllowTicket()
	tk.Failure()
	tk.Success()
	tk.Ignore()
	wantCounts(t, cb, breaker.Counts{Requests: 2, TotalSuccesses: 1, TotalFailures: 1, ConsecutiveFailures: 1})

	tk, _ = cb.AllowTicket()
	tk.Ignore()
	tk.Failure()
	wantCounts(t, cb, breaker.Counts{Requests: 2, TotalSuccesses: 1, TotalFailures: 1, ConsecutiveFailures: 1})

	var zero breaker.Ticket
	zero.Success()
	zero.Failure()
	zero.Ignore()
	if zero.Probe() {
		t.Fatal("the zero Ticket is a probe")
	}
	wantCounts(t, cb, breaker.Counts{Requests: 2, TotalSuccesses: 1, TotalFailures: 1, ConsecutiveFailures: 1})
}

// A finished Ticket is the zero Ticket, as Ticket's doc says: a caller
// may compare it with Ticket{} to tell whether it is finished. Closed and
// half-open tickets alike, whichever way they were finished.
func TestFinishedTicketIsTheZeroTicket(t *testing.T) {
	finish := map[string]func(*breaker.Ticket){
		"Success": (*breaker.Ticket).Success,
		"Failure": (*breaker.Ticket).Failure,
		"Ignore":  (*breaker.Ticket).Ignore,
	}
	for name, f := range finish {
		for _, spread := range []bool{false, true} {
			cb := mustNew(t, breaker.Settings{ReadyToTrip: func(breaker.Counts) bool { return false }})
			if spread {
				breaker.Spread(cb)
			}
			tk, err := cb.AllowTicket()
			wantErr(t, err, nil)
			f(&tk)
			if tk != (breaker.Ticket{}) {
				t.Errorf("closed (spread %v), after %s: %+v, want the zero Ticket", spread, name, tk)
			}
		}

		clk := &fakeClock{}
		cb := mustNew(t, breaker.Settings{Clock: clk})
		trip(t, cb)
		clk.Advance(breaker.DefaultTimeout)
		tk, err := cb.AllowTicket()
		wantErr(t, err, nil)
		if !tk.Probe() {
			t.Fatal("the ticket after the timeout is not a probe")
		}
		f(&tk)
		if tk != (breaker.Ticket{}) {
			t.Errorf("half-open, after %s: %+v, want the zero Ticket", name, tk)
		}
	}
}

func TestTicketFinishedInAnotherGoroutine(t *testing.T) {
	cb := mustNew(t, breaker.Settings{})
	tickets := make(chan breaker.Ticket)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for tk := range tickets {
			tk.Failure()
		}
	}()
	for range 5 {
		tk, err := cb.AllowTicket()
		wantErr(t, err, nil)
		tickets <- tk
	}
	close(tickets)
	wg.Wait()
	wantState(t, cb, breaker.StateOpen)
}

func TestOnStateChangeRunsAfterCommitInTheCallerBeforeReturn(t *testing.T) {
	clk := &fakeClock{}
	var cb *breaker.CircuitBreaker
	caller := goid()
	var calls int
	cb = mustNew(t, breaker.Settings{Clock: clk, OnStateChange: func(_ string, from, to breaker.State) {
		calls++ // unsynchronised on purpose: -race fails if another goroutine ran it
		if g := goid(); g != caller {
			t.Errorf("%v->%v reported in goroutine %d, want the caller's %d", from, to, g, caller)
		}
		if s := cb.State(); s != to {
			t.Errorf("%v->%v reported while State() = %v: not committed yet", from, to, s)
		}
		// No lock is held: the breaker can be used from the callback.
		_ = cb.Counts()
		if tk, err := cb.AllowTicket(); err == nil {
			tk.Ignore()
		}
	}})
	for i := range 5 {
		_ = run(cb, false)
		if want := i / 4; calls != want { // the 5th failure's Execute has reported closed->open
			t.Fatalf("after failure %d: %d callbacks, want %d", i+1, calls, want)
		}
	}
	clk.Advance(time.Minute)
	tk, err := cb.AllowTicket()
	wantErr(t, err, nil)
	if calls != 2 {
		t.Fatalf("AllowTicket returned before reporting open->half-open (%d callbacks)", calls)
	}
	tk.Success()
	if calls != 3 {
		t.Fatalf("Success returned before reporting half-open->closed (%d callbacks)", calls)
	}
}

func TestOnStateChangePanicIsRecovered(t *testing.T) {
	clk := &fakeClock{}
	calls := 0
	cb := mustNew(t, breaker.Settings{Clock: clk, OnStateChange: func(string, breaker.State, breaker.State) {
		calls++
		panic("listener bug")
	}})
	trip(t, cb) // run would fail the test if the panic escaped
	clk.Advance(time.Minute)
	wantErr(t, run(cb, true), nil)
	wantState(t, cb, breaker.StateClosed)
	if calls != 3 {
		t.Fatalf("%d callbacks, want 3", calls)
	}
}
