package bulkhead_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/bulkhead"
	"github.com/groupexec/groupexec/clock"
)

// TestSubmitStatisticsMatchTheRuns submits functions that succeed, fail,
// panic or exit their goroutine, from many goroutines, with handles
// cancelled at random moments (before their function starts, as it runs, or
// never), and checks the observer's books against what happened: one
// latency report per function that ran, and none for one cancelled before
// it started (its function never runs); one issue and one release per
// Submit; each handle's status that of its function, or Cancelled when its
// Cancel won; and, once quiet, nothing out.
func TestSubmitStatisticsMatchTheRuns(t *testing.T) {
	const goroutines = 8
	ops := 150
	if testing.Short() {
		ops = 40
	}
	var acquired, released, latencies atomic.Int64
	clk := clock.NewFake(t0)
	b := newBH(t, 4, bulkhead.WithClock(clk), bulkhead.WithQueue(goroutines, time.Hour),
		bulkhead.WithListener(bulkhead.ListenerFunc(func(e bulkhead.Event) {
			switch e.Code {
			case bulkhead.EventPermitAcquired:
				acquired.Add(1)
			case bulkhead.EventPermitReleased:
				released.Add(1)
			case bulkhead.EventLatencyReport:
				latencies.Add(1)
			}
		})))
	var runs, submitted atomic.Int64
	errFn := errors.New("the function failed")
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 5))
			for range ops {
				kind := rng.IntN(4)
				var ran atomic.Int32
				h, err := bulkhead.Submit(b, bg, func(ctx context.Context) (int, error) {
					runs.Add(1)
					if ran.Add(1) != 1 {
						t.Error("a function ran twice")
					}
					runtime.Gosched()
					switch kind {
					case 1:
						return 0, errFn
					case 2:
						panic(errFn)
					case 3:
						runtime.Goexit()
					}
					return 1, nil
				})
				if err != nil {
					t.Errorf("Submit: %v", err) // the queue holds every goroutine and never times out
					continue
				}
				submitted.Add(1)
				cancelled := false
				switch rng.IntN(3) {
				case 0:
					cancelled = h.Cancel() // likely before the function starts
				case 1:
					runtime.Gosched()
					cancelled = h.Cancel()
				}
				r, err := h.Wait(bg)
				if err != nil {
					t.Fatal(err)
				}
				want := []bulkhead.Status{bulkhead.Success, bulkhead.Failed, bulkhead.Failed, bulkhead.Failed}[kind]
				if cancelled {
					want = bulkhead.Cancelled
				}
				if r.Status != want {
					t.Errorf("function %d, cancelled %v: status %v, want %v (%v)", kind, cancelled, r.Status, want, r.Err)
				}
			}
		})
	}
	wg.Wait()

	// A cancelled handle completes before its function, if it started,
	// returns, and the latency is recorded after that: the books may take
	// a moment to agree.
	agree := func() error {
		switch {
		case latencies.Load() != runs.Load():
			return fmt.Errorf("%d latency reports for %d functions run", latencies.Load(), runs.Load())
		case acquired.Load() != submitted.Load() || released.Load() != submitted.Load():
			return fmt.Errorf("%d issued and %d released for %d submitted", acquired.Load(), released.Load(), submitted.Load())
		}
		return nil
	}
	for deadline := time.Now().Add(10 * time.Second); agree() != nil && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if err := agree(); err != nil {
		t.Fatal(err)
	}
	if p, ok := b.P99(); ok != (runs.Load() > 0) || p != 0 { // the clock never moves
		t.Fatalf("P99 %v, %v after %d runs of no time", p, ok, runs.Load())
	}
	if s := stateOf(b); s.inFlight != 0 || s.queued != 0 {
		t.Fatalf("at the end: %+v", s)
	}
	t.Logf("%d submitted, %d ran", submitted.Load(), runs.Load())
}
