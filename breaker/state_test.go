package breaker_test

import (
	"testing"
	"time"

	"github.com/groupexec/groupexec/breaker"
)

// The state machine, one transition and boundary at a time, on a fake clock.

func TestDefaultsTripOnFifthConsecutiveFailure(t *testing.T) {
	clk := &fakeClock{}
	cb := mustNew(t, breaker.Settings{Clock: clk})
	wantState(t, cb, breaker.StateClosed)

	// Four failures, a success, four failures: never 5 in a row.
	for range 4 {
		wantErr(t, run(cb, false), errBoom)
	}
	wantErr(t, run(cb, true), nil)
	for range 4 {
		wantErr(t, run(cb, false), errBoom)
	}
	wantState(t, cb, breaker.StateClosed)
	wantCounts(t, cb, breaker.Counts{Requests: 9, TotalSuccesses: 1, TotalFailures: 8, ConsecutiveFailures: 4})

	// The 5th consecutive failure trips it and clears the counts.
	wantErr(t, run(cb, false), errBoom)
	wantState(t, cb, breaker.StateOpen)
	wantCounts(t, cb, breaker.Counts{})
}

func TestDefaultTimeoutIsSixtySeconds(t *testing.T) {
	clk := &fakeClock{}
	cb := mustNew(t, breaker.Settings{Clock: clk})
	trip(t, cb)

	clk.Advance(60*time.Second - time.Nanosecond)
	wantErr(t, run(cb, true), breaker.ErrOpenState)
	clk.Advance(time.Nanosecond)
	wantErr(t, run(cb, true), nil) // the probe: MaxRequests 1, one success closes
	wantState(t, cb, breaker.StateClosed)
}

func TestDefaultMaxRequestsIsOne(t *testing.T) {
	clk := &fakeClock{}
	cb := mustNew(t, breaker.Settings{Clock: clk})
	trip(t, cb)
	clk.Advance(time.Minute)

	probe, err := cb.AllowTicket()
	wantErr(t, err, nil)
	wantState(t, cb, breaker.StateHalfOpen)
	_, err = cb.AllowTicket()
	wantErr(t, err, breaker.ErrTooManyRequests)
	probe.Success()
	wantState(t, cb, breaker.StateClosed)
}

func TestOpenRefusesUntilTimeoutThenFirstRequestHalfOpens(t *testing.T) {
	clk := &fakeClock{}
	var rec recorder
	cb := mustNew(t, breaker.Settings{Name: "svc", Timeout: 10 * time.Second, Clock: clk, OnStateChange: rec.record})
	clk.Advance(3 * time.Second) // the open period runs from the trip, not from New
	trip(t, cb)

	calls := 0
	fn := func() (int, error) { calls++; return 0, nil }
	for _, d := range []time.Duration{0, time.Second, 10*time.Second - time.Nanosecond} {
		clk.Set(3*time.Second + d)
		if _, err := breaker.Execute(cb, fn); err != breaker.ErrOpenState {
			t.Fatalf("at +%v: error %v, want ErrOpenState", d, err)
		}
	}
	if calls != 0 {
		t.Fatalf("fn ran %d times while open", calls)
	}
	wantCounts(t, cb, breaker.Counts{}) // refused requests are not counted

	// State only reads: the timeout has passed but nobody asked yet.
	clk.Set(13 * time.Second)
	wantState(t, cb, breaker.StateOpen)
	tk, err := cb.AllowTicket()
	wantErr(t, err, nil)
	if !tk.Probe() {
		t.Fatal("the first request after the timeout is not a probe")
	}
	wantState(t, cb, breaker.StateHalfOpen)
	wantCounts(t, cb, breaker.Counts{Requests: 1})
	tk.Ignore()
	if got, want := rec.take(), []string{"closed->open", "open->half-open"}; !equal(got, want) {
		t.Fatalf("transitions %v, want %v", got, want)
	}
}

