package bulkhead_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/bulkhead"
	"github.com/groupexec/groupexec/clock"
)

// TestNoWaiterStrandedUnderWeightsAndLimitChanges queues weighted requests
// that never time out (the fake clock never moves), gives some of them up at
// random moments, and lowers and raises the limit meanwhile, below their
// weights and below the permits out (drains); then raises it to the heaviest
// weight. From then on every waiter can be served, so each must be: no
// timeout can mask a wake-up lost on the way (a heavy waiter passed over, a
// drain ended by a lock-free release, a head giving up in front of lighter
// waiters, a raise). A waiter still waiting when its watchdog context ends
// was stranded. Checked from inside the work: the weight held never exceeds
// the limit in force at the newest issue (heldSet), each permit has the
// weight asked for; at the end, nothing out or queued, no drain, every
// permit released exactly once, and, observed, as many release events as
// acquire events.
func TestNoWaiterStrandedUnderWeightsAndLimitChanges(t *testing.T) {
	for _, tc := range []struct {
		name            string
		observed, gated bool
	}{{"plain", false, false}, {"gated", false, true}, {"observed", true, false}} {
		t.Run(tc.name, func(t *testing.T) { noWaiterStranded(t, tc.observed, tc.gated) })
	}
}

func noWaiterStranded(t *testing.T, observed, gated bool) {
	const (
		workers   = 16
		maxWeight = 4
	)
	ops, limitChanges := 300, 400
	if testing.Short() {
		ops, limitChanges = 60, 80
	}
	clk := clock.NewFake(t0) // never moves: no waiter times out
	opts := []bulkhead.Option{bulkhead.WithClock(clk), bulkhead.WithQueue(2*workers, time.Hour)}
	ctx := bg
	if gated {
		opts = append(opts, bulkhead.WithRequiredCapability("remote"))
		ctx = remote
	}
	var acquiredEvents, releasedEvents atomic.Int64
	if observed {
		opts = append(opts, bulkhead.WithEventLog(64), bulkhead.WithListener(bulkhead.ListenerFunc(func(e bulkhead.Event) {
			switch e.Code {
			case bulkhead.EventPermitAcquired:
				acquiredEvents.Add(1)
			case bulkhead.EventPermitReleased:
				releasedEvents.Add(1)
			}
		})))
	}
	b := newBH(t, maxWeight, opts...)
	// The watchdog: only a stranded waiter is still waiting when it ends.
	watchdog, stop := context.WithTimeout(ctx, 30*time.Second)
	defer stop()

	held := &heldSet{byID: map[uint64]bulkhead.Permit{}}
	var issued, released atomic.Int64
	hold := func(rng *rand.Rand, p bulkhead.Permit, n int) {
		issued.Add(1)
		if p.Weight() != n {
			t.Errorf("permit %d of weight %d, asked for %d", p.ID(), p.Weight(), n)
		}
		held.add(t, p)
		for range rng.IntN(3) {
			runtime.Gosched()
		}
		held.remove(p)
		if err := b.Release(p); err != nil {
			t.Errorf("Release(%d): %v", p.ID(), err)
			return
		}
		released.Add(1)
	}
	// refusedAsItMust reports whether err is a refusal the random limit can
	// cause: the queue never fills (it holds every worker) and never times
	// out, and a request's own cancellation is the caller's.
	refusedAsItMust := func(err error, cancelled bool) bool {
		return errors.Is(err, bulkhead.ErrAtCapacity) || errors.Is(err, bulkhead.ErrDraining) ||
			cancelled && errors.Is(err, context.Canceled)
	}

	var wg sync.WaitGroup
	wg.Go(func() { // the limit moves, then settles at the heaviest weight
		rng := rand.New(rand.NewPCG(0, 3))
		for range limitChanges {
			if err := b.SetLimit(1 + rng.IntN(maxWeight)); err != nil {
				t.Error(err)
			}
			runtime.Gosched()
		}
		if err := b.SetLimit(maxWeight); err != nil {
			t.Error(err)
		}
	})
	for g := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g)+1, 3))
			for range ops {
				n := 1 + rng.IntN(maxWeight)
				switch op := rng.IntN(8); {
				case op < 2:
					p, err := b.TryAcquire(ctx, n)
					if err == nil {
						hold(rng, p, n)
					} else if !refusedAsItMust(err, false) {
						t.Errorf("TryAcquire(%d): %v", n, err)
					}
				case op < 7:
					wctx, cancel := context.WithCancel(watchdog)
					cancelled := rng.IntN(3) == 0
					if cancelled {
						go cancel() // gives up at a random moment, maybe as it is served
					}
					p, err := b.Acquire(wctx, n)
					cancel()
					switch {
					case err == nil:
						hold(rng, p, n)
					case errors.Is(err, context.DeadlineExceeded):
						t.Errorf("Acquire(%d) stranded: %v (limit %d, %d in flight, %d queued)",
							n, err, b.Limit(), b.InFlight(), b.QueueDepth())
					case !refusedAsItMust(err, cancelled):
						t.Errorf("Acquire(%d): %v", n, err)
					}
				default:
					h, err := bulkhead.Submit(b, watchdog, func(ctx context.Context) (int, error) {
						runtime.Gosched()
						return 0, nil
					})
					if err != nil {
						if !refusedAsItMust(err, false) {
							t.Errorf("Submit: %v (stranded in the queue if the deadline passed)", err)
						}
						break
					}
					issued.Add(1)
					released.Add(1) // the handle releases it, exactly once
					if rng.IntN(2) == 0 {
						h.Cancel()
					}
					if _, err := h.Wait(watchdog); err != nil {
						t.Errorf("a Submit never completed: %v", err)
					}
				}
			}
		})
	}
	wg.Wait()

	if err := b.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	if s := stateOf(b); s.inFlight != 0 || s.queued != 0 || s.available != maxWeight || s.limit != maxWeight || b.Draining() {
		t.Fatalf("at the end: %+v, draining %v", s, b.Draining())
	}
	if issued.Load() != released.Load() {
		t.Fatalf("%d permits issued, %d released", issued.Load(), released.Load())
	}
	if observed && acquiredEvents.Load() != releasedEvents.Load() {
		t.Fatalf("%d acquire events, %d release events", acquiredEvents.Load(), releasedEvents.Load())
	}
	t.Logf("%d permits issued", issued.Load())
}
