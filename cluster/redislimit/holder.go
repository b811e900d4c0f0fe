package redislimit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Holder is one process's lease holder: it leases permits from Redis in
// blocks, hands them to its executors' tasks through Limiters (Global,
// Groups), and runs the process's one renewal loop. It is safe for
// concurrent use. Create it with New; Close it after the executors that use
// it.
type Holder struct {
	rdb redis.UniversalClient
	cfg config
	id  string

	mu       sync.Mutex
	scopes   []*Limiter
	queue    []*keyState // keys the refiller should serve
	down     bool
	fails    int // calls to Redis failed in a row
	lastErr  error
	failedAt time.Time
	closed   bool
	leaseSeq uint64
	nonce    string // this process's, in lease ids (New)
	leases   int    // live leases, all keys

	// expired are the leases lost by their timer once Close began: Close
	// gives them back.
	expired []*lease

	// closeDone is closed when the close that the first Close began has
	// ended; closeErr is its error then.
	closeDone chan struct{}
	closeErr  error

	work  chan struct{} // wakes the refiller
	stop  chan struct{}
	wg    sync.WaitGroup // the refiller, the renewal loop, and give-backs of expired leases (expire)
	calls inflight       // the calls to Redis running, also those abandoned at the op timeout
	// subDone is closed when the contention subscriber has returned: Close
	// waits for it as for an abandoned call (finishClose), since a
	// connection it makes to a Redis that does not answer waits in the
	// client for as long as the client reads.
	subDone chan struct{}

	// renewHook, when set (tests), is called before each renewal round; an
	// error fails the round as if Redis were unreachable.
	renewHook func() error
	// replyHook, when set (tests), is called when a refill's reply has
	// arrived, before it is used: a slow round trip.
	replyHook func() error
	// releaseHook, when set (tests), is called before a give-back outside
	// the renewal round; an error fails it as if Redis were unreachable.
	releaseHook func() error
	// unwaitHook and refillHook, when set (tests), are called on the
	// call's own goroutine before the refiller sends a pass that ends
	// waiting records (unwaitHook) or asks for blocks (refillHook); an
	// error fails the pass as if Redis were unreachable. One that blocks
	// holds the pass up on its way to Redis: past the op timeout, the
	// holder stops waiting for it, and it reaches Redis late.
	unwaitHook, refillHook func() error
	// callWaitHook, when set (tests, before the holder makes any call), is
	// called by call before it waits, with the call's context and a
	// function that reports whether the reply is there.
	callWaitHook func(ctx context.Context, replied func() bool)
	// nameHook, when set (tests), is called as a key over maxKeyName
	// bytes is named (Limiter.nameOf).
	nameHook func()

	st counters
}

type counters struct {
	roundTrips, acquired, fallbacks, rejected, refills, refillsDenied  atomic.Uint64
	returned, renewals, leasesLost, tasksCancelled, outages, keyFailed atomic.Uint64
}

// New returns a Holder leasing from the Redis rdb reaches, and starts its
// renewal loop, its refiller and its contention subscriber (three
// goroutines, whatever the number of keys and tasks). An invalid option returns an *OptionError naming it.
func New(rdb redis.UniversalClient, opts ...Option) (*Holder, error) {
	if rdb == nil {
		return nil, &OptionError{"New", "nil", "a Redis client is required"}
	}
	cfg := defaults()
	for _, o := range opts {
		if o == nil {
			return nil, &OptionError{"New", "nil Option", "options must not be nil"}
		}
		if err := o.apply(&cfg); err != nil {
			return nil, err
		}
	}
	if err := cfg.finish(); err != nil {
		return nil, err
	}
	if cfg.holderID == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		cfg.holderID = hex.EncodeToString(b[:])
	}
	// Lease ids carry a nonce of this process, so that a process restarted
	// with the same holder id never reuses a lease id its predecessor may
	// still hold (the sequence starts again at 1).
	var nb [4]byte
	_, _ = rand.Read(nb[:])
	h := &Holder{rdb: rdb, cfg: cfg, id: cfg.holderID, nonce: hex.EncodeToString(nb[:]) + ".",
		work: make(chan struct{}, 1), stop: make(chan struct{}), closeDone: make(chan struct{}), subDone: make(chan struct{})}
	h.wg.Add(2)
	go h.refiller()
	go h.renewer()
	go h.subscriber()
	return h, nil
}

