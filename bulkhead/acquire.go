package bulkhead

import (
	"context"
	"fmt"
	"time"

	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/internal/groupsem"
	"github.com/groupexec/groupexec/internal/queue"
)

// waiter is a request waiting in the queue. Once it leaves the queue
// (granted, timed out or given up), permit and err are set and ready closed,
// all under the bulkhead's mutex.
type waiter struct {
	node     queue.Node[*waiter]
	ctx      context.Context // the request's: one that has ended is not served (serveLocked)
	weight   int
	deadline time.Time   // by the exact clock: a coarse one could time out early
	timer    clock.Timer // nil until armed, or if the clock's AfterFunc panicked (deliverQueued); w's goroutine's own
	ready    chan struct{}
	permit   Permit
	err      error
}

// TryAcquire issues n permits if they are free now and no one is waiting
// ahead; it never waits. ctx is read only for the capability. n must be
// >= 1. A refusal is a *RejectedError (ErrAtCapacity, ErrDraining or
// ErrCapabilityRequired) and changes nothing.
func (b *Bulkhead) TryAcquire(ctx context.Context, n int) (Permit, error) {
	return b.try(ctx, n, false) // an n below 1 goes on to acquire, which names TryAcquire
}

// Acquire issues n permits, waiting in the queue (WithQueue) while none are
// free; without a queue it is TryAcquire. It fails with ErrQueueSaturated
// when the queue is full, ErrQueueTimeout after the queue's maximum wait,
// ErrDraining while a lowered limit drains (whatever n), ErrAtCapacity when
// n exceeds the limit (it could never be issued), or ctx's error when ctx ends first: a
// request whose context has ended when its turn comes never gets a permit,
// which goes to the next in line (a context whose Done is closed while its
// Err is nil has ended too, once its request waits: the error matches
// context.Canceled; a free permit is issued on Err alone, since asking a
// standard context for Done makes its channel, an allocation a request
// that never waits would pay for a context that breaks the contract). A
// request that fails holds nothing. With a queue, ctx is waited on and must not be
// nil (a *ConfigError).
func (b *Bulkhead) Acquire(ctx context.Context, n int) (Permit, error) {
	if n < 1 {
		return Permit{}, invalidWeight("Acquire n", n)
	}
	wait := b.maxDepth > 0
	if wait {
		if ctx == nil {
			return Permit{}, &ConfigError{"Acquire ctx", nil, "must not be nil"}
		}
		if ctx.Err() != nil {
			return b.acquire(ctx, n, wait) // fails with ctx's error
		}
	}
	return b.try(ctx, n, wait)
}

// invalidWeight is the error of a weight n below 1 given as option, the
// method and its argument ("TryAcquire n"). It is checked before anything
// else, the capability included: the call is a bug to fix, and its message
// names the method the caller wrote, not the path inside that found it.
func invalidWeight(option string, n int) error {
	return &ConfigError{option, n, "must be >= 1"}
}

// try is the hot path, written out in line because it is measured as such:
// a bulkhead with no capability gate and no observer, with n permits free
// and no one waiting. One compare-and-swap on the state word admits and
// issues the ID (state.go); anything else goes to acquire, under the mutex.
// The common case calls nothing, so that the compiler keeps everything in
// registers: ctx is checked by Acquire, a lost swap is retried by
// tryContended. (A Permit is four words and comes back in registers; a
// fast path that returned it with a bool, five words, measured 30% slower,
// and so did reading the stamp after the swap.)
func (b *Bulkhead) try(ctx context.Context, n int, wait bool) (Permit, error) {
	if !b.plain || n < 1 {
		return b.acquire(ctx, n, wait)
	}
	h := b.hot
	s := h.state.Load()
	l := h.limit.Load() // after s: see state.go on SetLimit
	if !fastFits(s, l, n) {
		return b.acquire(ctx, n, wait)
	}
	// The stamp after the fit: a refusal reads no clock, which would keep
	// the coarse clock's refresh timer of a full bulkhead running.
	var stamp int64
	if c := b.coarse; c != nil {
		stamp = c.Offset()
	} else {
		stamp = b.exactStamp()
	}
	hi := h.hi.Load() // after s: see state.go on the wrap
	if h.state.CompareAndSwap(s, s+seqOne+uint64(n)) {
		return b.fastPermit(s, hi, l, n, stamp), nil
	}
	return b.tryContended(ctx, n, wait)
}

