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

// TestStress runs 1,000 goroutines that acquire, wait, release, release
// twice, submit, cancel and change the limit at random, and checks the
// invariants: the permits held never exceed the limit in force when the
// newest of them was issued (checked by the test's own books, see heldSet,
// and, observed, by the events), no ID issued twice, every release of an
// outstanding permit accepted and every second one refused, every function
// run at most once and every handle completed, the bulkhead's own books
// (CheckInvariants) right throughout, and nothing left in flight or queued at
// the end. With the fake clock, a goroutine moves time on so that queue
// timeouts happen however fast the machine is; with the real clock, permits
// are stamped by the coarse clock.
func TestStress(t *testing.T) {
	for _, tc := range []struct {
		name           string
		observed, fake bool
	}{{"plain-real-clock", false, false}, {"plain", false, true}, {"observed", true, true}} {
		t.Run(tc.name, func(t *testing.T) { stress(t, tc.observed, tc.fake) })
	}
}

// heldSet is the test's own record of the permits it holds (from acquire's
// return until just before Release). Whatever the bulkhead counts, the
// permits held never exceed the limit carried by the newest of them: every
// older one held was out when the newest was issued, and that issue fitted
// the limit then in force.
type heldSet struct {
	mu   sync.Mutex
	byID map[uint64]bulkhead.Permit
	sum  int
}

func (h *heldSet) add(t *testing.T, p bulkhead.Permit) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.byID[p.ID()] = p
	h.sum += p.Weight()
	var newest bulkhead.Permit
	for id, q := range h.byID {
		if id > newest.ID() {
			newest = q
		}
	}
	if h.sum > newest.Limit() {
		t.Errorf("%d permits held, over the limit %d in force when the newest (%d) was issued", h.sum, newest.Limit(), newest.ID())
	}
}

func (h *heldSet) remove(p bulkhead.Permit) {
	h.mu.Lock()
	delete(h.byID, p.ID())
	h.sum -= p.Weight()
	h.mu.Unlock()
}

