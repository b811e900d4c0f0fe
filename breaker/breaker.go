package breaker

import (
	"math/bits"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/groupexec/groupexec/clock"
)

// CircuitBreaker stops calling a failing dependency for a while, then probes
// it before letting traffic back. It is safe for concurrent use and takes no
// lock: every decision is an atomic load, add or compare-and-swap, and it
// starts no goroutine (time only moves it when a request looks at the
// clock). Its zero value is not usable: make one with New.
type CircuitBreaker struct {
	cur    atomic.Pointer[epoch]
	probes atomic.Int64 // requests admitted in half-open whose outcome is not yet recorded

	// contended is set the first time two callers collide on the counters;
	// from then on closed epochs are created with their cells.
	contended atomic.Bool
	ncells    int

	name          string
	maxRequests   int64
	interval      time.Duration
	timeout       time.Duration
	readyToTrip   func(Counts) bool
	isSuccessful  func(error) bool // nil: err == nil
	onStateChange func(name string, from, to State)
	clock         clock.Clock
}

// New returns a closed breaker configured by s. Zero fields take their
// documented defaults. It returns an error matching ErrInvalidSettings,
// naming the field, when s.Interval or s.Timeout is negative or s.Clock
// holds a nil pointer, function, map, slice or channel.
func New(s Settings) (*CircuitBreaker, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	cb := &CircuitBreaker{
		name:          s.Name,
		maxRequests:   int64(s.MaxRequests),
		interval:      s.Interval,
		timeout:       s.Timeout,
		readyToTrip:   s.ReadyToTrip,
		isSuccessful:  s.IsSuccessful,
		onStateChange: s.OnStateChange,
		clock:         s.Clock,
	}
	if cb.maxRequests == 0 {
		cb.maxRequests = DefaultMaxRequests
	}
	if cb.timeout == 0 {
		cb.timeout = DefaultTimeout
	}
	if cb.readyToTrip == nil {
		cb.readyToTrip = defaultReadyToTrip
	}
	if cb.clock == nil {
		cb.clock = clock.Real
	}
	// Twice as many cells as goroutines running at once: a new hash
	// multiplier separates two that share one in a few tries.
	cb.ncells = min(64, max(4, 1<<bits.Len(uint(2*runtime.GOMAXPROCS(0)-1))))
	cb.cur.Store(cb.newEpoch(StateClosed))
	return cb, nil
}

// Name returns Settings.Name.
func (cb *CircuitBreaker) Name() string { return cb.name }

// State returns the current state. It only reads: an open breaker whose
// Timeout has passed reports StateOpen until a request moves it to
// half-open.
func (cb *CircuitBreaker) State() State { return cb.cur.Load().state }

// RemainingDelay returns how long an open breaker has left of its
// Settings.Timeout, read on Settings.Clock: the time until the next request
// moves it to half-open and is let through as a probe. It returns 0 when the
// breaker is closed or half-open, or open past its Timeout (the next
// request finds it half-open). Like State, it only reads. A service that
// refuses a request because the breaker is open can tell its client to
// come back after it (HTTP's Retry-After).
func (cb *CircuitBreaker) RemainingDelay() time.Duration {
	ep := cb.cur.Load()
	if ep.state != StateOpen {
		return 0 // no clock read: the common case costs one atomic load
	}
	elapsed := cb.clock.Now().Sub(ep.start)
	if elapsed < 0 {
		// The clock has stepped back past the opening: the next request
		// restarts the Timeout (admitSlow).
		return cb.timeout
	}
	return max(0, cb.timeout-elapsed)
}

// Counts returns the counts of the current period (see Counts). Like State,
// it only reads: a closed breaker's counts whose Interval has ended are
// cleared by the next request, not by Counts.
func (cb *CircuitBreaker) Counts() Counts { return cb.cur.Load().counts() }

// newEpoch returns a fresh epoch in state s, reading the clock when s needs
// a start.
func (cb *CircuitBreaker) newEpoch(s State) *epoch {
	ep := &epoch{epochHead: epochHead{cb: cb, state: s}}
	switch s {
	case StateOpen:
		ep.start = cb.clock.Now()
	case StateClosed:
		if cb.interval > 0 {
			ep.start = cb.clock.Now()
		}
		if cb.contended.Load() {
			ep.cells.Store(newCells(cb.ncells))
		}
		ep.fast = cb.interval == 0
		ep.done = func(ok bool) {
			if ok {
				cb.success(ep, noCell)
			} else {
				cb.failure(ep)
			}
		}
	}
	return ep
}