// tryContended is try after a lost swap: the word changed since try read
// it, by another acquire (usually), a release, or lock() setting the slow
// flag. Unless the flag is now set, it waits a little (backoff) and tries
// again: letting the winner's core run alone for a while, instead of
// trading the line back and forth on every operation, is what makes the
// parallel case fast (state.go). Lock-free, not wait-free: one acquire may
// lose again and again while others succeed.
//
// Each try reads the clock again, between its reading of the state word
// and its swap, as try does: a swap that succeeds finds the word as it read
// it, so every permit with a smaller ID was issued, and stamped, before
// that reading, and IssuedAt follows the IDs (the clocks never go back to
// the bulkhead: coarse, advance). The reading taken before a lost swap may
// be older than a permit issued since, with a smaller ID.
func (b *Bulkhead) tryContended(ctx context.Context, n int, wait bool) (Permit, error) {
	h := b.hot
	for {
		if h.state.Load()&slowFlag != 0 {
			return b.acquire(ctx, n, wait) // the mutex decides: no wait for it
		}
		backoff()
		s := h.state.Load()
		l := h.limit.Load()
		if !fastFits(s, l, n) {
			return b.acquire(ctx, n, wait)
		}
		var stamp int64
		if c := b.coarse; c != nil {
			stamp = c.Offset()
		} else {
			stamp = b.exactStamp()
		}
		hi := h.hi.Load()
		if h.state.CompareAndSwap(s, s+seqOne+uint64(n)) {
			return b.fastPermit(s, hi, l, n, stamp), nil
		}
	}
}

// fastFits reports whether a fast acquire of n may swap state word s, with
// limit l in force: no slow flag, n fits, and the sequence is not near its
// wrap (state.go).
func fastFits(s uint64, l int64, n int) bool {
	return s&slowFlag == 0 && groupsem.Fits(int(l), int(s&usedMask), n) && uint32(s>>32) < fastSeqMax
}

// fastPermit is the permit a fast acquire issued by swapping state word s.
func (b *Bulkhead) fastPermit(s, hi uint64, l int64, n int, stamp int64) Permit {
	return Permit{b: b, id: hi<<32 | uint64(uint32(s>>32)+1), issued: stamp, meta: uint64(l)<<32 | uint64(n)}
}

// acquire is the general path: capability, arguments, events, refusals and
// waiting.
func (b *Bulkhead) acquire(ctx context.Context, n int, wait bool) (Permit, error) {
	if n < 1 {
		// Acquire checks its own n: this one is TryAcquire's, left to here
		// so that TryAcquire stays small enough to inline.
		return Permit{}, invalidWeight("TryAcquire n", n)
	}
	if !b.admits(ctx) {
		return Permit{}, b.refuseCapability()
	}
	if wait {
		if err := ctx.Err(); err != nil {
			b.refuseEnded(err)
			return Permit{}, err
		}
	} else if !b.observed {
		if rej := b.refuseFull(n); rej != nil {
			return Permit{}, rej
		}
	}
	var es *events
	if b.observed {
		es = new(events)
	}
	b.lockNow(nil) // nothing is asked for if Now exits the goroutine
	// Serve (or time out) the waiters first: they are ahead.
	blocked := b.dispatchLocked(es)
	// Under the lock and after the waiters' events, so that logged events
	// are in time order.
	stamp := b.stamp()
	if !blocked && b.sem.Fits(n) {
		p := b.issueLocked(n, stamp, es)
		b.unlock()
		b.deliverIssued(es, p)
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
		w := &waiter{ctx: ctx, weight: n, deadline: b.nowLocked().Add(b.maxWait), ready: make(chan struct{})}
		w.node.Value = w
		b.waiters.PushBack(&w.node)
		b.event(es, EventAtCapacity, stamp, 0, "")
		b.event(es, EventRequestQueued, stamp, 0, "")
		b.unlock()
		b.deliverQueued(es, w)
		return b.wait(ctx, w)
	}
	b.event(es, EventRequestRejected, stamp, 0, rej.Err.code)
	b.unlock()
	b.deliver(es)
	return Permit{}, rej
}