func stress(t *testing.T, observed, fake bool) {
	goroutines, ops := 1000, 40
	if testing.Short() {
		goroutines, ops = 200, 20
	}
	var acquiredEvents, releasedEvents atomic.Int64
	opts := []bulkhead.Option{bulkhead.WithQueue(48, 5*time.Millisecond)}
	stop := make(chan struct{})
	var ticker sync.WaitGroup
	if fake {
		clk := clock.NewFake(t0)
		opts = append(opts, bulkhead.WithClock(clk))
		ticker.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
					clk.Advance(time.Millisecond)
					// A sleep, not a yield: a goroutine woken by its timer
					// runs next on its P, where a yielding one waits behind
					// every runnable goroutine, and at GOMAXPROCS 1 the
					// waiters were served before 5 ms had passed.
					time.Sleep(20 * time.Microsecond)
				}
			}
		})
	}
	if observed {
		opts = append(opts, bulkhead.WithEventLog(256), bulkhead.WithListener(bulkhead.ListenerFunc(func(e bulkhead.Event) {
			switch e.Code {
			case bulkhead.EventPermitAcquired:
				acquiredEvents.Add(1)
				if e.InFlight > e.Limit {
					t.Errorf("permit %d issued with %d in flight over limit %d", e.PermitID, e.InFlight, e.Limit)
				}
			case bulkhead.EventPermitReleased:
				releasedEvents.Add(1)
			}
		})))
	}
	b := newBH(t, 32, opts...)

	var seen sync.Map // permit IDs issued
	var issued, releasedOK atomic.Int64
	held := &heldSet{byID: map[uint64]bulkhead.Permit{}}
	got := func(p bulkhead.Permit) {
		issued.Add(1)
		held.add(t, p)
		if _, dup := seen.LoadOrStore(p.ID(), true); dup {
			t.Errorf("permit ID %d issued twice", p.ID())
		}
		if p.Weight() > p.Limit() {
			t.Errorf("permit of weight %d issued under limit %d", p.Weight(), p.Limit())
		}
	}
	give := func(rng *rand.Rand, p bulkhead.Permit) {
		for range rng.IntN(3) {
			runtime.Gosched()
		}
		held.remove(p)
		if err := b.Release(p); err != nil {
			t.Errorf("release of outstanding permit %d: %v", p.ID(), err)
			return
		}
		releasedOK.Add(1)
		if rng.IntN(4) == 0 {
			if err := b.Release(p); !errors.Is(err, bulkhead.ErrUnknownPermit) {
				t.Errorf("second release of permit %d: %v", p.ID(), err)
			}
		}
	}
	// Each way to be refused must happen, or the test did not test it.
	kinds := []error{bulkhead.ErrAtCapacity, bulkhead.ErrDraining, bulkhead.ErrQueueSaturated,
		bulkhead.ErrQueueTimeout, context.Canceled}
	counts := make([]atomic.Int64, len(kinds))
	refused := func(err error) bool {
		for i, k := range kinds {
			if errors.Is(err, k) {
				counts[i].Add(1)
				runtime.Gosched() // let holders run: refusals are cheap, and would crowd them out
				return true
			}
		}
		return false
	}

	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for i := range ops {
				switch op := rng.IntN(200); {
				case op == 0:
					if err := b.SetLimit(1 + rng.IntN(48)); err != nil {
						t.Error(err)
					}
				case op < 72:
					p, err := b.TryAcquire(bg, 1+rng.IntN(2))
					if err == nil {
						got(p)
						give(rng, p)
					} else if !refused(err) {
						t.Errorf("TryAcquire: %v", err)
					}
				case op < 136:
					ctx, cancel := context.WithCancel(bg)
					if rng.IntN(3) == 0 {
						go cancel() // a waiter giving up at a random moment
					}
					p, err := b.Acquire(ctx, 1+rng.IntN(2))
					cancel()
					if err == nil {
						got(p)
						give(rng, p)
					} else if !refused(err) {
						t.Errorf("Acquire: %v", err)
					}
				default:
					var runs atomic.Int32
					h, err := bulkhead.Submit(b, bg, func(ctx context.Context) (int, error) {
						if runs.Add(1) != 1 {
							t.Error("a function ran twice")
						}
						runtime.Gosched()
						return i, ctx.Err()
					})
					if err != nil {
						if !refused(err) {
							t.Errorf("Submit: %v", err)
						}
						continue
					}
					issued.Add(1)
					releasedOK.Add(1) // the handle releases it, exactly once
					if rng.IntN(3) == 0 {
						h.Cancel()
					}
					r := result(t, h)
					if r.Status == bulkhead.Success && r.Value != i {
						t.Errorf("result %d, want %d", r.Value, i)
					}
				}
				if i%10 == 0 {
					if err := b.CheckInvariants(); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	ticker.Wait()

	if err := b.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	if s := stateOf(b); s.inFlight != 0 || s.queued != 0 || s.available != s.limit || b.Draining() {
		t.Fatalf("after the stress: %+v draining %v", s, b.Draining())
	}
	if issued.Load() != releasedOK.Load() {
		t.Fatalf("%d permits issued, %d released", issued.Load(), releasedOK.Load())
	}
	if observed && (acquiredEvents.Load() != releasedEvents.Load() || acquiredEvents.Load() < issued.Load()) {
		// Waiters that gave up as a permit was issued to them add to both.
		t.Fatalf("%d acquire events, %d release events, %d permits issued to callers",
			acquiredEvents.Load(), releasedEvents.Load(), issued.Load())
	}
	t.Logf("%d permits issued", issued.Load())
	for i, k := range kinds {
		t.Logf("%d refused: %v", counts[i].Load(), k)
		// A short run may miss one; the real clock may never time one out.
		if counts[i].Load() == 0 && !testing.Short() && (fake || k != bulkhead.ErrQueueTimeout) {
			t.Errorf("no request was refused with %v: the stress did not reach that path", k)
		}
	}
}
