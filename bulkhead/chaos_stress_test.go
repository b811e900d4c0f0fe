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

// chaosFailure is what the chaos clock and listener panic with.
const chaosFailure = "user code fails"

// chaos makes user code fail now and then, while on: one call in oneIn
// panics and one exits its goroutine (runtime.Goexit), as a faulty clock,
// listener or test helper calling t.FailNow would.
type chaos struct {
	on    atomic.Bool
	oneIn int
}

func (c *chaos) strike() {
	if !c.on.Load() {
		return
	}
	switch rand.IntN(c.oneIn) {
	case 0:
		runtime.Goexit()
	case 1:
		panic(chaosFailure)
	}
}

// chaosClock is a fake clock whose Now, AfterFunc and timers' Stop strike.
type chaosClock struct {
	*clock.Fake
	*chaos
}

func (c chaosClock) Now() time.Time {
	c.strike()
	return c.Fake.Now()
}

func (c chaosClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	c.strike()
	return chaosTimer{c.chaos, c.Fake.AfterFunc(d, f)}
}

type chaosTimer struct {
	*chaos
	clock.Timer
}

func (t chaosTimer) Stop() bool {
	t.strike()
	return t.Timer.Stop()
}

// TestUserCodeFailingUnderStress runs acquires, releases, Submits, cancels
// and limit changes from many goroutines while the bulkhead's clock and
// listener, the callers' contexts and Submit's functions panic or exit
// their goroutines at random. The package's promise for each such failure
// is local (the call it was made for ends, the bulkhead stays whole); this
// checks that the promises compose: inside the work, the permits held
// never exceed the limit in force at the newest issue, and the release of
// a permit a caller holds is accepted; at the end, with the failures off,
// nothing is in flight or queued, the mutex is free, the books balance,
// and the whole limit can be taken. Every call runs on a goroutine of its
// own, which may exit.
func TestUserCodeFailingUnderStress(t *testing.T) {
	for _, tc := range []struct {
		name     string
		observed bool
	}{{"plain", false}, {"observed", true}} {
		t.Run(tc.name, func(t *testing.T) { userCodeFailing(t, tc.observed) })
	}
}