// refuseFull refuses n permits without the mutex, or returns nil to leave
// the decision to it: when the state word shows no slow flag (so nobody
// waits and no drain goes on, state.go) and too few permits free, the same
// word read again after the limit shows that limit and that count were in
// force together (SetLimit sets the flag before it stores the limit), and
// the refusal is exact. It is what a refusal costs under overload: three
// loads of one cache line, no write to it, no clock, and the error, which
// is the last one's while the numbers stay the same (under overload they
// do: the same limit, the same count, the same weight), so that a run of
// refusals allocates nothing and writes nothing shared.
func (b *Bulkhead) refuseFull(n int) *RejectedError {
	h := b.hot
	s := h.state.Load()
	l := int(h.limit.Load())
	used := int(s & usedMask)
	if s&slowFlag != 0 || groupsem.Fits(l, used, n) || h.state.Load() != s {
		return nil
	}
	if r := b.refused.Load(); r != nil && r.Limit == l && r.InFlight == used && r.Weight == n {
		return r
	}
	r := &RejectedError{Err: ErrAtCapacity, Limit: l, InFlight: used, Weight: n, MaxDepth: b.maxDepth, MaxWait: b.maxWait}
	b.refused.Store(r)
	return r
}

// refuseCapability refuses an acquire without the required capability. It
// changes no state: no permit, no queue place, no ID.
func (b *Bulkhead) refuseCapability() error {
	var es *events
	if b.observed {
		es = new(events)
	}
	b.lockNow(nil)
	rej := &RejectedError{
		Err: ErrCapabilityRequired, Capability: b.capability, Limit: b.sem.Limit(), InFlight: b.sem.Used(),
		QueueDepth: b.waiters.Len(), MaxDepth: b.maxDepth, MaxWait: b.maxWait,
	}
	b.event(es, EventRequestRejected, b.stamp(), 0, rej.Err.code)
	b.unlock()
	b.deliver(es)
	return rej
}

// refuseEnded records the refusal of a request whose context had ended
// before it could wait, err being the context's error. It changes no
// state, but the request failed: observers that count requests must see it,
// as they see a waiter whose context ends.
func (b *Bulkhead) refuseEnded(err error) {
	if b.observed {
		b.recordRejection(0, err)
	}
}

// recordRejection records the rejection of a request that failed with err,
// its context's error (or ErrGoexit), and gave back permit id (0 for
// none). The detail is read before the mutex is taken: the context's error
// is the caller's code, and an Error that exits the goroutine
// (runtime.Goexit, which detailOf cannot recover) must not leave the mutex
// held. The request has failed all the same, and observers that count
// requests must see it: as the goroutine exits, the rejection is recorded
// with ErrGoexit's code, as a waiter's that leaves the queue is
// (detailLocked), and the listener does not hear it (the event log keeps
// it).
func (b *Bulkhead) recordRejection(id uint64, err error) {
	detail := ErrGoexit.code
	returned := false
	defer func() {
		es := new(events)
		b.lockNow(nil)
		b.event(es, EventRequestRejected, b.stamp(), id, detail)
		b.unlock()
		if returned {
			b.deliver(es)
		}
	}()
	detail = detailOf(err)
	returned = true
}

// wait waits for w's turn, its maximum wait, or ctx.
func (b *Bulkhead) wait(ctx context.Context, w *waiter) (Permit, error) {
	done := readCtx(b, w, ctx.Done)
	select {
	case <-w.ready:
		b.stopTimer(w)
		if w.err != nil {
			return Permit{}, w.err
		}
		// Granted, but ctx may have ended first: when both channels are
		// ready, select picks either, so a request that gave up before any
		// permit was free would get one (golang/go#63615). A permit issued
		// to a request whose context has ended goes to the next in line.
		select {
		case <-done:
			err := doneErr(b, w, ctx)
			b.giveBack(w.permit, err)
			return Permit{}, err
		default:
			return w.permit, nil
		}
	case <-done:
	}
	b.stopTimer(w)
	err := doneErr(b, w, ctx)
	if b.leave(w, err) {
		return Permit{}, err
	}
	// Decided just as ctx ended. A permit issued to a request that has given
	// up goes back, to the next in line, so that it is never lost.
	if w.err != nil {
		return Permit{}, w.err
	}
	b.giveBack(w.permit, err)
	return Permit{}, err
}