// admit lets a request through or refuses it. It returns the epoch that
// admitted it and the cell its request was counted in (-1: base). Its short
// path, the closed state without interval clearing, is written out in
// Execute too.
func (cb *CircuitBreaker) admit() (*epoch, int, error) {
	if ep := cb.cur.Load(); ep.fast {
		if cs := ep.cells.Load(); cs != nil {
			return ep, cs.add(kRequests), nil
		}
		if casInc(&ep.base.n[kRequests]) {
			return ep, -1, nil
		}
	}
	return cb.admitSlow()
}

func (cb *CircuitBreaker) admitSlow() (*epoch, int, error) {
	var next *epoch // the period this request found started after the one it saw end
	for {
		ep := cb.cur.Load()
		switch ep.state {
		case StateClosed:
			if !ep.fast && ep != next && cb.periodOver(ep, cb.clock.Now()) {
				// The period has ended: this request belongs to the next
				// one. Every caller that sees the end tries to start it
				// and exactly one swap wins; none counts in ep meanwhile,
				// where its failure could trip the breaker on the ended
				// period's counts, and none waits for another. The
				// request counts in the period that follows, without
				// asking the clock again: with an Interval shorter than
				// the time between two readings, it would find each new
				// period ended too, for ever.
				if cb.cur.Load() == ep {
					cb.cur.CompareAndSwap(ep, cb.newEpoch(StateClosed))
				}
				next = cb.cur.Load()
				continue
			}
			if cs := ep.cells.Load(); cs != nil {
				return ep, cs.add(kRequests), nil
			}
			if casInc(&ep.base.n[kRequests]) {
				return ep, -1, nil
			}
			// Another caller got in the way: spread the counters.
			ep.grow(cb)
		case StateOpen:
			if elapsed := cb.clock.Now().Sub(ep.start); elapsed < cb.timeout {
				if elapsed < 0 && cb.cur.Load() == ep {
					// The clock has stepped back past the moment the
					// breaker opened (a clock without Go's monotonic
					// reading): waiting for it to reach the old end
					// would add the step to Timeout. The breaker stays
					// open for a Timeout from now instead; no change of
					// state, so nothing to report.
					cb.cur.CompareAndSwap(ep, cb.newEpoch(StateOpen))
				}
				return nil, 0, ErrOpenState
			}
			cb.transition(ep, StateHalfOpen, nil)
		case StateHalfOpen:
			if testHookHalfOpen != nil {
				testHookHalfOpen()
			}
			n := cb.probes.Load()
			if n >= cb.maxRequests {
				// The slots are read after ep: if ep has ended since, the
				// request is judged by the state now, not by slots that a
				// request which took one as ep ended holds until it sees
				// that (below).
				if cb.cur.Load() != ep {
					continue
				}
				return nil, 0, ErrTooManyRequests
			}
			if !cb.probes.CompareAndSwap(n, n+1) {
				continue
			}
			// The slot was taken while ep was current: the request is a
			// probe of ep. Otherwise give it back and look again, so that
			// no request passes a breaker that has reopened meanwhile.
			if cb.cur.Load() != ep {
				cb.probes.Add(-1)
				continue
			}
			ep.base.n[kRequests].Add(1)
			return ep, -1, nil
		}
	}
}

// success records a success of a request admitted by ep and counted in
// cell i: -1 is base, noCell unknown (Allow's shared done). Any cell would
// be correct; the request's own keeps a goroutine on one cache line.
func (cb *CircuitBreaker) success(ep *epoch, i int) {
	if ep.state != StateClosed {
		cb.probeSuccess(ep)
		return
	}
	switch {
	case i >= 0:
		ep.cells.Load().inc(i, kSuccesses)
	case i == -1:
		ep.base.n[kSuccesses].Add(1)
	default:
		if cs := ep.cells.Load(); cs != nil {
			cs.add(kSuccesses)
		} else {
			ep.base.n[kSuccesses].Add(1)
		}
	}
	if f := ep.failures.Load(); f != ep.fMark.Load() {
		raise(&ep.fMark, f)
	}
}