func userCodeFailing(t *testing.T, observed bool) {
	const limit = 4
	goroutines, ops := 16, 300
	if testing.Short() {
		goroutines, ops = 8, 60
	}
	fail := &chaos{oneIn: 24}
	clk := chaosClock{clock.NewFake(t0), fail}
	opts := []bulkhead.Option{bulkhead.WithClock(clk), bulkhead.WithQueue(goroutines, 5*time.Millisecond)}
	if observed {
		opts = append(opts, bulkhead.WithEventLog(64),
			bulkhead.WithListener(bulkhead.ListenerFunc(func(bulkhead.Event) { fail.strike() })))
	}
	b := newBH(t, limit, opts...)
	fail.on.Store(true)

	// call runs f on a goroutine of its own, reporting whether f returned.
	// A panic other than the chaos's is a failure of the bulkhead's.
	var calls, exited, granted, refused atomic.Int64
	call := func(f func()) (returned bool) {
		calls.Add(1)
		done := make(chan bool, 1)
		go func() {
			ok := false
			defer func() { done <- ok }()
			defer func() {
				if r := recover(); r != nil && r != chaosFailure {
					t.Errorf("panic: %v", r)
				}
			}()
			f()
			ok = true
		}()
		select {
		case ok := <-done:
			if !ok {
				exited.Add(1)
			}
			return ok
		case <-time.After(30 * time.Second):
			t.Error("a call did not end")
			return false
		}
	}

	held := &heldSet{byID: map[uint64]bulkhead.Permit{}}
	var cancellers sync.WaitGroup
	defer cancellers.Wait()
	// ending returns a context cancelled after a few yields: every wait
	// ends, whatever became of its timer (an AfterFunc that failed arms
	// none). Its Done and Err strike too.
	ending := func(rng *rand.Rand) context.Context {
		ctx, cancel := context.WithCancel(bg)
		spins := rng.IntN(64)
		cancellers.Go(func() {
			for range spins {
				runtime.Gosched()
			}
			cancel()
		})
		return chaosCtx{ctx, fail}
	}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 11))
			for i := range ops {
				switch op := rng.IntN(16); {
				case op < 9:
					n := 1 + rng.IntN(2)
					ctx := ending(rng)
					var p bulkhead.Permit
					var err error
					try := op < 4
					if !call(func() {
						if try {
							p, err = b.TryAcquire(ctx, n)
						} else {
							p, err = b.Acquire(ctx, n)
						}
					}) {
						break
					}
					if err != nil {
						refused.Add(1)
						break
					}
					granted.Add(1)
					if p.Weight() != n {
						t.Errorf("permit %d of weight %d, asked for %d", p.ID(), p.Weight(), n)
					}
					held.add(t, p)
					for range rng.IntN(3) {
						runtime.Gosched()
					}
					held.remove(p)
					// A Release that exits its goroutine releases all the
					// same; one that returns accepts the permit.
					if call(func() { err = b.Release(p) }) && err != nil {
						t.Errorf("release of permit %d, held: %v", p.ID(), err)
					}
				case op < 10:
					// Now and then: a drain refuses every acquire.
					if rng.IntN(4) == 0 {
						n := 1 + rng.IntN(limit)
						call(func() { _ = b.SetLimit(n) })
					}
				case op < 11:
					clk.Advance(time.Duration(1+rng.IntN(5)) * time.Millisecond)
				default:
					var h *bulkhead.Handle[int]
					var err error
					how := rng.IntN(4)
					ctx := ending(rng)
					if !call(func() {
						h, err = bulkhead.Submit(b, ctx, func(context.Context) (int, error) {
							switch how {
							case 0:
								panic(chaosFailure)
							case 1:
								runtime.Goexit()
							}
							runtime.Gosched()
							return i, nil
						})
					}) || err != nil {
						break
					}
					if rng.IntN(3) == 0 {
						call(func() { h.Cancel() })
					}
					select {
					case <-h.Done():
					case <-time.After(30 * time.Second):
						t.Error("a handle did not complete")
						return
					}
					r, _ := h.Wait(bg)
					if r.Status != bulkhead.Success && r.Status != bulkhead.Failed && r.Status != bulkhead.Cancelled {
						t.Errorf("handle completed with status %v", r.Status)
					}
				}
			}
		})
	}
	wg.Wait()
	cancellers.Wait()
	fail.on.Store(false)

	// Timers that fired may still be timing out their waiters, which have
	// all returned already: each lets go of the mutex as it ends.
	clk.Advance(time.Hour)
	settled := func() bool { return !bulkhead.Locked(b) && b.InFlight() == 0 && b.QueueDepth() == 0 }
	for deadline := time.Now().Add(10 * time.Second); !settled(); time.Sleep(100 * time.Microsecond) {
		if time.Now().After(deadline) {
			t.Fatalf("every call has ended, and still %+v, mutex held %v: a failing call left something behind",
				stateOf(b), bulkhead.Locked(b))
		}
	}
	if err := b.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	if err := b.SetLimit(limit); err != nil {
		t.Fatal(err)
	}
	p, err := b.TryAcquire(bg, limit)
	if err != nil {
		t.Fatalf("the whole limit after the stress: %v (%+v, draining %v)", err, stateOf(b), b.Draining())
	}
	release(t, b, p)
	if err := b.Release(p); !errors.Is(err, bulkhead.ErrUnknownPermit) {
		t.Fatalf("a second release: %v", err)
	}
	t.Logf("%d calls, %d of them panicked or exited; %d acquires granted, %d refused",
		calls.Load(), exited.Load(), granted.Load(), refused.Load())
}

// chaosCtx is a context whose Done and Err strike.
type chaosCtx struct {
	context.Context
	*chaos
}

func (c chaosCtx) Done() <-chan struct{} {
	c.strike()
	return c.Context.Done()
}

func (c chaosCtx) Err() error {
	c.strike()
	return c.Context.Err()
}