func TestHalfOpenAdmitsAtMostMaxRequestsInFlight(t *testing.T) {
	clk := &fakeClock{}
	cb := mustNew(t, breaker.Settings{MaxRequests: 3, Timeout: time.Second, Clock: clk})
	trip(t, cb)
	clk.Advance(time.Second)

	var probes [3]breaker.Ticket
	for i := range probes {
		var err error
		probes[i], err = cb.AllowTicket()
		wantErr(t, err, nil)
		if !probes[i].Probe() {
			t.Fatalf("probe %d: Probe() = false", i)
		}
	}
	for range 3 {
		_, err := cb.AllowTicket()
		wantErr(t, err, breaker.ErrTooManyRequests)
		wantErr(t, run(cb, true), breaker.ErrTooManyRequests)
	}
	wantCounts(t, cb, breaker.Counts{Requests: 3})

	// A finished probe frees its slot: in flight is what is bounded.
	probes[0].Success()
	wantState(t, cb, breaker.StateHalfOpen)
	p4, err := cb.AllowTicket()
	wantErr(t, err, nil)
	_, err = cb.AllowTicket()
	wantErr(t, err, breaker.ErrTooManyRequests)

	// The 3rd consecutive success closes it, not before.
	probes[1].Success()
	wantState(t, cb, breaker.StateHalfOpen)
	wantCounts(t, cb, breaker.Counts{Requests: 4, TotalSuccesses: 2, ConsecutiveSuccesses: 2})
	probes[2].Success()
	wantState(t, cb, breaker.StateClosed)
	wantCounts(t, cb, breaker.Counts{})
	p4.Success() // late: from the half-open period that ended
	wantCounts(t, cb, breaker.Counts{})
}

func TestHalfOpenAnyFailureReopens(t *testing.T) {
	for _, n := range []int{0, 1, 2} { // successes before the failure
		clk := &fakeClock{}
		var rec recorder
		cb := mustNew(t, breaker.Settings{MaxRequests: 3, Timeout: 5 * time.Second, Clock: clk, OnStateChange: rec.record})
		trip(t, cb)
		clk.Advance(5 * time.Second)
		for range n {
			wantErr(t, run(cb, true), nil)
			wantState(t, cb, breaker.StateHalfOpen)
		}
		clk.Advance(time.Second)
		wantErr(t, run(cb, false), errBoom)
		wantState(t, cb, breaker.StateOpen)

		// The new open period runs from the failure.
		clk.Advance(5*time.Second - time.Nanosecond)
		wantErr(t, run(cb, true), breaker.ErrOpenState)
		clk.Advance(time.Nanosecond)
		wantErr(t, run(cb, true), nil)
		wantState(t, cb, breaker.StateHalfOpen)
		want := []string{"closed->open", "open->half-open", "half-open->open", "open->half-open"}
		if got := rec.take(); !equal(got, want) {
			t.Fatalf("after %d successes: transitions %v, want %v", n, got, want)
		}
	}
}

func TestHalfOpenIgnoreGivesSlotBackWithoutCounting(t *testing.T) {
	clk := &fakeClock{}
	cb := mustNew(t, breaker.Settings{MaxRequests: 1, Clock: clk})
	trip(t, cb)
	clk.Advance(time.Minute)
	for range 3 {
		tk, err := cb.AllowTicket()
		wantErr(t, err, nil)
		tk.Ignore()
		wantState(t, cb, breaker.StateHalfOpen)
		wantCounts(t, cb, breaker.Counts{})
	}
	wantErr(t, run(cb, true), nil)
	wantState(t, cb, breaker.StateClosed)
}

func TestClosedIgnoreTakesTheRequestBack(t *testing.T) {
	cb := mustNew(t, breaker.Settings{})
	tk, _ := cb.AllowTicket()
	wantCounts(t, cb, breaker.Counts{Requests: 1})
	tk.Ignore()
	wantCounts(t, cb, breaker.Counts{})
}

func TestReadyToTripSeesCountsWithTheFailure(t *testing.T) {
	var seen []breaker.Counts
	cb := mustNew(t, breaker.Settings{ReadyToTrip: func(c breaker.Counts) bool {
		seen = append(seen, c)
		return c.Requests >= 4 && c.TotalFailures*2 >= c.Requests
	}})
	wantErr(t, run(cb, true), nil) // successes do not ask
	wantErr(t, run(cb, false), errBoom)
	wantErr(t, run(cb, true), nil)
	wantErr(t, run(cb, false), errBoom) // 2 of 4 failed: trips
	wantState(t, cb, breaker.StateOpen)
	want := []breaker.Counts{
		{Requests: 2, TotalSuccesses: 1, TotalFailures: 1, ConsecutiveFailures: 1},
		{Requests: 4, TotalSuccesses: 2, TotalFailures: 2, ConsecutiveFailures: 1},
	}
	if len(seen) != len(want) || seen[0] != want[0] || seen[1] != want[1] {
		t.Fatalf("ReadyToTrip saw %+v, want %+v", seen, want)
	}
}