// ID returns the holder's id in Redis.
func (h *Holder) ID() string { return h.id }

// Close stops the holder's goroutines, gives every lease back to Redis
// (also those it may have been granted without hearing the reply) and ends
// its waiting records (best effort, in round trips of at most 128 calls,
// each bounded by the op timeout, up to the first that fails: a lease not
// given back keeps its slots from every holder until it expires in Redis,
// at most the lease TTL later). Then it waits for the calls to Redis that
// the holder stopped waiting for at the op timeout and the client still
// runs (it ends them at its own timeouts without ContextTimeoutEnabled),
// and for the contention subscriber's connection being made, if any, for
// at most one more op timeout, so that nothing of the holder talks to
// Redis once it has returned, unless the client runs a call longer. Tasks
// still running on its permits have their context cancelled with a
// *LeaseLostError wrapping ErrClosed; later TryAcquires refuse with
// ErrClosed, and the executors of tasks waiting for a block are told to
// ask again, so that those are refused too. The leases it gives back do
// not count as lost (Stats.LeasesLost, TasksCancelled, EventLeaseLost),
// and Stats.Mode reads ModeClosed from its start. The
// fallbacks and refusals the listener has not been told of yet are
// reported (EventFallback, EventRejected) before Close returns. Close the
// executors first. It is idempotent: a later call waits for the close the
// first began, and returns its error.
//
// Called from a listener (WithListener), of this holder or another, Close
// begins the close and returns nil at once, without waiting for it: the
// holder's goroutine that called the listener waits for it to return, and
// the close waits for that goroutine. The close goes on on a goroutine of
// its own, which ends with it; a later Close from outside a listener waits
// for it and returns its error.
//
// A listener must not wait for a Close called on any other goroutine (one
// it starts, or one it hands the work to, or anything that waits for
// Close): that Close is not called from the listener, as far as Close can
// tell (it finds the listener on its own goroutine's stack only), so it
// waits for the listener to return, and the listener for it, for ever. The
// close cannot do without that wait: its goroutines still have work to do
// once the listener returns (a give-back, a notification), and the
// fallbacks and refusals not reported yet are reported before Close
// returns. A listener that wants the holder closed calls Close itself, or
// starts a goroutine that calls it and returns without waiting for it.
func (h *Holder) Close() error {
	fromListener := calledFromListener()
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		if fromListener {
			return nil
		}
		<-h.closeDone
		return h.closeErr
	}
	h.closed = true
	// Under the lock, with closed: whoever sees the holder closed (Stats)
	// sees its goroutines told to stop.
	close(h.stop)
	h.mu.Unlock()
	if fromListener {
		go h.finishClose()
		return nil
	}
	h.finishClose()
	return h.closeErr
}

// finishClose is the close that Close began: it records its error and
// marks it ended.
func (h *Holder) finishClose() {
	defer close(h.closeDone)
	h.closeErr = h.closeLeases()
	// The calls the holder stopped waiting for at the op timeout may
	// still run: their context has ended, which ends them at once in a
	// client that honours it (ContextTimeoutEnabled); one that does not
	// ends them at its own timeouts. Waited for, so that nothing of the
	// holder talks to Redis once Close has returned, but for one op
	// timeout at most: a client that never times out (ReadTimeout -1)
	// must not hold Close for ever. So is the subscriber: closing its
	// subscription ends its wait for a notice at once, but not a
	// connection it is making, whose set-up waits for Redis's reply as
	// long as the client reads.
	deadline := time.Now().Add(h.cfg.opTimeout)
	h.calls.wait(h.cfg.opTimeout)
	t := time.NewTimer(max(time.Until(deadline), 0))
	defer t.Stop()
	select {
	case <-h.subDone:
	case <-t.C:
	}
}

