package breaker

import "sync/atomic"

// Execute calls fn if cb lets the request through, records the outcome and
// returns fn's results. When cb refuses the request it returns the zero T
// and ErrOpenState or ErrTooManyRequests without calling fn.
//
// The outcome is Settings.IsSuccessful(err) (default: err == nil). If fn
// panics (or calls runtime.Goexit), the request counts as a failure and the
// panic propagates to Execute's caller unchanged, even if ReadyToTrip or
// OnStateChange exits the goroutine as the failure is recorded: the caller
// gets the panic, and the exit goes on once the caller recovers it.
// (Execute recovers the panic to record the failure, and raises the same
// value again: a traceback shows it "recovered, repanicked", from fn's
// frames.) In the closed state Execute takes no lock and allocates nothing.
//
// A nil fn panics before the breaker is asked, and counts nothing: it is
// the caller's bug, not a failure of the dependency, and counted as one it
// would trip the breaker, or reopen a half-open one, on a dependency that
// never failed.
func Execute[T any](cb *CircuitBreaker, fn func() (T, error)) (T, error) {
	if fn == nil {
		panic("breaker: Execute: nil function")
	}
	// admit's and success's short paths are written out: Execute is the
	// hot path, and calls cost as much as the atomics.
	ep, i := cb.cur.Load(), int(noCell)
	if ep.fast {
		if cs := ep.cells.Load(); cs != nil {
			i = cs.add(kRequests)
		} else if casInc(&ep.base.n[kRequests]) {
			i = -1
		}
	}
	if i == noCell {
		var err error
		if ep, i, err = cb.admitSlow(); err != nil {
			var zero T
			return zero, err
		}
	}
	recorded := false
	defer func() {
		if !recorded { // fn panicked or called runtime.Goexit
			cb.failureUnwinding(ep, recover())
		}
	}()
	v, err := fn()
	ok := err == nil
	if cb.isSuccessful != nil {
		ok = cb.isSuccessful(err) // if it panics, the deferred call records a failure
	}
	recorded = true
	switch {
	case !ok:
		cb.failure(ep)
	case ep.state != StateClosed:
		cb.probeSuccess(ep)
	case i == -1:
		ep.base.n[kSuccesses].Add(1)
		if f := ep.failures.Load(); f != ep.fMark.Load() {
			raise(&ep.fMark, f)
		}
	default:
		cb.success(ep, i)
	}
	return v, err
}

// Allow is the two-step form of Execute: it lets a request through or
// refuses it (ErrOpenState, ErrTooManyRequests), and the caller reports the
// outcome by calling done once the work ends: done(true) for a success,
// done(false) for a failure. Settings.IsSuccessful is not consulted.
//
// done must be called exactly once. In the closed state every request of a
// period shares one done, which is how Allow allocates nothing; so a second
// call cannot be told apart and counts again. A half-open probe's done
// ignores calls after the first (it allocates). A request whose outcome
// should not count, or that must be finished at most once by construction,
// should use AllowTicket.
func (cb *CircuitBreaker) Allow() (done func(success bool), err error) {
	ep, i, err := cb.admit()
	if err != nil {
		return nil, err
	}
	if ep.state == StateClosed {
		return ep.done, nil
	}
	var once atomic.Bool
	return func(ok bool) {
		if once.Swap(true) {
			return
		}
		if ok {
			cb.success(ep, i)
		} else {
			cb.failure(ep)
		}
	}, nil
}

// A Ticket is a request let through by AllowTicket, to be finished with
// exactly one of Success, Failure or Ignore. A half-open probe's Ticket
// dropped unfinished keeps its probe slot for good (see
// Settings.MaxRequests). Finishing it sets it to the zero
// Ticket, so further calls on it do nothing, as do calls on the zero Ticket.
// Copies are not tracked: finish one copy only. A Ticket is not safe for
// concurrent use, but it may be finished by another goroutine than the one
// that took it.
type Ticket struct {
	ep   *epoch
	cell int
}

// AllowTicket is the two-step form of Execute that can also finish a request
// without recording an outcome (Ignore): for work that was cancelled before
// it could tell anything about the dependency. It lets the request through or
// refuses it with ErrOpenState or ErrTooManyRequests (and the zero Ticket).
// It allocates nothing.
func (cb *CircuitBreaker) AllowTicket() (Ticket, error) {
	ep, i, err := cb.admit()
	if err != nil {
		return Ticket{}, err
	}
	return Ticket{ep: ep, cell: i}, nil
}

// Success records a success.
func (t *Ticket) Success() {
	if ep, i := t.ep, t.cell; ep != nil {
		*t = Ticket{} // the cell too: a finished Ticket compares equal to Ticket{}
		ep.cb.success(ep, i)
	}
}

// Failure records a failure.
func (t *Ticket) Failure() {
	if ep := t.ep; ep != nil {
		*t = Ticket{}
		ep.cb.failure(ep)
	}
}

// Ignore records nothing and takes the request back off Counts.Requests; a
// half-open probe gives its slot back, so another probe may start.
func (t *Ticket) Ignore() {
	if ep, i := t.ep, t.cell; ep != nil {
		*t = Ticket{}
		ep.cb.ignore(ep, i)
	}
}

// Probe reports whether t is an unfinished half-open probe: one of the at
// most MaxRequests requests let through while the breaker is half-open, in
// the half-open period still under way. A probe of a period that has ended
// (the breaker reopened or closed since) is no longer one: a request that
// waited to start on it runs beside the next period's probes, outside
// their count.
func (t *Ticket) Probe() bool {
	return t.ep != nil && t.ep.state == StateHalfOpen && t.ep.cb.cur.Load() == t.ep
}

// failureUnwinding records a failure as Execute's caller unwinds, from fn's
// panic (or IsSuccessful's), recovered as r, or from runtime.Goexit (r
// nil), then raises r again. A panic in ReadyToTrip is dropped, so that r
// goes on up unchanged, as Execute's doc says, instead of being replaced
// by it.
//
// Recording may call ReadyToTrip and OnStateChange, user code. Had the
// panic been left under way while they run, one that exits the goroutine
// would drop it, silently: Go drops a panic when a deferred call exits its
// goroutine. Recovered, r is raised again by a deferred call, which runs
// even then, and a panic raised while the goroutine exits goes on up: the
// caller gets r; if it recovers it, the exit goes on from there.
//
// (A panic(nil) recovers as nil only under GODEBUG panicnil=1, and then
// reads as runtime.Goexit: Execute returns zero values.)
func (cb *CircuitBreaker) failureUnwinding(ep *epoch, r any) {
	if r != nil {
		defer panic(r)
	}
	defer func() { _ = recover() }()
	cb.failure(ep)
}
