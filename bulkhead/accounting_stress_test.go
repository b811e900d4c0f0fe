package bulkhead_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/bulkhead"
	"github.com/groupexec/groupexec/clock"
)

// TestRequestAccountingStress checks the books an observer keeps from the
// events against what the callers saw, under requests that time out, give up
// as they are served, and meet a limit that changes, with a listener that
// panics now and then: every failed acquire is one rejection, every permit
// issued is released once, and a permit issued to a request that failed is
// named by its rejection, so that an observer counts each request once.
func TestRequestAccountingStress(t *testing.T) {
	goroutines, ops := 64, 200
	if testing.Short() {
		goroutines, ops = 16, 100
	}
	var acquired, released, rejected, rejectedWithPermit, heard atomic.Int64
	clk := clock.NewFake(t0)
	b := newBH(t, 4, bulkhead.WithClock(clk), bulkhead.WithQueue(8, 10*time.Millisecond),
		bulkhead.WithListener(bulkhead.ListenerFunc(func(e bulkhead.Event) {
			switch e.Code {
			case bulkhead.EventPermitAcquired:
				acquired.Add(1)
			case bulkhead.EventPermitReleased:
				released.Add(1)
			case bulkhead.EventRequestRejected:
				rejected.Add(1)
				if e.PermitID != 0 {
					rejectedWithPermit.Add(1)
				}
			}
			if heard.Add(1)%7 == 0 {
				panic("listener fails")
			}
		})))
	var granted, failed atomic.Int64
	var limits sync.Mutex // SetLimit and the final count exclude each other
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for range ops {
				switch op := rng.IntN(16); {
				case op < 10:
					ctx, cancel := context.WithCancel(bg)
					if rng.IntN(2) == 0 {
						go cancel() // as it waits, or as it is served
					}
					var p bulkhead.Permit
					var err error
					if op < 2 {
						p, err = b.TryAcquire(ctx, 1+rng.IntN(2))
					} else {
						p, err = b.Acquire(ctx, 1+rng.IntN(2))
					}
					if err != nil {
						failed.Add(1)
					} else {
						granted.Add(1)
						if err := b.Release(p); err != nil {
							t.Errorf("Release(%d): %v", p.ID(), err)
						}
						if err := b.Release(p); !errors.Is(err, bulkhead.ErrUnknownPermit) {
							t.Errorf("second Release(%d): %v", p.ID(), err)
						}
					}
					cancel()
				case op < 13:
					clk.Advance(time.Duration(rng.IntN(6)) * time.Millisecond)
				default:
					limits.Lock()
					_ = b.SetLimit(1 + rng.IntN(4))
					limits.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if s := stateOf(b); s.inFlight != 0 || s.queued != 0 {
		t.Fatalf("left behind: %+v", s)
	}
	if err := b.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	// A timer that times out a waiter, or serves one as it does, tells the
	// listener on its own goroutine, after it has woken the waiter: the
	// books may take a moment to agree.
	agree := func() []string {
		var bad []string
		if a, r := acquired.Load(), released.Load(); a != r {
			bad = append(bad, fmt.Sprintf("%d permits issued, %d released", a, r))
		}
		if got, want := acquired.Load()-rejectedWithPermit.Load(), granted.Load(); got != want {
			bad = append(bad, fmt.Sprintf("the events count %d requests granted (%d issued, %d given back), the callers %d", got, acquired.Load(), rejectedWithPermit.Load(), want))
		}
		if got, want := rejected.Load(), failed.Load(); got != want {
			bad = append(bad, fmt.Sprintf("the events count %d requests failed, the callers %d", got, want))
		}
		return bad
	}
	for deadline := time.Now().Add(10 * time.Second); len(agree()) != 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	for _, msg := range agree() {
		t.Error(msg)
	}
	t.Logf("granted %d, failed %d, given back %d", granted.Load(), failed.Load(), rejectedWithPermit.Load())
}
