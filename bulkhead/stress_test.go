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
// the end. With the fake clock, the goroutines move time on themselves, one
// operation in eight, so that queue timeouts happen however fast the machine
// is; with the real clock, permits are stamped by the coarse clock.
//
// Which refusals a random run meets is chance, so each one is also made to
// happen, by construction, three times in the run: an interlude (see
// interlude) takes the whole bulkhead while the TryAcquires of the others go
// on, and checks that each way to be refused refuses as it must.
//
// The bulkheads are plain (acquires and releases lock-free), observed (both
// under the mutex) and gated by a required capability (acquires under the
// mutex, releases lock-free, so that the two sides meet on every permit).
func TestStress(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		observed, fake, gated bool
	}{
		{"plain-real-clock", false, false, false}, {"plain", false, true, false},
		{"observed", true, true, false}, {"gated", false, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) { stress(t, tc.observed, tc.fake, tc.gated) })
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

func stress(t *testing.T, observed, fake, gated bool) {
	goroutines, ops := 1000, 40
	if testing.Short() {
		goroutines, ops = 200, 20
	}
	var acquiredEvents, releasedEvents atomic.Int64
	opts := []bulkhead.Option{bulkhead.WithQueue(stressDepth, stressWait)}
	var clk *clock.Fake // nil: the real clock
	if fake {
		clk = clock.NewFake(t0)
		opts = append(opts, bulkhead.WithClock(clk))
	}
	ctx := bg // every request's: it carries the capability a gated bulkhead requires
	if gated {
		opts = append(opts, bulkhead.WithRequiredCapability("remote"))
		ctx = remote
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
	// The refusals the random operations met, for the log: the interludes
	// make each happen whatever these are.
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

	// The interludes' marks: once a quarter, half and three quarters of the
	// operations have begun.
	var begun atomic.Int64
	total := int64(goroutines * ops)
	at := []int64{total / 4, total / 2, total * 3 / 4}
	marks := make([]chan struct{}, len(at))
	for k := range marks {
		marks[k] = make(chan struct{})
	}
	// The operations that queue or move the clock hold gate for reading,
	// and wait while an interlude has it or waits for it; SetLimit holds
	// limits for reading, and is left out while something else has it.
	// TryAcquires go on.
	var gate, limits sync.RWMutex

	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for i := range ops {
				n := begun.Add(1)
				for k := range at {
					if n == at[k] {
						close(marks[k])
					}
				}
				op := rng.IntN(200)
				// Acquire, Submit and moving the clock.
				gated := op >= 72 || (clk != nil && op%8 == 1)
				if gated {
					gate.RLock()
				}
				if clk != nil && op%8 == 1 {
					clk.Advance(time.Millisecond)
				}
				switch {
				case op == 0:
					if !limits.TryRLock() {
						break
					}
					if err := b.SetLimit(1 + rng.IntN(stressMaxLimit)); err != nil {
						t.Error(err)
					}
					limits.RUnlock()
				case op < 72:
					p, err := b.TryAcquire(ctx, 1+rng.IntN(2))
					if err == nil {
						got(p)
						give(rng, p)
					} else if !refused(err) {
						t.Errorf("TryAcquire: %v", err)
					}
				case op < 136:
					wctx, cancel := context.WithCancel(ctx)
					if rng.IntN(3) == 0 {
						go cancel() // a waiter giving up at a random moment
					}
					p, err := b.Acquire(wctx, 1+rng.IntN(2))
					cancel()
					if err == nil {
						got(p)
						give(rng, p)
					} else if !refused(err) {
						t.Errorf("Acquire: %v", err)
					}
				default:
					var runs atomic.Int32
					h, err := bulkhead.Submit(b, ctx, func(ctx context.Context) (int, error) {
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
						break
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
				if gated {
					gate.RUnlock()
				}
				if i%10 == 0 {
					if err := b.CheckInvariants(); err != nil {
						t.Error(err)
					}
				}
			}
			// A waiter heavier than a limit lowered after it queued is
			// passed over, and leaves only by timing out. Each goroutine
			// moves the clock through the maximum wait as it ends, so that
			// whoever lowered the limit does so after it, even when nobody
			// else is left to move the clock.
			if clk != nil {
				gate.RLock()
				clk.Advance(stressWait)
				gate.RUnlock()
			}
		})
	}
	// Whatever ends this goroutine (a failed check in an interlude), the
	// others finish: the interlude lets go of the gates on its way out.
	defer wg.Wait()
	rng := rand.New(rand.NewPCG(uint64(goroutines), 8))
	for _, mark := range marks {
		<-mark
		interlude(t, ctx, b, clk, &gate, &limits, rng, got, give)
	}
	wg.Wait()

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
		t.Logf("%d random operations refused: %v", counts[i].Load(), k)
	}
}