// errDoneNilErr is the error of a request whose context's Done is closed
// while its Err reports nil.
var errDoneNilErr = fmt.Errorf("bulkhead: the context's Done is closed but its Err is nil: %w", context.Canceled)

// doneErr returns the error of w's request, whose context's Done is closed.
// A context whose Err is nil then breaks context.Context's contract: taken
// at its word, the request would fail with a nil error, which its
// rejection's event cannot name (under the mutex) and its caller would take
// for a grant of the zero Permit. Its Done says it has ended: it fails as
// a cancelled one.
func doneErr(b *Bulkhead, w *waiter, ctx context.Context) error {
	if err := readCtx(b, w, ctx.Err); err != nil {
		return err
	}
	return errDoneNilErr
}

// readCtx calls f, a method of the context of w's request, as wait does
// before w has left the queue or given back the permit issued to it. The
// context is the caller's code: if f panics (or exits the goroutine), w
// leaves the queue, or its permit goes back, on the way up, so that no one
// holds its place or its permit for good. The panic then goes on up to
// Acquire's caller.
func readCtx[T any](b *Bulkhead, w *waiter, f func() T) T {
	returned := false
	defer func() {
		if !returned {
			b.unwind(w, recover())
		}
	}()
	v := f()
	returned = true
	return v
}

// unwind ends w for an acquire whose context panicked with r as its
// goroutine read it in wait, or (r nil) exited the goroutine, and then
// panics again with r.
func (b *Bulkhead) unwind(w *waiter, r any) {
	err := error(ErrGoexit)
	if r != nil {
		err = fmt.Errorf("bulkhead: the context panicked: %v", r)
		// From a deferred call: ending w tells the listener, which may
		// exit the goroutine (runtime.Goexit), and that would drop r for
		// good, Acquire's caller never seeing it. Raised as the goroutine
		// exits, r goes on up; the exit goes on once the caller recovers
		// it.
		defer panic(r)
	}
	// The timer first: a Stop that exits the goroutine ends w itself
	// (stopTimer), and w ended here before it would give its permit back
	// a second time.
	b.stopTimer(w)
	if !b.leave(w, err) && w.err == nil {
		b.giveBack(w.permit, err)
	}
}

// stopTimer stops w's timer, if armed, once w has left the queue or is
// about to, on the goroutine of w's request (its only user), holding
// nothing: a clock given to WithClock is user code (read). A Stop that
// panics counts as done: a timer that fires after all finds its waiter gone
// and does nothing. One that exits the goroutine ends the request as a
// context that does (unwind): w leaves the queue, or its permit goes back.
func (b *Bulkhead) stopTimer(w *waiter) {
	t := w.timer
	if t == nil {
		return
	}
	w.timer = nil // stopped once, even if Stop exits the goroutine (unwind)
	if b.realClk {
		t.Stop()
		return
	}
	returned := false
	defer func() {
		if !returned && recover() == nil {
			b.unwind(w, nil)
		}
	}()
	t.Stop()
	returned = true
}

