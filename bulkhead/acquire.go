package bulkhead

import (
	"context"
	"time"

	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/internal/queue"
)

// waiter is a request waiting in the queue. Once it leaves the queue
// (granted, timed out or given up), permit and err are set and ready closed,
// all under the bulkhead's mutex.
type waiter struct {
	node     queue.Node[*waiter]
	weight   int
	deadline time.Time // by the exact clock: a coarse one could time out early
	timer    clock.Timer
	ready    chan struct{}
	permit   Permit
	err      error
}

// TryAcquire issues n permits if they are free now and no one is waiting
// ahead; it never waits. ctx is read only for the capability. n must be
// >= 1. A refusal is a *RejectedError (ErrAtCapacity, ErrDraining or
// ErrCapabilityRequired) and changes nothing.
func (b *Bulkhead) TryAcquire(ctx context.Context, n int) (Permit, error) {
	return b.try(ctx, n, false)
}

// Acquire issues n permits, waiting in the queue (WithQueue) while none are
// free; without a queue it is TryAcquire. It fails with ErrQueueSaturated
// when the queue is full, ErrQueueTimeout after the queue's maximum wait,
// ErrDraining while a lowered limit drains, ErrAtCapacity when n exceeds the
// limit (it could never be issued), or ctx's error when ctx ends first.
// A request that fails holds nothing.
func (b *Bulkhead) Acquire(ctx context.Context, n int) (Permit, error) {
	return b.try(ctx, n, b.maxDepth > 0)
}

// try is the hot path, written out in line because it is measured as such:
// a bulkhead with no capability gate and no observer, with n permits free
// and no one waiting. The steps that usually do nothing (growing the permit
// table, probing past a taken slot, waking the coarse clock) are calls;
// everything else goes to acquire.
func (b *Bulkhead) try(ctx context.Context, n int, wait bool) (Permit, error) {
	if !b.plain || n < 1 || (wait && ctx.Err() != nil) {
		return b.acquire(ctx, n, wait)
	}
	var stamp int64
	if c := b.coarse; c != nil {
		stamp = c.Offset()
	} else {
		stamp = b.exactStamp()
	}
	b.mu.Lock()
	if b.waiters.Len() != 0 || !b.sem.TryAcquire(n) {
		b.mu.Unlock()
		return b.acquire(ctx, n, wait)
	}
	b.seq++
	id := b.seq
	t := &b.permits
	if i := id & uint64(len(t.ids)-1); 2*(t.n+1) <= len(t.ids) && t.ids[i] == 0 {
		t.ids[i] = id // the home slot is free
		t.n++
	} else {
		t.put(id)
	}
	meta := uint64(b.sem.Limit())<<32 | uint64(n)
	b.mu.Unlock()
	return Permit{b: b, id: id, issued: stamp, meta: meta}, nil
}

