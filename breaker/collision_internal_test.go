package breaker

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// Without an Interval a closed breaker never clears its counts: not even
// the request that first collides with another on the counters, and so
// takes the slow path (admitSlow) to spread them, may start a new period.
// The goroutines run until that collision has happened (contended), on at
// least two threads so that it does; every request then counts in the one
// period.
func TestCountsWithoutIntervalSurviveTheFirstCollision(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(2, runtime.GOMAXPROCS(0))))
	cb, err := New(Settings{})
	if err != nil {
		t.Fatal(err)
	}
	first := cb.cur.Load()
	var total atomic.Uint64
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for !cb.contended.Load() {
				if _, err := Execute(cb, func() (int, error) { return 0, nil }); err != nil {
					t.Error(err)
					return
				}
				total.Add(1)
			}
		})
	}
	wg.Wait()
	c := cb.Counts()
	if n := total.Load(); c.Requests != n || c.TotalSuccesses != n {
		t.Fatalf("after %d successes and the first collision: %+v", n, c)
	}
	if cb.cur.Load() != first {
		t.Fatal("a breaker without Interval started a new period while closed")
	}
}