// closeLeases waits for the refiller and the renewal loop (and the
// give-backs of expired leases), then ends what they left: the leases, the
// waiting records, the events not reported. A notice the subscriber hears
// meanwhile or later changes nothing that is given back.
func (h *Holder) closeLeases() error {
	h.wg.Wait()

	h.mu.Lock()
	var lost []lostLease
	var evs []*Event // the fallbacks and refusals the refiller did not report
	now := time.Now()
	rel := h.expired
	var unwaits []*keyState
	var drops []*scriptCall
	var waits []*keyState // keys whose tasks wait for a block
	for _, l := range h.scopes {
		for _, ks := range l.keys {
			evs = h.reportLocked(ks, now, evs)
			if ks.demand > 0 || ks.waiting || ks.probing || ks.served {
				waits = append(waits, ks)
			}
			for _, o := range ks.orphans {
				drops = append(drops, h.dropCall(ks, o))
			}
			ks.orphans = nil
			if ks.recorded || ks.unwait {
				// Redis counts this holder as waiting: a closed holder
				// waits for nothing, and its record would keep the
				// others' caps split with it until it expires.
				ks.recorded, ks.unwait = false, false
				unwaits = append(unwaits, ks)
			}
			for len(ks.leases) > 0 {
				le := ks.leases[0]
				rel = append(rel, le)
				// Its free permits go back unused, as a renewal round's
				// do; those of its running tasks do not count.
				h.st.returned.Add(uint64(len(le.free)))
				// Given back, not lost: its tasks are cancelled, but
				// neither the lost leases' counters nor a listener
				// count it.
				l, _ := h.endLocked(le, "holder closed", ErrClosed)
				l.ev = nil
				lost = append(lost, l)
			}
		}
	}
	h.mu.Unlock()
	h.emit(evs...)
	h.cancelAll(lost)
	// A task waiting for a block would wait for ever: nothing asks Redis
	// for it any more, and no notice comes. Its executor asks again, and
	// is refused with ErrClosed.
	for _, ks := range waits {
		if notify := ks.l.notify; notify != nil {
			contain(func() { notify(ks.key) })
		}
	}
	if len(rel) == 0 && len(unwaits) == 0 && len(drops) == 0 {
		return nil
	}
	calls := drops
	for _, le := range rel {
		calls = append(calls, h.releaseCall(shrink{le, nil, 0}))
	}
	for _, ks := range unwaits {
		calls = append(calls, h.unwaitCall(ks))
	}
	return h.sendPasses(calls)
}

// sendPasses sends calls in round trips of at most maxPass calls each, one
// after another, each bounded by the op timeout: one round trip for all
// the leases of a holder of many keys would take longer the more it holds,
// until it ran past the op timeout and gave back none of them. It stops at
// the first round trip Redis did not answer (failed): the next would wait
// its op timeout for nothing. It returns the first error that says Redis
// failed, else the first other one.
func (h *Holder) sendPasses(calls []*scriptCall) error {
	var first error
	for len(calls) > 0 {
		n := min(len(calls), maxPass)
		pass := calls[:n]
		calls = calls[n:]
		_, err := call(h, func(ctx context.Context) (struct{}, error) { return struct{}{}, h.runScripts(ctx, pass, nil) })
		switch {
		case failed(err):
			return err
		case first == nil:
			first = err
		}
	}
	return first
}

// Stats returns the holder's counters.
func (h *Holder) Stats() Stats {
	h.mu.Lock()
	s := Stats{Mode: ModeUp, Policy: h.cfg.policy, Leases: h.leases}
	switch {
	case h.closed:
		s.Mode = ModeClosed
	case h.down:
		s.Mode = ModeDown
	}
	for _, l := range h.scopes {
		for _, ks := range l.keys {
			for _, le := range ks.leases {
				s.PermitsLeased += len(le.slots)
				s.PermitsInUse += len(le.slots) - len(le.free)
			}
		}
	}
	h.mu.Unlock()
	s.RoundTrips = h.st.roundTrips.Load()
	s.Acquired = h.st.acquired.Load()
	s.Fallbacks = h.st.fallbacks.Load()
	s.Rejected = h.st.rejected.Load()
	s.Refills = h.st.refills.Load()
	s.RefillsDenied = h.st.refillsDenied.Load()
	s.Returned = h.st.returned.Load()
	s.Renewals = h.st.renewals.Load()
	s.LeasesLost = h.st.leasesLost.Load()
	s.TasksCancelled = h.st.tasksCancelled.Load()
	s.Outages = h.st.outages.Load()
	s.KeyFailed = h.st.keyFailed.Load()
	return s
}