// leave takes w, whose request gives up with err, out of the queue, and
// reports whether it was still there: if not, it was decided meanwhile,
// and w.err says how; a permit issued to it is then the caller's to give
// back, unless Now exits the goroutine (runtime.Goexit) as leave reads it:
// the caller never sees that w was granted, so leave gives the permit back
// itself, on the way out.
func (b *Bulkhead) leave(w *waiter, err error) bool {
	var es *events
	if b.observed {
		es = new(events)
	}
	left := false
	leave := func() {
		if w.node.InList() {
			b.giveUpLocked(w, err, b.stamp(), es)
			b.dispatchLocked(es) // a heavy head leaving may let lighter ones in
			left = true
		}
	}
	stamped := false
	defer func() {
		// w was decided under the mutex, which lockNow's finish took and
		// let go of before this runs: w.err is settled.
		if !stamped && !left && w.err == nil {
			b.giveBack(w.permit, err)
		}
	}()
	b.lockNow(leave) // w leaves even if Now exits the goroutine
	stamped = true
	leave()
	b.unlock()
	if left {
		b.deliver(es)
	}
	return left
}

// giveUpLocked takes w, whose request gives up with err, out of the queue.
func (b *Bulkhead) giveUpLocked(w *waiter, err error, stamp int64, es *events) {
	b.waiters.Remove(&w.node)
	var detail string
	if es != nil { // detailOf reads err, the context's: only for an observer
		detail = b.detailLocked(w, err, stamp, es)
	}
	w.err = err
	close(w.ready)
	if es != nil {
		b.event(es, EventRequestRejected, stamp, 0, detail)
	}
}

// detailLocked is detailOf(err) for w, which giveUpLocked has taken out of
// the queue, under the mutex, on the goroutine of w's request (leave) or
// of whoever serves the queue (serveLocked). err is the context's error,
// the caller's code: an Error that exits the goroutine (runtime.Goexit)
// cannot be stopped, and must not leave the mutex held. w then fails with
// ErrGoexit, as when its context's Err exits (endedLocked), the rest of
// the queue is served (w leaving may let lighter waiters behind it in) and
// the mutex released as the goroutine exits (the listener does not hear
// es's events; the event log keeps them). giveUpLocked's callers take the
// mutex with lockNow or lock, and nothing above them releases it in a
// deferred call, which would release it a second time.
func (b *Bulkhead) detailLocked(w *waiter, err error, stamp int64, es *events) string {
	returned := false
	defer func() {
		if returned {
			return
		}
		w.err = ErrGoexit
		close(w.ready)
		b.event(es, EventRequestRejected, stamp, 0, ErrGoexit.code)
		b.dispatchLocked(es)
		b.unlock()
	}()
	detail := detailOf(err)
	returned = true
	return detail
}

// giveBack releases a permit issued to a waiter that has given up with err
// (its context's error, or ErrGoexit); the release serves the next in
// line. The request failed, so the log records its rejection, as for a
// waiter that gave up before its turn, but with the permit's ID: the
// permit's acquire was recorded too, and observers that count requests
// must tell this rejection from one of a request that never had a permit.
func (b *Bulkhead) giveBack(p Permit, err error) {
	// Deferred, so that the permit comes back even if a listener told of
	// the rejection exits the goroutine (runtime.Goexit).
	defer func() {
		if err := b.Release(p); err != nil {
			panic("bulkhead: a permit issued to a waiter was not outstanding: " + err.Error())
		}
	}()
	if b.observed {
		b.recordRejection(p.id, err) // the deferred release still runs if Now exits the goroutine
	}
}

// detailOf is the detail of the rejection of a request that gave up with
// err: its stable code for one of the bulkhead's errors (ErrGoexit), else
// its text (a context's error). A request whose context's Done closed with
// a nil Err fails as a cancelled one (doneErr), and its detail is
// context.Canceled's text: observers that count requests by their
// context's error (metrics/prom, metrics/otel) count it as cancelled, not
// under a text of its own.
//
// It mostly runs under the mutex, and a context's error is the caller's
// code: an Error that panics (a nil pointer's, say) would leave the mutex
// held, and every later call blocked. Its detail is then errTextPanicked.
// One that exits the goroutine cannot be recovered: refuseEnded and
// giveBack read the detail before they take the mutex (recordRejection),
// and a waiter leaving the queue, which must leave, fails with ErrGoexit
// as the goroutine exits, releasing the mutex (detailLocked).
func detailOf(err error) (detail string) {
	if e, ok := err.(*Error); ok {
		return e.code
	}
	if err == errDoneNilErr {
		return context.Canceled.Error()
	}
	defer func() {
		if recover() != nil {
			detail = errTextPanicked
		}
	}()
	return err.Error()
}