// TestStress's queue, and the highest limit it sets.
const (
	stressDepth    = 48
	stressWait     = 5 * time.Millisecond
	stressMaxLimit = 48
)

// interlude makes every way to be refused happen, on b as the stress has
// left it, while the stress's TryAcquires go on; ctx is the context of the
// stress's requests, clk the fake clock, or nil for the real one. It takes limits, so that nobody else changes the
// limit, and raises it to the most anyone asks for, so that every waiter
// can be served (one heavier than a lowered limit is passed over); then
// the gate, so that nobody else queues or moves the clock. The operations
// that held the gate have ended, so the queue is empty, and an Acquire of
// the whole limit is granted once the permits out have come back (a
// TryAcquire refuses while anyone waits). Holding it, with the queue its
// own:
//   - a TryAcquire is refused with ErrAtCapacity, and on a gated bulkhead
//     one without the capability (ctx carries it) with ErrCapabilityRequired;
//   - with the fake clock, 48 waiters fill the queue, one more is refused
//     with ErrQueueSaturated, the 48 time out together when the clock moves
//     on 5 ms, and a waiter whose context is cancelled as it waits fails with
//     context.Canceled. With the real clock, a waiter times out (nobody can
//     serve it), and an Acquire whose context has ended fails with
//     context.Canceled; the queue is not filled, since each waiter leaves it
//     5 ms of real time after it came, and 48 at once would depend on the
//     machine's speed;
//   - the limit lowered below what it holds refuses with ErrDraining.
func interlude(t *testing.T, ctx context.Context, b *bulkhead.Bulkhead, clk *clock.Fake, gate, limits *sync.RWMutex, rng *rand.Rand,
	got func(bulkhead.Permit), give func(*rand.Rand, bulkhead.Permit)) {
	t.Helper()
	limits.Lock()
	defer limits.Unlock()
	if err := b.SetLimit(stressMaxLimit); err != nil {
		t.Fatal(err)
	}
	gate.Lock()
	defer gate.Unlock()

	limit := 2 + rng.IntN(stressMaxLimit-1) // >= 2, to be lowered
	if err := b.SetLimit(limit); err != nil {
		t.Fatal(err)
	}
	var all bulkhead.Permit
	for {
		p, err := acquireAsync(ctx, b, limit).wait(t)
		if err == nil {
			all = p
			break
		}
		// A drain refuses until the permits out have come back; on the
		// real clock the wait for them may time out.
		if !errors.Is(err, bulkhead.ErrDraining) && (clk != nil || !errors.Is(err, bulkhead.ErrQueueTimeout)) {
			t.Fatalf("Acquire of the whole limit %d: %v", limit, err)
		}
		runtime.Gosched()
	}
	got(all)
	_, err := b.TryAcquire(ctx, 1)
	wantErr(t, err, bulkhead.ErrAtCapacity)
	if ctx != bg { // gated
		_, err := b.TryAcquire(bg, 1)
		wantErr(t, err, bulkhead.ErrCapabilityRequired)
	}

	if clk != nil {
		ws := queueWith(t, ctx, b, stressDepth)
		_, err = acquireAsync(ctx, b, 1).wait(t)
		wantErr(t, err, bulkhead.ErrQueueSaturated)
		armed(t, clk, stressDepth)
		clk.Advance(stressWait)
		for _, w := range ws {
			_, err := w.wait(t)
			wantErr(t, err, bulkhead.ErrQueueTimeout)
		}
		wctx, cancel := context.WithCancel(ctx)
		w := queueWith(t, wctx, b, 1)[0]
		cancel()
		if _, err := w.wait(t); !errors.Is(err, context.Canceled) {
			t.Fatalf("waiter cancelled in the queue: %v", err)
		}
	} else {
		_, err := acquireAsync(ctx, b, 1).wait(t)
		wantErr(t, err, bulkhead.ErrQueueTimeout)
		wctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := acquireAsync(wctx, b, 1).wait(t); !errors.Is(err, context.Canceled) {
			t.Fatalf("Acquire with an ended context: %v", err)
		}
	}

	if err := b.SetLimit(limit - 1); err != nil {
		t.Fatal(err)
	}
	_, err = b.TryAcquire(ctx, 1)
	wantErr(t, err, bulkhead.ErrDraining)
	give(rng, all)
	if err := b.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}