func TestIntervalClearsClosedCounts(t *testing.T) {
	clk := &fakeClock{}
	cb := mustNew(t, breaker.Settings{Interval: 10 * time.Second, Clock: clk})
	for range 4 {
		wantErr(t, run(cb, false), errBoom)
	}
	clk.Advance(10*time.Second - time.Nanosecond)
	wantCounts(t, cb, breaker.Counts{Requests: 4, TotalFailures: 4, ConsecutiveFailures: 4})
	clk.Advance(time.Nanosecond)
	wantCounts(t, cb, breaker.Counts{Requests: 4, TotalFailures: 4, ConsecutiveFailures: 4}) // Counts only reads
	// The first request at the end of the interval clears, then counts.
	wantErr(t, run(cb, false), errBoom)
	wantCounts(t, cb, breaker.Counts{Requests: 1, TotalFailures: 1, ConsecutiveFailures: 1})
	wantState(t, cb, breaker.StateClosed) // 4 old + 1 new failures did not trip it

	// The next period starts at that clearing.
	clk.Advance(5 * time.Second)
	wantErr(t, run(cb, true), nil)
	clk.Advance(5*time.Second - time.Nanosecond)
	wantErr(t, run(cb, true), nil)
	wantCounts(t, cb, breaker.Counts{Requests: 3, TotalSuccesses: 2, TotalFailures: 1, ConsecutiveSuccesses: 2})
	clk.Advance(time.Nanosecond)
	wantErr(t, run(cb, true), nil)
	wantCounts(t, cb, breaker.Counts{Requests: 1, TotalSuccesses: 1, ConsecutiveSuccesses: 1})
}

func TestIntervalRestartsWhenTheBreakerCloses(t *testing.T) {
	clk := &fakeClock{}
	cb := mustNew(t, breaker.Settings{Interval: 10 * time.Second, Timeout: 30 * time.Second, Clock: clk})
	trip(t, cb)
	clk.Advance(30 * time.Second)
	wantErr(t, run(cb, true), nil) // closes at t=30s
	wantState(t, cb, breaker.StateClosed)
	clk.Advance(10*time.Second - time.Nanosecond)
	wantErr(t, run(cb, false), errBoom)
	wantCounts(t, cb, breaker.Counts{Requests: 1, TotalFailures: 1, ConsecutiveFailures: 1})
	clk.Advance(time.Nanosecond)
	wantErr(t, run(cb, false), errBoom)
	wantCounts(t, cb, breaker.Counts{Requests: 1, TotalFailures: 1, ConsecutiveFailures: 1})
}

func TestZeroIntervalNeverClears(t *testing.T) {
	clk := &fakeClock{}
	cb := mustNew(t, breaker.Settings{Clock: clk})
	for range 4 {
		wantErr(t, run(cb, false), errBoom)
	}
	clk.Advance(100 * 365 * 24 * time.Hour)
	wantErr(t, run(cb, false), errBoom)
	wantState(t, cb, breaker.StateOpen)
}

func TestCountsRestartInEveryState(t *testing.T) {
	clk := &fakeClock{}
	cb := mustNew(t, breaker.Settings{MaxRequests: 2, Clock: clk})
	wantErr(t, run(cb, true), nil)
	trip(t, cb)
	wantCounts(t, cb, breaker.Counts{})
	clk.Advance(time.Minute)
	wantErr(t, run(cb, true), nil)
	wantCounts(t, cb, breaker.Counts{Requests: 1, TotalSuccesses: 1, ConsecutiveSuccesses: 1})
	wantErr(t, run(cb, true), nil)
	wantState(t, cb, breaker.StateClosed)
	wantCounts(t, cb, breaker.Counts{})
	wantErr(t, run(cb, false), errBoom)
	wantCounts(t, cb, breaker.Counts{Requests: 1, TotalFailures: 1, ConsecutiveFailures: 1})
}

func TestFullCycleCallbacks(t *testing.T) {
	clk := &fakeClock{}
	var rec recorder
	cb := mustNew(t, breaker.Settings{Name: "payments", MaxRequests: 2, Timeout: time.Second, Clock: clk, OnStateChange: rec.record})
	trip(t, cb)
	clk.Advance(time.Second)
	wantErr(t, run(cb, false), errBoom) // half-open -> open
	clk.Advance(time.Second)
	wantErr(t, run(cb, true), nil)
	wantErr(t, run(cb, true), nil) // half-open -> closed
	trip(t, cb)
	want := []string{"closed->open", "open->half-open", "half-open->open", "open->half-open", "half-open->closed", "closed->open"}
	rec.mu.Lock()
	for _, tr := range rec.got {
		if tr.name != "payments" {
			t.Errorf("OnStateChange name %q, want payments", tr.name)
		}
	}
	rec.mu.Unlock()
	if got := rec.take(); !equal(got, want) {
		t.Fatalf("transitions %v, want %v", got, want)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
