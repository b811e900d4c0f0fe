package bulkhead_test

import (
	"testing"
	"time"

	"github.com/groupexec/groupexec/bulkhead"
	"github.com/groupexec/groupexec/clock"
)

// Permit IDs increase in the order permits are issued, and IssuedAt says
// when: a permit with a greater ID was not issued earlier. A lock-free
// acquire that reads the clock and then loses its swap (to another acquire)
// tries again; a permit issued in between, with a later stamp, has the
// smaller ID, so the retry must not issue with its first reading.
func TestIssuedAtFollowsIDsAfterALostSwap(t *testing.T) {
	clk := clock.NewFake(t0)
	b := newBH(t, 2, bulkhead.WithClock(clk))
	// An acquire read the clock at t0, then lost its swap; a second later,
	// before its retry, another acquire is issued.
	clk.Advance(time.Second)
	first := acquire(t, b, 1)
	retried, err := bulkhead.AcquireAfterLostSwap(b)
	if err != nil {
		t.Fatal(err)
	}
	if retried.ID() <= first.ID() {
		t.Fatalf("the retried acquire's ID %d is not after %d", retried.ID(), first.ID())
	}
	if retried.IssuedAt().Before(first.IssuedAt()) {
		t.Fatalf("permit %d issued at %v, before permit %d at %v", retried.ID(), retried.IssuedAt(), first.ID(), first.IssuedAt())
	}
	release(t, b, first)
	release(t, b, retried)
}