// probeSuccess gives a probe's slot back, whatever its epoch, and records
// its success. Any failure ends a half-open epoch, so its successes are
// consecutive.
func (cb *CircuitBreaker) probeSuccess(ep *epoch) {
	// The slot goes back once the success may have closed the breaker:
	// given back first, it would let a request in as a probe of the
	// half-open epoch this success ends, whose outcome would count nowhere.
	// The transition gives it back before OnStateChange, which may take
	// long; the deferred call, if the breaker stays half-open, or if its
	// clock panics or exits the goroutine.
	var given bool
	defer cb.giveProbe(&given)
	if ep.base.n[kSuccesses].Add(1) >= uint64(cb.maxRequests) {
		cb.transition(ep, StateClosed, &given)
	}
}

// giveProbe gives a probe's slot back, unless given says it is back
// already; a nil given means the request was no probe.
func (cb *CircuitBreaker) giveProbe(given *bool) {
	if given != nil && !*given {
		*given = true
		cb.probes.Add(-1)
	}
}

// failure records a failure of a request admitted by ep.
func (cb *CircuitBreaker) failure(ep *epoch) {
	var given bool
	var probe *bool
	if ep.state == StateHalfOpen {
		// Once the failure has reopened the breaker, as in probeSuccess:
		// given back first, the slot would let a request through the
		// half-open epoch this failure ends.
		probe = &given
		defer cb.giveProbe(probe)
	}
	ep.failures.Add(1)
	raise(&ep.sMark, ep.sum(ep.cells.Load(), kSuccesses))
	if cb.cur.Load() != ep {
		return // a late outcome: its epoch is over
	}
	if !ep.fast && ep.state == StateClosed && cb.periodOver(ep, cb.clock.Now()) {
		// The period has ended, though no request has started the next
		// one yet (which clears the counts): its counts have stopped
		// counting, so they cannot trip the breaker.
		return
	}
	if ep.state == StateHalfOpen || cb.readyToTrip(ep.counts()) {
		cb.transition(ep, StateOpen, probe)
	}
}

// periodOver reports whether the Interval of closed epoch ep is over at
// now: Interval or more has passed since its start, or now is before the
// start, the clock having stepped back past it (a clock without Go's
// monotonic reading). Waiting for the old end then would keep the
// period's counts for the step on top of Interval.
//
// Time.Sub saturates: a difference beyond the largest Duration reads as
// that Duration, which is at least Interval (over, rightly), and one
// below the smallest as that, negative (stepped back, rightly).
func (cb *CircuitBreaker) periodOver(ep *epoch, now time.Time) bool {
	elapsed := now.Sub(ep.start)
	return elapsed >= cb.interval || elapsed < 0
}

// ignore takes back the request of ep counted in cell i, and its probe
// slot.
func (cb *CircuitBreaker) ignore(ep *epoch, i int) {
	if ep.state == StateHalfOpen {
		cb.probes.Add(-1)
	}
	ep.subAt(kRequests, i)
}

// transition moves the breaker from epoch from to a new epoch in state to,
// unless another caller has ended from first, and reports the change. probe
// is the slot of the probe whose outcome moves it (giveProbe), or nil.
func (cb *CircuitBreaker) transition(from *epoch, to State, probe *bool) {
	if cb.cur.Load() != from {
		return
	}
	if !cb.cur.CompareAndSwap(from, cb.newEpoch(to)) {
		return
	}
	// The probe whose outcome made the change gives its slot back now,
	// before OnStateChange, user code that may outlast the next Timeout.
	cb.giveProbe(probe)
	if cb.onStateChange != nil {
		cb.notify(from.state, to)
	}
}

// testHookHalfOpen, when set by a test, runs in admitSlow between reading a
// half-open epoch and reading its probe slots.
var testHookHalfOpen func()

func (cb *CircuitBreaker) notify(from, to State) {
	defer func() { _ = recover() }()
	cb.onStateChange(cb.name, from, to)
}
