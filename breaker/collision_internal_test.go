package breaker

import "testing"

// Without an Interval a closed breaker never clears its counts: not even
// the request that first collides with another on the counters, and so
// takes the slow path (admitSlow) to spread them, may start a new period.
// The collision is the failed compare-and-swap in admit, which sends the
// request to admitSlow: the test sends one there directly, as a collision
// would (its counters spread first, grow), rather than wait for
// goroutines to collide, which on one CPU they may not do for minutes.
func TestCountsWithoutIntervalSurviveTheFirstCollision(t *testing.T) {
	cb, err := New(Settings{})
	if err != nil {
		t.Fatal(err)
	}
	first := cb.cur.Load()
	const n = 3
	for range n {
		if _, err := Execute(cb, func() (int, error) { return 0, nil }); err != nil {
			t.Fatal(err)
		}
	}
	first.grow(cb)               // as the collision's failed compare-and-swap does
	ep, i, err := cb.admitSlow() // the request that collided
	if err != nil {
		t.Fatal(err)
	}
	cb.success(ep, i)
	for range n { // counted in the cells from now on
		if _, err := Execute(cb, func() (int, error) { return 0, nil }); err != nil {
			t.Fatal(err)
		}
	}
	if c := cb.Counts(); c.Requests != 2*n+1 || c.TotalSuccesses != 2*n+1 {
		t.Fatalf("after %d successes, the first collision's, and %d more: %+v", n, n, c)
	}
	if cb.cur.Load() != first {
		t.Fatal("a breaker without Interval started a new period while closed")
	}
}
