package breaker_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/groupexec/groupexec/breaker"
)

// TestCountsAddUpAtQuiescence runs goroutines that finish their requests
// every way the API offers (Execute returning, failing or panicking, Allow's
// done, a Ticket's Success, Failure or Ignore) on a closed breaker that never
// trips, and checks that once they have all returned the counts are exact,
// not only consistent: every request let through and not ignored is one
// Request, every outcome one success or failure, whether it was counted in
// the base counters or in the cells the counters spread to midway (Spread,
// as the first collision does, while every goroutine waits at its halfway
// mark; collisions on the real counters may spread them sooner). Then a serial tail checks that the consecutive counts start again
// from the last outcome, whatever the concurrent ones left in the marks.
func TestCountsAddUpAtQuiescence(t *testing.T) {
	const goroutines = 16
	ops := 2000
	if testing.Short() {
		ops = 200
	}
	for _, spread := range []bool{false, true} {
		t.Run(fmt.Sprintf("spread=%v", spread), func(t *testing.T) {
			cb := mustNew(t, breaker.Settings{
				Clock:       &fakeClock{},
				ReadyToTrip: func(breaker.Counts) bool { return false },
			})
			var successes, failures atomic.Uint64
			var start, half sync.WaitGroup
			start.Add(1)
			half.Add(goroutines)
			spreadDone := make(chan struct{})
			var wg sync.WaitGroup
			for g := range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(g), 11))
					start.Wait()
					for i := range ops {
						if i == ops/2 {
							half.Done()
							<-spreadDone
						}
						finish(t, cb, rng, &successes, &failures)
					}
				}()
			}
			go func() {
				half.Wait() // every goroutine has done half its requests
				if spread {
					breaker.Spread(cb)
				}
				close(spreadDone)
			}()
			start.Done()
			wg.Wait()

			c := cb.Counts()
			if cb.State() != breaker.StateClosed {
				t.Fatalf("state %v; ReadyToTrip never trips", cb.State())
			}
			if c.TotalSuccesses != successes.Load() || c.TotalFailures != failures.Load() ||
				c.Requests != successes.Load()+failures.Load() {
				t.Fatalf("at quiescence: %+v; want %d successes, %d failures, %d requests",
					c, successes.Load(), failures.Load(), successes.Load()+failures.Load())
			}

			// Serially, the consecutive counts follow the last outcomes.
			mustExecute(t, cb, true)
			if c := cb.Counts(); c.ConsecutiveFailures != 0 || c.ConsecutiveSuccesses == 0 {
				t.Fatalf("after a success: %+v", c)
			}
			for k := uint64(1); k <= 3; k++ {
				mustExecute(t, cb, false)
				if c := cb.Counts(); c.ConsecutiveFailures != k || c.ConsecutiveSuccesses != 0 {
					t.Fatalf("after %d failures in a row: %+v", k, c)
				}
			}
			mustExecute(t, cb, true)
			if c := cb.Counts(); c.ConsecutiveFailures != 0 || c.ConsecutiveSuccesses != 1 {
				t.Fatalf("after failures then a success: %+v", c)
			}
		})
	}
}

// finish makes one request on cb and finishes it one of the ways the API
// offers, adding its outcome, if it records one, to successes or failures.
func finish(t *testing.T, cb *breaker.CircuitBreaker, rng *rand.Rand, successes, failures *atomic.Uint64) {
	ok := rng.IntN(3) != 0
	count := func(ok bool) {
		if ok {
			successes.Add(1)
		} else {
			failures.Add(1)
		}
	}
	switch rng.IntN(4) {
	case 0:
		mustExecute(t, cb, ok)
		count(ok)
	case 1: // a panicking function counts as a failure
		func() {
			defer func() { _ = recover() }()
			_, _ = breaker.Execute(cb, func() (int, error) { panic(errBoom) })
		}()
		count(false)
	case 2:
		done, err := cb.Allow()
		if err != nil {
			t.Errorf("Allow on a breaker that never trips: %v", err)
			return
		}
		done(ok)
		count(ok)
	default:
		tk, err := cb.AllowTicket()
		if err != nil {
			t.Errorf("AllowTicket on a breaker that never trips: %v", err)
			return
		}
		switch rng.IntN(3) {
		case 0:
			tk.Ignore()
		case 1:
			tk.Success()
			count(true)
		default:
			tk.Failure()
			count(false)
		}
	}
}

func mustExecute(t *testing.T, cb *breaker.CircuitBreaker, ok bool) {
	_, err := breaker.Execute(cb, func() (int, error) {
		if !ok {
			return 0, errBoom
		}
		return 0, nil
	})
	if err != nil && err != errBoom {
		t.Errorf("Execute on a breaker that never trips: %v", err)
	}
}
