package gateway

import (
	"testing"
	"time"

	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/gateway/config"
)

// A breaker.max_timeout of centuries (over half the longest Duration) caps
// the backoff as a shorter one does: the open time doubles from
// breaker.timeout through 31 failed probes to some 170 years, and stays at
// the cap after, where doubling would overflow into a negative open time
// that held nothing. The clock starts in 1700 so that every open time
// ends before 2262, the last instant UnixNano can hold.
func TestBackendBreakerBackoffSaturatesAtHugeCap(t *testing.T) {
	const (
		base    = 5 * time.Second
		century = 100 * 365 * 24 * time.Hour
		maxOpen = 2 * century
	)
	clk := clock.NewFake(time.Date(1700, 1, 1, 0, 0, 0, 0, time.UTC))
	b, err := newBackendBreaker("b", config.Breaker{ConsecutiveFailures: 1, Timeout: base, MaxTimeout: maxOpen, MaxRequests: 1}, clk, nil)
	if err != nil {
		t.Fatal(err)
	}
	for opening := 1; opening <= 32; opening++ {
		ticket, _, ok := b.allow()
		if !ok {
			t.Fatalf("opening %d: the request before it was refused", opening)
		}
		ticket.Failure()
		// base<<30 is some 170 years: no shift up to it overflows.
		want := maxOpen
		if opening <= 31 {
			want = min(base<<(opening-1), maxOpen)
		}
		if got := b.openFor(); got != want {
			t.Fatalf("opening %d: open for %v, want %v", opening, got, want)
		}
		if _, left, ok := b.allow(); ok || left != want {
			t.Fatalf("opening %d: allowed %v, retry after %v; want refused, retry after %v", opening, ok, left, want)
		}
		clk.Advance(want)
	}
}
