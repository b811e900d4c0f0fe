package breaker

import (
	"testing"
	"time"

	"github.com/groupexec/groupexec/clock"
)

// A request that finds every probe slot of a half-open period taken is not
// refused if the period has ended since it read the state: here the last
// probe's success closes the breaker between the two reads, while a
// request that took a slot as the period ended still holds it (it gives
// it back once it sees the period over). The request is judged by the
// current state, closed, and let through.
func TestFullProbeSlotsOfEndedPeriodDoNotRefuse(t *testing.T) {
	cb, probe := halfOpen(t, 1)
	testHookHalfOpen = func() {
		testHookHalfOpen = nil
		probe.Success()  // closes the breaker
		cb.probes.Add(1) // the slot of a request that has not yet seen the period end
	}
	defer func() { testHookHalfOpen = nil }()
	tk, err := cb.AllowTicket()
	cb.probes.Add(-1) // that request gives its slot back
	if err != nil {
		t.Fatalf("refused with %v though the breaker is %v", err, cb.State())
	}
	tk.Success()
	if s, n := cb.State(), cb.probes.Load(); s != StateClosed || n != 0 {
		t.Fatalf("state %v with %d probe slots taken, want closed with none", s, n)
	}
}

// A request that takes a probe slot of a half-open period that has ended
// since it read the state is no probe of it: here the only probe's failure
// reopens the breaker between the two reads, and the slot it gives back
// is free when the request takes it. The request is judged by the current
// state, open, and refused, holding no slot.
func TestProbeSlotTakenAsThePeriodReopensIsGivenBack(t *testing.T) {
	cb, probe := halfOpen(t, 2)
	ran := false
	testHookHalfOpen = func() {
		testHookHalfOpen = nil
		ran = true
		probe.Failure() // reopens the breaker and gives the slot back
	}
	defer func() { testHookHalfOpen = nil }()
	tk, err := cb.AllowTicket()
	if !ran {
		t.Fatal("the request never read a half-open state: the test no longer reaches the gap")
	}
	if err != ErrOpenState {
		t.Fatalf("request through a breaker reopened as it took a slot: %v (probe %v), state %v", err, tk.Probe(), cb.State())
	}
	if n := cb.probes.Load(); n != 0 {
		t.Fatalf("%d probe slots taken after the refusal, want 0", n)
	}
}

// halfOpen returns a breaker with maxRequests probes a half-open period,
// tripped and then half-open, with its first probe's ticket.
func halfOpen(t *testing.T, maxRequests uint32) (*CircuitBreaker, Ticket) {
	t.Helper()
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	cb, err := New(Settings{MaxRequests: maxRequests, Timeout: time.Second, ReadyToTrip: func(Counts) bool { return true }, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	trip, _ := cb.AllowTicket()
	trip.Failure()
	clk.Advance(time.Second)
	probe, err := cb.AllowTicket()
	if err != nil || !probe.Probe() {
		t.Fatalf("the probe after the timeout: %v, probe %v", err, probe.Probe())
	}
	return cb, probe
}