// acquire is the general path: capability, arguments, events, refusals and
// waiting.
func (b *Bulkhead) acquire(ctx context.Context, n int, wait bool) (Permit, error) {
	if b.capability != "" && !HasCapability(ctx, b.capability) {
		return Permit{}, b.refuseCapability()
	}
	if n < 1 {
		return Permit{}, &ConfigError{"acquire n", n, "must be >= 1"}
	}
	if wait {
		if err := ctx.Err(); err != nil {
			return Permit{}, err
		}
	}
	var es *events
	if b.observed {
		es = new(events)
	}
	b.mu.Lock()
	stamp := b.stamp() // under the lock, so that logged events are in time order
	// Serve (or time out) the waiters first: they are ahead.
	if blocked := b.dispatchLocked(es); !blocked && b.sem.Fits(n) {
		p := b.issueLocked(n, stamp, es)
		b.mu.Unlock()
		b.deliver(es)
		return p, nil
	}
	rej := &RejectedError{
		Err: ErrAtCapacity, Limit: b.sem.Limit(), InFlight: b.sem.Used(), Weight: n,
		QueueDepth: b.waiters.Len(), MaxDepth: b.maxDepth, MaxWait: b.maxWait,
	}
	switch {
	case b.sem.Draining():
		rej.Err = ErrDraining
		b.event(es, EventDrainActive, stamp, 0, "refused an acquire")
	case !wait || n > b.sem.Limit():
		b.event(es, EventAtCapacity, stamp, 0, "")
	case b.waiters.Len() >= b.maxDepth:
		rej.Err = ErrQueueSaturated
		b.event(es, EventAtCapacity, stamp, 0, "")
	default:
		w := &waiter{weight: n, deadline: b.clk.Now().Add(b.maxWait), ready: make(chan struct{})}
		w.node.Value = w
		b.waiters.PushBack(&w.node)
		w.timer = b.clk.AfterFunc(b.maxWait, func() { b.expire(w) })
		b.event(es, EventAtCapacity, stamp, 0, "")
		b.event(es, EventRequestQueued, stamp, 0, "")
		b.mu.Unlock()
		b.deliver(es)
		return b.wait(ctx, w)
	}
	b.event(es, EventRequestRejected, stamp, 0, rej.Err.code)
	b.mu.Unlock()
	b.deliver(es)
	return Permit{}, rej
}

// refuseCapability refuses an acquire without the required capability. It
// changes no state: no permit, no queue place, no ID.
func (b *Bulkhead) refuseCapability() error {
	var es *events
	if b.observed {
		es = new(events)
	}
	b.mu.Lock()
	rej := &RejectedError{
		Err: ErrCapabilityRequired, Capability: b.capability, Limit: b.sem.Limit(), InFlight: b.sem.Used(),
		QueueDepth: b.waiters.Len(), MaxDepth: b.maxDepth, MaxWait: b.maxWait,
	}
	b.event(es, EventRequestRejected, b.stamp(), 0, rej.Err.code)
	b.mu.Unlock()
	b.deliver(es)
	return rej
}

// wait waits for w's turn, its maximum wait, or ctx.
func (b *Bulkhead) wait(ctx context.Context, w *waiter) (Permit, error) {
	select {
	case <-w.ready:
		return w.permit, w.err
	case <-ctx.Done():
	}
	var es *events
	if b.observed {
		es = new(events)
	}
	b.mu.Lock()
	if w.node.InList() {
		b.waiters.Remove(&w.node)
		w.timer.Stop()
		w.err = ctx.Err()
		close(w.ready)
		b.event(es, EventRequestRejected, b.stamp(), 0, w.err.Error())
		b.dispatchLocked(es) // a heavy head leaving may let lighter ones in
		b.mu.Unlock()
		b.deliver(es)
		return Permit{}, w.err
	}
	b.mu.Unlock()
	// Decided just as ctx ended. A permit issued to a request that has given
	// up goes back, to the next in line, so that it is never lost.
	if w.err != nil {
		return Permit{}, w.err
	}
	if err := b.Release(w.permit); err != nil {
		panic("bulkhead: a permit issued to a waiter was not outstanding: " + err.Error())
	}
	return Permit{}, ctx.Err()
}

// expire is w's maximum-wait timer.
func (b *Bulkhead) expire(w *waiter) {
	var es *events
	if b.observed {
		es = new(events)
	}
	b.mu.Lock()
	if w.node.InList() {
		b.timeOutLocked(w, es)
	}
	b.dispatchLocked(es) // w leaving may let lighter waiters behind it in
	b.mu.Unlock()
	b.deliver(es)
}

func (b *Bulkhead) timeOutLocked(w *waiter, es *events) {
	b.waiters.Remove(&w.node)
	w.timer.Stop()
	w.err = &RejectedError{
		Err: ErrQueueTimeout, Limit: b.sem.Limit(), InFlight: b.sem.Used(), Weight: w.weight,
		QueueDepth: b.waiters.Len(), MaxDepth: b.maxDepth, MaxWait: b.maxWait,
	}
	close(w.ready)
	if es != nil {
		b.event(es, EventRequestRejected, b.stamp(), 0, ErrQueueTimeout.code)
	}
}

