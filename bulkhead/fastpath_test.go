package bulkhead_test

// Tests aimed at the lock-free fast path (state.go): the state word, the
// release frontiers, conversion and healing, the 32-bit sequence's wrap, and
// the slow flag's hand-offs to the mutex.

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/bulkhead"
)

// releaseTogether releases p from k goroutines at once and returns how many
// releases were accepted; every other one must be ErrUnknownPermit.
func releaseTogether(t *testing.T, b *bulkhead.Bulkhead, p bulkhead.Permit, k int) int {
	t.Helper()
	var ok atomic.Int32
	var start, done sync.WaitGroup
	start.Add(1)
	for range k {
		done.Go(func() {
			start.Wait()
			switch err := b.Release(p); {
			case err == nil:
				ok.Add(1)
			case !errors.Is(err, bulkhead.ErrUnknownPermit):
				t.Errorf("release of permit %d: %v", p.ID(), err)
			}
		})
	}
	start.Done()
	done.Wait()
	return int(ok.Load())
}

// Two or more concurrent releases of one permit: exactly one is accepted,
// for a permit released by its frontier and for a converted one, and the
// count goes down once.
func TestConcurrentDoubleRelease(t *testing.T) {
	b := newBH(t, 8)
	w := b.Slots()
	for i := range 2000 {
		p := acquire(t, b, 1+i%2)
		if i%50 == 0 { // hold p while W others are issued: its slot's next ID converts it
			for range w {
				release(t, b, acquire(t, b, 1))
			}
		}
		if n := releaseTogether(t, b, p, 2+i%3); n != 1 {
			t.Fatalf("permit %d: %d of the concurrent releases accepted, want 1", p.ID(), n)
		}
		if got := b.InFlight(); got != 0 {
			t.Fatalf("after releasing permit %d: %d in flight", p.ID(), got)
		}
	}
	if _, conv := b.Counters(); conv != 40 {
		t.Fatalf("%d permits converted, want 40", conv)
	}
	if err := b.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// A permit held while W others are issued is converted when the next ID of
// its residue is released; its frontier then serves fast releases again
// although the permit is still out, and the permit's release is accepted
// once. Acquires never take the mutex.
func TestConversionHeals(t *testing.T) {
	b := newBH(t, 4)
	w := b.Slots()
	old := acquire(t, b, 1)
	round := func() { release(t, b, acquire(t, b, 1)) }
	for range w - 1 {
		round()
	}
	if slow, conv := b.Counters(); slow != 0 || conv != 0 || b.SlowReleases() != 0 {
		t.Fatalf("before the old permit's residue comes round: %d slow issues, %d slow releases, %d conversions", slow, b.SlowReleases(), conv)
	}
	round() // the old permit's residue: in the way, converted under the mutex
	if slow, conv := b.Counters(); slow != 0 || conv != 1 || b.SlowReleases() != 1 {
		t.Fatalf("at the old permit's residue: %d slow issues, %d slow releases, %d conversions, want 0, 1 and 1", slow, b.SlowReleases(), conv)
	}
	if err := b.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	for range 3 * w { // every slot again, the healed one twice over
		round()
	}
	if slow, conv := b.Counters(); slow != 0 || conv != 1 || b.SlowReleases() != 1 {
		t.Fatalf("after healing: %d slow issues, %d slow releases, %d conversions: the fast path was not used again", slow, b.SlowReleases(), conv)
	}
	release(t, b, old)
	if err := b.Release(old); !errors.Is(err, bulkhead.ErrUnknownPermit) {
		t.Fatalf("second release of a converted permit: %v", err)
	}
	if b.InFlight() != 0 {
		t.Fatalf("%d in flight at the end", b.InFlight())
	}
	if err := b.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// Several permits of one residue held while their residue comes round again
// and again are converted together by the release of a later one; each is
// then accepted back exactly once, and the frontier serves fast releases
// again.
func TestConversionOfSeveral(t *testing.T) {
	b := newBH(t, 8)
	w := uint64(b.Slots())
	var held []bulkhead.Permit
	var later bulkhead.Permit
	for later.ID() == 0 {
		p := acquire(t, b, 1)
		switch {
		case p.ID()%w != w-1:
			release(t, b, p)
		case len(held) < 4:
			held = append(held, p)
		default:
			later = p
		}
	}
	if _, conv := b.Counters(); conv != 0 {
		t.Fatalf("%d conversions before the later permit's release", conv)
	}
	release(t, b, later)
	if _, conv := b.Counters(); conv != len(held) {
		t.Fatalf("%d conversions by the later permit's release, want %d", conv, len(held))
	}
	if err := b.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	if err := b.Release(later); !errors.Is(err, bulkhead.ErrUnknownPermit) {
		t.Fatalf("second release of the later permit: %v", err)
	}
	for _, p := range held {
		if got := b.InFlight(); got == 0 {
			t.Fatalf("none in flight with permit %d still out", p.ID())
		}
		release(t, b, p)
		if err := b.Release(p); !errors.Is(err, bulkhead.ErrUnknownPermit) {
			t.Fatalf("second release of converted permit %d: %v", p.ID(), err)
		}
	}
	slow := b.SlowReleases()
	for range 2 * w { // the residue's frontier is past every converted one: fast again
		release(t, b, acquire(t, b, 1))
	}
	if b.SlowReleases() != slow || b.InFlight() != 0 {
		t.Fatalf("after the conversions: %d more slow releases, %d in flight", b.SlowReleases()-slow, b.InFlight())
	}
	if err := b.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// Across the wrap of the state word's 32-bit sequence, IDs go on increasing
// by one and stay unique; the last IDs before the wrap are issued under the
// mutex, which moves the high half, and the fast path takes over again after
// it; permits held across the wrap are released once.
func TestSequenceWrap(t *testing.T) {
	b := newBH(t, 16)
	start := uint64(math.MaxUint32 - 300)
	b.StartIDsAfter(start)
	var held []bulkhead.Permit
	last := start
	for i := range 600 {
		p := acquire(t, b, 1)
		if p.ID() != last+1 {
			t.Fatalf("ID %d after %d", p.ID(), last)
		}
		last = p.ID()
		if i%100 == 0 {
			held = append(held, p)
		} else {
			release(t, b, p)
		}
	}
	if last <= math.MaxUint32 {
		t.Fatalf("the IDs did not cross 2^32: last %d", last)
	}
	// The IDs up to the wrap are issued under the mutex, the rest on the
	// fast path; the held permits are converted once each.
	if slow, conv := b.Counters(); slow != int(1<<32-start) || conv != len(held) {
		t.Fatalf("%d slow issues and %d conversions across the wrap, want %d and %d", slow, conv, 1<<32-start, len(held))
	}
	for _, p := range held {
		release(t, b, p)
		if err := b.Release(p); !errors.Is(err, bulkhead.ErrUnknownPermit) {
			t.Fatalf("second release of permit %d: %v", p.ID(), err)
		}
	}
	if err := b.CheckInvariants(); err != nil {
		t.Fatal(err)
	}

	// And concurrently, with the sequence about to wrap again.
	b = newBH(t, 16)
	b.StartIDsAfter(2*math.MaxUint32 - 2000)
	var seen sync.Map
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			prev := uint64(0)
			for range 1000 {
				p, err := b.TryAcquire(bg, 1+g%2)
				if err != nil {
					continue // at capacity
				}
				if p.ID() <= prev {
					t.Errorf("goroutine %d: ID %d after %d", g, p.ID(), prev)
				}
				prev = p.ID()
				if _, dup := seen.LoadOrStore(p.ID(), true); dup {
					t.Errorf("ID %d issued twice", p.ID())
				}
				runtime.Gosched()
				release(t, b, p)
			}
		})
	}
	wg.Wait()
	if err := b.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// Many goroutines take and give permits on the fast path while some hold
// theirs long enough to be converted, some release twice at once, and one
// changes the limit: the permits held (by the test's own books) never exceed
// the limit the newest carries, no ID is issued twice, each permit is
// accepted back exactly once, and the books balance at the end.
func TestFastPathStress(t *testing.T) {
	goroutines, ops := 64, 3000
	if testing.Short() {
		ops = 500
	}
	b := newBH(t, 24)
	held := &heldSet{byID: map[uint64]bulkhead.Permit{}}
	var seen sync.Map
	var issued, accepted atomic.Int64
	stop := make(chan struct{})
	var changer sync.WaitGroup
	changer.Go(func() {
		rng := rand.New(rand.NewPCG(1, 2))
		for {
			select {
			case <-stop:
				return
			default:
			}
			n := 1 + rng.IntN(32)
			if err := b.SetLimit(n); err != nil {
				t.Error(err)
			}
			// This goroutine alone changes the limit: a permit it is issued
			// now carries the limit it just set.
			if p, err := b.TryAcquire(bg, 1); err == nil {
				held.add(t, p)
				if p.Limit() != n {
					t.Errorf("permit %d issued after SetLimit(%d) carries limit %d", p.ID(), n, p.Limit())
				}
				held.remove(p)
				release(t, b, p)
			}
			if err := b.CheckInvariants(); err != nil {
				t.Error(err)
			}
			time.Sleep(50 * time.Microsecond)
		}
	})
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 3))
			var long bulkhead.Permit // held across many others' issues, by a few goroutines
			for range ops {
				p, err := b.TryAcquire(bg, 1+rng.IntN(2))
				if err != nil {
					if !errors.Is(err, bulkhead.ErrAtCapacity) && !errors.Is(err, bulkhead.ErrDraining) {
						t.Errorf("TryAcquire: %v", err)
					}
					runtime.Gosched()
					continue
				}
				issued.Add(1)
				if _, dup := seen.LoadOrStore(p.ID(), true); dup {
					t.Errorf("ID %d issued twice", p.ID())
				}
				held.add(t, p)
				switch rng.IntN(40) {
				case 0:
					if g < 4 {
						long, p = p, long
						if p.ID() == 0 {
							continue
						}
					}
				case 1:
					held.remove(p)
					accepted.Add(int64(releaseTogether(t, b, p, 2)))
					continue
				}
				if rng.IntN(2) == 0 {
					runtime.Gosched()
				}
				held.remove(p)
				if err := b.Release(p); err != nil {
					t.Errorf("release of permit %d: %v", p.ID(), err)
				} else {
					accepted.Add(1)
				}
			}
			if p := long; p.ID() != 0 {
				held.remove(p)
				if err := b.Release(p); err != nil {
					t.Errorf("release of long-held permit %d: %v", p.ID(), err)
				} else {
					accepted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	changer.Wait()
	if err := b.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	if issued.Load() != accepted.Load() {
		t.Fatalf("%d permits issued, %d releases accepted", issued.Load(), accepted.Load())
	}
	if b.InFlight() != 0 || b.Draining() || b.Available() != b.Limit() {
		t.Fatalf("at the end: %d in flight, draining %v, %d of %d available", b.InFlight(), b.Draining(), b.Available(), b.Limit())
	}
	slow, conv := b.Counters()
	t.Logf("%d permits issued, %d under the mutex, %d converted", issued.Load(), slow, conv)
	if conv == 0 && !testing.Short() {
		t.Error("no permit was converted: the stress did not reach that path")
	}
}

// A waiter is served when a fast release frees room: the release finds the
// slow flag and serves the queue. The queue's maximum wait is an hour, so a
// lost wake-up shows as a waiter still waiting when its context ends.
func TestNoLostWakeup(t *testing.T) {
	b := newBH(t, 3, bulkhead.WithQueue(64, time.Hour))
	ctx, cancel := context.WithTimeout(bg, 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var served atomic.Int64
	for g := range 8 { // fast takers: they never wait, and release at once
		wg.Go(func() {
			for i := range 3000 {
				if p, err := b.TryAcquire(bg, 1); err == nil {
					if i%2 == g%2 {
						runtime.Gosched()
					}
					release(t, b, p)
				}
			}
		})
	}
	for range 8 { // waiters
		wg.Go(func() {
			for range 300 {
				p, err := b.Acquire(ctx, 1)
				if err != nil {
					t.Errorf("a waiter was not served: %v (%d in flight, %d queued)", err, b.InFlight(), b.QueueDepth())
					return
				}
				served.Add(1)
				release(t, b, p)
			}
		})
	}
	wg.Wait()
	if err := b.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	if b.InFlight() != 0 || b.QueueDepth() != 0 {
		t.Fatalf("at the end: %d in flight, %d queued", b.InFlight(), b.QueueDepth())
	}
	t.Logf("%d waits served", served.Load())
}
