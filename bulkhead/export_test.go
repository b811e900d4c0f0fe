package bulkhead

import (
	"context"
	"fmt"
	"time"
)

// CheckInvariants checks the bulkhead's books under its lock: every release
// frontier is of its residue and not past the last ID issued (state.go), the
// converted set is a sound hash set of IDs past their frontiers, the permits
// out (the IDs past their frontiers, and the converted ones) agree with the
// count, the locked side agrees with the lock-free words, and every waiter in
// the queue is still waiting.
//
// Fast releases go on while it runs, so it reads the count first: a permit
// seen out afterwards was out, and counted, when it read it.
func (b *Bulkhead) CheckInvariants() error {
	b.lock()
	defer b.unlock()
	s := b.hot.state.Load()
	used := int(s & usedMask)
	w := uint64(slots)
	last := b.lastIDLocked()
	heads := 0 // IDs past their frontiers: out
	for r := range w {
		f := b.frontier(r).Load()
		switch {
		case f&(w-1) != r:
			return fmt.Errorf("residue %d: frontier %d is of another residue", r, int64(f))
		case int64(f) > int64(last):
			return fmt.Errorf("residue %d: frontier %d past the last ID issued, %d", r, f, last)
		}
		heads += int((int64(last) - int64(f)) / int64(w))
	}
	t := &b.converted
	out := 0
	for i, id := range t.ids {
		if id == 0 {
			continue
		}
		out++
		if !t.has(id) {
			return fmt.Errorf("converted permit %d at slot %d is not found by a lookup", id, i)
		}
		if f := b.frontier(id).Load(); id > last || int64(f) < int64(id) {
			return fmt.Errorf("converted permit %d: last ID %d, its frontier %d", id, last, int64(f))
		}
	}
	switch {
	case out != t.n:
		return fmt.Errorf("%d slots hold converted permits, table counts %d", out, t.n)
	case t.n > 0 && 2*t.n > len(t.ids):
		return fmt.Errorf("%d converted permits in %d slots: over half full", t.n, len(t.ids))
	case heads+t.n > used:
		return fmt.Errorf("%d permits in use for %d permits past their frontiers and %d converted, of weight >= 1", used, heads, t.n)
	case used == 0 && heads+t.n != 0:
		return fmt.Errorf("none in use with %d permits past their frontiers and %d converted out", heads, t.n)
	case b.sem.Used() < used:
		return fmt.Errorf("the locked side counts %d in use, the state word %d", b.sem.Used(), used)
	case int(b.hot.limit.Load()) != b.sem.Limit():
		return fmt.Errorf("limit %d, the locked side's %d", b.hot.limit.Load(), b.sem.Limit())
	case b.waiters.Len() > b.maxDepth:
		return fmt.Errorf("%d waiters, queue depth %d", b.waiters.Len(), b.maxDepth)
	}
	// A release that finds the slow flag serves the queue after it, so the
	// count may have dropped since: the check is against the count at which
	// the queue was last served. (That no release is lost is TestNoLostWakeup's.)
	for f := b.waiters.Front(); f != nil; f = f.Next() {
		if w := f.Value.weight; w <= b.sem.Limit() { // the first the limit can serve
			if w <= b.sem.Limit()-b.servedAt {
				return fmt.Errorf("the first servable waiter (weight %d) fitted (%d of %d in use) when the queue was served, but waits", w, b.servedAt, b.sem.Limit())
			}
			break
		}
	}
	for f := b.waiters.Front(); f != nil; f = f.Next() {
		select {
		case <-f.Value.ready:
			return fmt.Errorf("a decided waiter is still queued")
		default:
		}
	}
	return nil
}

// has reports whether id is in the set, probing as take does.
func (t *permitTable) has(id uint64) bool {
	mask := uint64(len(t.ids) - 1)
	for i := t.home(id); t.ids[i] != 0; i = (i + 1) & mask {
		if t.ids[i] == id {
			return true
		}
	}
	return false
}

// Counters reports how many permits were issued under the mutex (not by the
// lock-free fast path) and how many were converted (state.go).
func (b *Bulkhead) Counters() (slowIssues, conversions int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.slowIssues, b.conversions
}

// SlowReleases reports how many releases were decided under the mutex.
func (b *Bulkhead) SlowReleases() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.slowReleases
}

// Slots returns the number of release frontiers (W).
func (b *Bulkhead) Slots() int { return slots }

// StartIDsAfter makes a bulkhead with no permit out continue its IDs after
// last, as if every ID up to last had been issued and released: so that a
// test reaches the wrap of the state word's 32-bit sequence.
func (b *Bulkhead) StartIDsAfter(last uint64) {
	b.lock()
	defer b.unlock()
	if b.hot.state.Load()&usedMask != 0 {
		panic("StartIDsAfter with permits out")
	}
	w := uint64(slots)
	for r := range w {
		b.frontier(r).Store(last - (last-r)&(w-1))
	}
	s := b.hot.state.Load()
	b.hot.hi.Store(last >> 32)
	b.hot.state.Store(uint64(uint32(last))<<32 | s&(1<<32-1))
}

// HoldMutex takes b's mutex, as a release that must convert does, without
// setting the slow flag, and returns its unlock.
func HoldMutex(b *Bulkhead) (unlock func()) {
	b.mu.Lock()
	return b.mu.Unlock
}

// StampNow reads the clock that stamps permits, as an acquire would: the
// coarse clock when there is one. The second result reports whether it is
// coarse.
func (b *Bulkhead) StampNow() (time.Time, bool) {
	b.lockNow(nil) // stamp reads an exact clock under the mutex
	defer b.unlock()
	return b.at(b.stamp()), b.coarse != nil
}

// SubmitUnstarted is Submit without starting fn's goroutine: start starts
// it and returns a channel closed when that goroutine has ended, so that a
// test orders the start against Cancel.
func SubmitUnstarted[T any](b *Bulkhead, ctx context.Context, fn func(context.Context) (T, error)) (h *Handle[T], start func() <-chan struct{}, err error) {
	h, runCtx, err := admit(b, ctx, fn)
	if err != nil {
		return nil, nil, err
	}
	return h, func() <-chan struct{} {
		ended := make(chan struct{})
		go func() {
			defer close(ended)
			h.run(runCtx, fn)
		}()
		return ended
	}, nil
}

// Locked reports whether b's mutex is held.
func Locked(b *Bulkhead) bool {
	if b.mu.TryLock() {
		b.mu.Unlock()
		return false
	}
	return true
}

// AcquireAfterLostSwap is TryAcquire(context.Background(), 1) on a
// bulkhead without a capability gate or observer, as it goes on after it
// lost its first swap of the state word (tryContended): permits may have
// been issued since it first read the clock.
func AcquireAfterLostSwap(b *Bulkhead) (Permit, error) {
	return b.tryContended(context.Background(), 1, false)
}