// expireLocked times out the waiters past their maximum wait, even if their
// timers have not fired yet. Every waiter waits the same maximum, so they
// are at the front.
func (b *Bulkhead) expireLocked(es *events) {
	if b.waiters.Len() == 0 {
		return
	}
	now := b.clk.Now()
	for f := b.waiters.Front(); f != nil && !now.Before(f.Value.deadline); f = b.waiters.Front() {
		b.timeOutLocked(f.Value, es)
	}
}

// dispatchLocked issues permits to waiters, in order, while they fit; a
// waiter past its maximum wait times out instead, even if its timer has not
// fired yet. A waiter heavier than a lowered limit keeps waiting (for a raise
// or its maximum wait) without holding up the waiters behind it. It reports
// whether a waiter the limit can serve is still waiting: newcomers queue
// behind it.
func (b *Bulkhead) dispatchLocked(es *events) (blocked bool) {
	if b.waiters.Len() == 0 {
		return false
	}
	b.expireLocked(es)
	stamp := b.stamp()
	for f := b.waiters.Front(); f != nil; {
		w := f.Value
		f = f.Next()
		if w.weight > b.sem.Limit() {
			continue
		}
		if !b.sem.Fits(w.weight) {
			return true
		}
		b.waiters.Remove(&w.node)
		w.timer.Stop()
		w.permit = b.issueLocked(w.weight, stamp, es)
		close(w.ready)
	}
	return false
}

// issueLocked takes n permits, which fit.
func (b *Bulkhead) issueLocked(n int, stamp int64, es *events) Permit {
	b.sem.Acquire(n)
	b.seq++
	b.permits.put(b.seq)
	p := Permit{b: b, id: b.seq, issued: stamp, meta: uint64(b.sem.Limit())<<32 | uint64(n)}
	if es != nil {
		b.event(es, EventPermitAcquired, stamp, p.id, "")
	}
	return p
}

// Release gives back a permit. It fails with ErrUnknownPermit (a
// *PermitError) for a permit that is not outstanding: released before, from
// another bulkhead, or the zero Permit.
func (b *Bulkhead) Release(p Permit) error {
	if p.b != b {
		return &PermitError{p.id}
	}
	if b.observed {
		return b.releaseObserved(p)
	}
	b.mu.Lock()
	// The permit table's common case, in line (see tryFast): the ID is in its
	// home slot and ends its probe run.
	t := &b.permits
	mask := uint64(len(t.ids) - 1)
	if i := p.id & mask; p.id != 0 && len(t.ids) > 0 && t.ids[i] == p.id && t.ids[(i+1)&mask] == 0 {
		t.ids[i] = 0
		t.n--
	} else if !t.take(p.id) {
		b.mu.Unlock()
		return &PermitError{p.id}
	}
	b.sem.Release(p.Weight())
	if b.waiters.Len() != 0 {
		b.dispatchLocked(nil)
	}
	b.mu.Unlock()
	return nil
}

func (b *Bulkhead) releaseObserved(p Permit) error {
	es := new(events)
	b.mu.Lock()
	if !b.permits.take(p.id) {
		b.mu.Unlock()
		return &PermitError{p.id}
	}
	drained := b.sem.Release(p.Weight())
	stamp := b.stamp()
	b.event(es, EventPermitReleased, stamp, p.id, "")
	if drained {
		b.event(es, EventDrainComplete, stamp, 0, "")
	}
	b.dispatchLocked(es)
	b.mu.Unlock()
	b.deliver(es)
	return nil
}

// event records an event if anyone observes them.
func (b *Bulkhead) event(es *events, code string, stamp int64, id uint64, detail string) {
	if es != nil {
		b.record(es, Event{Code: code, Time: b.at(stamp), PermitID: id, Detail: detail})
	}
}