// errTextPanicked is the detail of a rejection whose context's error
// panicked in its Error method.
const errTextPanicked = "bulkhead: the context's error panicked in Error"

// deliverIssued delivers es, the events of issuing p, on the goroutine of
// the acquire that p is for. A listener that exits that goroutine
// (runtime.Goexit, which notify cannot recover) ends the acquire before p
// reaches its caller: p is released, so that no one holds it for good.
func (b *Bulkhead) deliverIssued(es *events, p Permit) {
	delivered := false
	defer func() {
		if !delivered {
			_ = b.Release(p)
		}
	}()
	b.deliver(es)
	delivered = true
}

// deliverQueued arms w's maximum-wait timer and delivers es, the events of
// queueing w, on the goroutine of the acquire that w is for. The timer is
// armed holding nothing, as the clock is read (read): if AfterFunc panics,
// w has no timer, and times out when a later call finds it past its
// maximum wait (expireLocked). An AfterFunc or a listener that exits the
// goroutine (runtime.Goexit) ends the acquire before it waits: w leaves the
// queue, or, if it was granted meanwhile, its permit is released, so that
// no one holds it for good.
func (b *Bulkhead) deliverQueued(es *events, w *waiter) {
	delivered := false
	defer func() {
		if !delivered {
			b.abandon(w)
		}
	}()
	w.timer = b.afterFunc(b.maxWait, func() { b.expire(w) })
	b.deliver(es)
	delivered = true
}

// afterFunc arms a timer of the clock, or returns nil if its AfterFunc
// panics.
func (b *Bulkhead) afterFunc(d time.Duration, f func()) (t clock.Timer) {
	if b.realClk {
		return b.clk.AfterFunc(d, f)
	}
	defer func() {
		if recover() != nil {
			t = nil
		}
	}()
	return b.clk.AfterFunc(d, f)
}

// abandon ends w for an acquire whose goroutine exited before it waited.
func (b *Bulkhead) abandon(w *waiter) {
	b.stopTimer(w) // first, as in unwind
	if !b.leave(w, ErrGoexit) && w.err == nil {
		b.giveBack(w.permit, ErrGoexit)
	}
}

// expire is w's maximum-wait timer.
func (b *Bulkhead) expire(w *waiter) {
	var es *events
	if b.observed {
		es = new(events)
	}
	timeOut := func() {
		if w.node.InList() {
			b.timeOutLocked(w, es)
		}
		b.dispatchLocked(es) // w leaving may let lighter waiters behind it in
	}
	b.lockNow(timeOut) // w times out even if Now exits the goroutine
	timeOut()
	b.unlock()
	b.deliver(es)
}

func (b *Bulkhead) timeOutLocked(w *waiter, es *events) {
	b.waiters.Remove(&w.node)
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
	now := b.nowLocked()
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
	blocked = b.serveLocked(es)
	b.servedAt = b.sem.Used()
	return blocked
}

func (b *Bulkhead) serveLocked(es *events) (blocked bool) {
	if b.waiters.Len() == 0 {
		return false
	}
	b.expireLocked(es)
	stamp := b.stamp()
	for f := b.waiters.Front(); f != nil; {
		w := f.Value
		f = f.Next()
		// A request whose context has ended gives up its place now, not
		// when its goroutine next runs (leave): a permit issued to it
		// would stay out until then, the next in line waiting for it, and
		// a heavy one would hold up those behind it.
		if err := b.endedLocked(w, stamp, es); err != nil {
			b.giveUpLocked(w, err, stamp, es)
			continue
		}
		if w.weight > b.sem.Limit() {
			continue
		}
		if !b.sem.Fits(w.weight) {
			return true
		}
		b.waiters.Remove(&w.node)
		w.permit = b.issueLocked(w.weight, stamp, es)
		close(w.ready)
	}
	return false
}