// downAfter is how many calls to Redis in a row must fail for the holder to
// be down: one lost reply or timeout on a loaded machine is not an outage.
const downAfter = 3

// failLocked records a failed call to Redis; it returns the event to emit
// when this is a transition to ModeDown (after downAfter failures in a row).
func (h *Holder) failLocked(err error) *Event {
	h.lastErr, h.failedAt = err, time.Now()
	h.fails++
	if h.down || h.fails < downAfter {
		return nil
	}
	h.down = true
	h.st.outages.Add(1)
	// Every task waiting for a refill now meets the failure policy, at
	// once: the refiller tells their executors, with no call to Redis.
	for _, l := range h.scopes {
		for _, ks := range l.keys {
			if ks.demand > 0 {
				h.enqueueLocked(ks)
			}
		}
	}
	return &Event{Kind: EventUnavailable, Time: time.Now(), Policy: h.cfg.policy, Err: err}
}

// upLocked records a successful call; it returns the event to emit when
// this ends an outage.
func (h *Holder) upLocked() *Event {
	h.fails = 0
	if !h.down {
		return nil
	}
	h.down, h.lastErr = false, nil
	// Waiting records not ended in Redis while down (no call is made for
	// them then, and one that failed waits for this) are ended now, and
	// leases granted without a reply given back, and the permits due back
	// (giveUp: the refiller gives none back while down).
	for _, l := range h.scopes {
		for _, ks := range l.keys {
			if ks.unwait || len(ks.orphans) > 0 || ks.giveUp {
				h.enqueueLocked(ks)
			}
		}
	}
	return &Event{Kind: EventRecovered, Time: time.Now(), Policy: h.cfg.policy}
}

// emit calls the listener, outside every lock, contained (contain).
func (h *Holder) emit(es ...*Event) {
	if h.cfg.listener == nil {
		return
	}
	for _, e := range es {
		if e == nil {
			continue
		}
		contain(func() { runListener(h.cfg.listener, *e) })
	}
}

// runListener calls the listener f: Close finds it among its callers when
// the listener calls it (calledFromListener).
//
//go:noinline
func runListener(f func(Event), e Event) { f(e) }

// listenerFunc is runListener's name in a stack trace.
var listenerFunc = runtime.FuncForPC(reflect.ValueOf(runListener).Pointer()).Name()

// calledFromListener reports whether the caller's caller runs inside a
// listener (runListener is on its stack).
func calledFromListener() bool {
	pcs := make([]uintptr, 64)
	n := runtime.Callers(3, pcs)
	for n == len(pcs) { // a deep stack: its bottom may be runListener
		pcs = make([]uintptr, 2*len(pcs))
		n = runtime.Callers(3, pcs)
	}
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		if f.Function == listenerFunc {
			return true
		}
		if !more {
			return false
		}
	}
}

// contain runs f, code the holder calls but does not own (the listener, an
// executor's notify, a task's cancel), on a goroutine of its own and waits
// for it. A panic in f is recovered; a runtime.Goexit ends that goroutine,
// not the caller's: the refiller and the renewal loop are never started
// again, so a callback that ended one of them would leave the holder's
// keys unleased, or its outage unprobed, for good.
func contain(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() { _ = recover() }()
		f()
	}()
	<-done
}

// kick wakes the refiller.
func (h *Holder) kick() {
	select {
	case h.work <- struct{}{}:
	default:
	}
}

// enqueueLocked asks the refiller to serve ks.
func (h *Holder) enqueueLocked(ks *keyState) {
	if !ks.queued {
		ks.queued = true
		h.queue = append(h.queue, ks)
	}
	h.kick()
}

// unavailable is the error a FailClosed refusal carries.
func (h *Holder) unavailableLocked() error {
	if h.lastErr == nil {
		return ErrUnavailable
	}
	return errors.Join(ErrUnavailable, h.lastErr)
}
