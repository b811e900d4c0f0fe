package breaker_test

import (
	"testing"
	"time"

	"github.com/groupexec/groupexec/breaker"
)

// An outcome reported after the period that admitted its request has ended
// (a trip, a recovery, an interval clearing) must not count in the new one.

func TestLateOutcomesFromBeforeATripDoNotCount(t *testing.T) {
	clk := &fakeClock{}
	var rec recorder
	cb := mustNew(t, breaker.Settings{Timeout: time.Second, Clock: clk, OnStateChange: rec.record})

	// Five requests admitted while closed, still running when it trips.
	var slowDone []func(bool)
	var slowTickets []breaker.Ticket
	for range 5 {
		done, err := cb.Allow()
		wantErr(t, err, nil)
		slowDone = append(slowDone, done)
		tk, err := cb.AllowTicket()
		wantErr(t, err, nil)
		slowTickets = append(slowTickets, tk)
	}
	trip(t, cb)
	clk.Advance(time.Second)
	wantErr(t, run(cb, true), nil) // recovers: closed again, a new generation
	wantState(t, cb, breaker.StateClosed)
	wantCounts(t, cb, breaker.Counts{})

	// Their failures arrive now: ten of them, but from the old generation.
	for i := range slowDone {
		slowDone[i](false)
		slowTickets[i].Failure()
	}
	wantState(t, cb, breaker.StateClosed)
	wantCounts(t, cb, breaker.Counts{})

	// And successes do not count either.
	done, _ := cb.Allow()
	tk, _ := cb.AllowTicket()
	trip(t, cb)
	done(true)
	tk.Success()
	wantCounts(t, cb, breaker.Counts{})
	if got, want := rec.take(), []string{"closed->open", "open->half-open", "half-open->closed", "closed->open"}; !equal(got, want) {
		t.Fatalf("transitions %v, want %v", got, want)
	}
}

func TestLateProbeResultsDoNotCloseOrReopen(t *testing.T) {
	clk := &fakeClock{}
	var rec recorder
	cb := mustNew(t, breaker.Settings{MaxRequests: 2, Timeout: time.Second, Clock: clk, OnStateChange: rec.record})
	trip(t, cb)
	clk.Advance(time.Second)

	slow, _ := cb.AllowTicket()
	fast, _ := cb.AllowTicket()
	fast.Failure() // reopens
	wantState(t, cb, breaker.StateOpen)
	clk.Advance(time.Second)
	p1, err := cb.AllowTicket()
	wantErr(t, err, nil)
	// slow still holds a probe slot: in flight is bounded across periods.
	if _, err := cb.AllowTicket(); err != breaker.ErrTooManyRequests {
		t.Fatalf("third probe in flight: %v, want ErrTooManyRequests", err)
	}
	p1.Success()
	// slow's success is from the previous half-open period: with p1's it
	// would make 2 and close the breaker. It must not.
	slow.Success()
	wantState(t, cb, breaker.StateHalfOpen)
	wantCounts(t, cb, breaker.Counts{Requests: 1, TotalSuccesses: 1, ConsecutiveSuccesses: 1})
	// But it gave its slot back.
	p2, _ := cb.AllowTicket()
	p3, err := cb.AllowTicket()
	wantErr(t, err, nil)
	p2.Success()
	wantState(t, cb, breaker.StateClosed)

	// A late probe failure does not reopen a closed breaker.
	p3.Failure()
	wantState(t, cb, breaker.StateClosed)
	wantCounts(t, cb, breaker.Counts{})
	want := []string{"closed->open", "open->half-open", "half-open->open", "open->half-open", "half-open->closed"}
	if got := rec.take(); !equal(got, want) {
		t.Fatalf("transitions %v, want %v", got, want)
	}
}

func TestLateOutcomesFromBeforeAnIntervalClearingDoNotCount(t *testing.T) {
	clk := &fakeClock{}
	cb := mustNew(t, breaker.Settings{Interval: time.Second, Clock: clk})
	var old []breaker.Ticket
	for range 5 {
		tk, _ := cb.AllowTicket()
		old = append(old, tk)
	}
	clk.Advance(time.Second)
	wantErr(t, run(cb, false), errBoom) // clears, then counts this one
	for i := range old {
		old[i].Failure()
	}
	wantState(t, cb, breaker.StateClosed)
	wantCounts(t, cb, breaker.Counts{Requests: 1, TotalFailures: 1, ConsecutiveFailures: 1})
}

func TestLateIgnoreDoesNotTouchTheNewPeriod(t *testing.T) {
	clk := &fakeClock{}
	cb := mustNew(t, breaker.Settings{Clock: clk})
	tk, _ := cb.AllowTicket()
	trip(t, cb)
	clk.Advance(time.Minute)
	p, _ := cb.AllowTicket() // a probe: Requests 1
	tk.Ignore()
	wantCounts(t, cb, breaker.Counts{Requests: 1})
	p.Ignore()
	wantCounts(t, cb, breaker.Counts{})
}