// endedLocked returns the error of w's context, read under the mutex (lock)
// by serveLocked. A context is the caller's code: a panic going on up from
// here would leave the mutex held (read), on the goroutine of whoever
// serves the queue. So a panic reads as a context that has not ended; the
// waiter's own goroutine, holding nothing, looks at its context again as it
// wakes. A context that exits the goroutine (runtime.Goexit) cannot be
// stopped: w fails with ErrGoexit, so that no later server reads its
// context again, the rest of the queue is served, and the mutex released
// as the goroutine exits (the listener does not hear es's events; the
// event log keeps them).
func (b *Bulkhead) endedLocked(w *waiter, stamp int64, es *events) (err error) {
	returned := false
	defer func() {
		if returned {
			return
		}
		if recover() != nil {
			err = nil
			return
		}
		b.giveUpLocked(w, ErrGoexit, stamp, es)
		b.dispatchLocked(es)
		b.unlock()
	}()
	err = w.ctx.Err()
	returned = true
	return err
}

// issueLocked takes n permits, which fit.
func (b *Bulkhead) issueLocked(n int, stamp int64, es *events) Permit {
	p := Permit{b: b, id: b.issueIDLocked(n), issued: stamp, meta: uint64(b.sem.Limit())<<32 | uint64(n)}
	if es != nil {
		b.event(es, EventPermitAcquired, stamp, p.id, "")
	}
	return p
}

// Release gives back a permit. It fails with ErrUnknownPermit (a
// *PermitError) for a permit that is not outstanding: released before, from
// another bulkhead, or the zero Permit.
//
// Its fast path is one compare-and-swap on the permit's release frontier,
// which accepts each issued permit exactly once, and one add to the state
// word; the mutex is taken only if the frontier is not just below the
// permit (the permit was converted or is not outstanding, or an older permit
// of its residue is still out and gets converted) or the slow flag asks for
// it (state.go).
func (b *Bulkhead) Release(p Permit) error {
	if p.b == b && !b.observed {
		if b.hot.front[p.id%slots].CompareAndSwap(p.id-slots, p.id) { // b.frontier, in line
			if b.hot.state.Add(-uint64(uint32(p.meta)))&slowFlag != 0 {
				b.settle()
			}
			return nil
		}
	}
	return b.releaseSlow(p)
}

// releaseSlow is Release under the mutex: converting, converted, not
// outstanding, or observed (events to record).
func (b *Bulkhead) releaseSlow(p Permit) error {
	if p.b != b {
		return &PermitError{p.id}
	}
	if !b.observed {
		// Only the permit's outstanding state needs the mutex: with no
		// events to record, the count goes back as on the fast path, and
		// waiters or a drain (the slow flag) are left to settle.
		b.mu.Lock()
		ok := b.releaseIDLocked(p.id)
		b.mu.Unlock()
		if !ok {
			return &PermitError{p.id}
		}
		if b.hot.state.Add(-uint64(uint32(p.meta)))&slowFlag != 0 {
			b.settle()
		}
		return nil
	}
	es := new(events) // observed
	ok := false
	release := func() {
		var drained bool
		if ok, drained = b.releaseLocked(p); !ok {
			return
		}
		stamp := b.stamp()
		b.event(es, EventPermitReleased, stamp, p.id, "")
		if drained {
			b.event(es, EventDrainComplete, stamp, 0, "")
		}
		b.dispatchLocked(es)
	}
	b.lockNow(release) // p comes back even if Now exits the goroutine
	release()
	b.unlock()
	if !ok {
		return &PermitError{p.id}
	}
	b.deliver(es)
	return nil
}

// settle does, under the mutex, what a fast release that found the slow flag
// leaves to it: serve the waiters its permits made room for; lock ends a
// drain it completed.
func (b *Bulkhead) settle() {
	b.lockNow(b.settleLocked) // waiters are served even if Now exits the goroutine
	b.settleLocked()
	b.unlock()
}

func (b *Bulkhead) settleLocked() { b.dispatchLocked(nil) }

// event records an event if anyone observes them.
func (b *Bulkhead) event(es *events, code string, stamp int64, id uint64, detail string) {
	if es != nil {
		b.record(es, Event{Code: code, Time: b.at(stamp), PermitID: id, Detail: detail})
	}
}
