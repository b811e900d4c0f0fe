package executor

import (
	"context"
	"fmt"
	"time"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/policy"
)

// Submit admits t under its group's limits and returns its handle, which is
// never nil.
//
// The task starts at once when its group has no task waiting and it fits its
// group's concurrency limit and the global limit (and no other group is
// waiting for global room). Otherwise it waits in its group's FIFO queue,
// holding only its place in its group's in-flight limit, if that limit and
// the queue thresholds have room. A task that does not fit is refused
// according to the rejection policy or handler: under Abort, Submit returns
// an error matching ErrRejected; under Discard, the handle completes
// Rejected and Submit returns nil; under CallerRuns, Fn runs in this
// goroutine and Submit returns when it is done; under DiscardOldest, the
// group's oldest waiting tasks make room (they complete Rejected with
// ErrDisplaced) and Submit returns nil, or, if that cannot make room, the
// task is discarded as under Discard.
//
// Some refusals leave no choice and always return an error, with the handle
// completed Rejected: invalid input (ErrInvalidTask), a task heavier than a
// limit it must pass (ErrTooHeavy), a shut-down executor or group
// (ErrShutdown, ErrGroupShutdown), a group breaker that refuses
// (breaker.ErrOpenState, breaker.ErrTooManyRequests; see WithGroupBreaker)
// and a resolver's invalid answer (LimitResolver). If ctx is already done,
// the handle completes Cancelled and Submit returns ctx's error.
//
// Cancelling ctx later cancels the task, as Handle.Cancel does.
//
// A refused task costs one allocation, its handle, which holds the error.
// A task without an ID that its group refuses the same way as the group's
// last refused Submit (the same limit, use, weight and error), the group
// having had tasks all the while (an idle group keeps no handle), costs none:
// it gets that refusal's handle, complete and unchangeable, which holds
// nothing of the task but its group, weight and outcome; such handles are
// the one case where two Submit calls return the same pointer. A refusal
// that a rejection handler or CallerRuns decides always gets its own.
func Submit[T any](ex *Executor, ctx context.Context, t Task[T]) (*Handle[T], error) {
	w := max(t.Weight, 1)
	if err := validate(ctx, t.Group, t.Weight, t.Fn == nil); err != nil {
		h := newRefusedHandle(t, ctx, w)
		return &h.Handle, ex.refuseInvalid(&h.job, t.Group, t.Weight, err)
	}
	if ex.listener != nil {
		ex.notify(onSubmitted, Event{Group: t.Group, ID: t.ID, Weight: w})
	}
	// A context whose Done is nil, as context.Background's, never ends:
	// its Err is not asked, so that knowing whether ctx can end, which a
	// queued task's watcher needs, costs no call more than asking Err.
	cancellable := ctx.Done() != nil
	if cancellable {
		if err := ctx.Err(); err != nil {
			h := newRefusedHandle(t, ctx, w)
			ex.refuseCancelled(&h.job, t.Group, context.Cause(ctx))
			return &h.Handle, err
		}
	}
	g, r := ex.findGroup(t.Group)
	var h *Handle[T]
	if g != nil && w == 1 && g.laneOpen.Load() && !cancellable {
		h = newHandle(t, ctx, w)
		if ex.pushLane(g, &h.job) {
			return h, nil // joins g's backlog (lane.go)
		}
	}
	if h == nil && likelyAdmitted(g) {
		h = newHandle(t, ctx, w)
		if cancellable {
			h.extra() // made outside the lock: queued, it marks the watcher pending; started, its run context uses it
		}
	}
	a := admission{id: t.ID}
	var b *batch // only for a task that fits its group's bulkhead
	if ex.admit(g, r, t.Group, w, &a); a.v == admitRoom {
		b = new(batch)
		ex.admitRoomLocked(a.g, w, &a, b)
		a.noteRefusing()
	}
	switch a.v {
	case admitStart:
		if h == nil {
			h = newHandle(t, ctx, w)
		}
		h.submitted = ex.since()
		ex.startNewLocked(&a, &h.job, b)
		ex.unlock(a.g, b)
		return h, nil
	case admitQueue:
		if h == nil {
			h = newHandle(t, ctx, w)
		}
		if ex.timeout == 0 {
			h.submitted = ex.since() // with a timeout, queueNewLocked reads it
		}
		if cancellable {
			h.extra().unwatched = true
		}
		ex.queueNewLocked(&a, &h.job)
		ex.unlock(a.g, b)
		if cancellable {
			if testHookQueued != nil {
				testHookQueued()
			}
			ex.watchParent(&h.job)
		}
		return h, nil
	}
	if t.ID == "" {
		return refuseShared(ex, &a, b, t, ctx, w, h)
	}
	rh := newRefusedHandle(t, ctx, w)
	a.r.fill(&rh.rej, t.Group, t.ID, w)
	return &rh.Handle, ex.refuseAdmission(&a, b, &rh.job, t.Group, &rh.rej)
}

func newHandle[T any](t Task[T], ctx context.Context, w int) *Handle[T] {
	h := &Handle[T]{id: t.ID, fn: t.Fn}
	h.kind, h.parent, h.body, h.weight = kindHandle, ctx, h, w
	return h
}

// refusedHandle is a handle and its refusal in one allocation.
type refusedHandle[T any] struct {
	Handle[T]
	rej RejectedError
}

func newRefusedHandle[T any](t Task[T], ctx context.Context, w int) *refusedHandle[T] {
	h := &refusedHandle[T]{Handle: Handle[T]{id: t.ID, fn: t.Fn}}
	h.kind, h.parent, h.body, h.weight = kindHandle, ctx, &h.Handle, w
	if h.parent == nil {
		h.parent = context.Background()
	}
	return h
}

// ExecuteAll submits every task with ctx, waits for all of them, and returns
// their results in the order of tasks. Cancelling ctx cancels the tasks not
// yet done; ExecuteAll still returns only when each has completed, so a Fn
// that ignores its context delays it. A task still waiting when ctx ends never
// runs and is Cancelled; a running one is classified by what its Fn returns
// (outcome.Classify): ctx.Err() after ctx's deadline passed is
// context.DeadlineExceeded, Failed, which a group breaker counts against the
// group (ExampleExecuteAll_fanOut).
//
// Refusals come back as results, not as an error: a task refused without
// running, under Abort as under Discard, is a Rejected result whose Err is
// the refusal (matching ErrRejected), and one submitted with ctx done is
// Cancelled.
//
// Called from a task of ex, ExecuteAll waits while that task holds its
// permits: tasks that fan out this way can take all the room their
// sub-tasks need (docs/admission.md, "Fan-out from a task").
func ExecuteAll[T any](ex *Executor, ctx context.Context, tasks []Task[T]) []Result[T] {
	hs := make([]*Handle[T], len(tasks))
	for i, t := range tasks {
		hs[i], _ = Submit(ex, ctx, t)
	}
	rs := make([]Result[T], len(tasks))
	for i, h := range hs {
		rs[i], _ = h.Wait(context.Background())
	}
	return rs
}

// invalidWeight is the weight a refusal for invalid input names, in its
// error and its event: 0 reads 1, as for every task, and a negative
// weight, the invalid input itself, is told as given.
func invalidWeight(w int) int {
	if w == 0 {
		return 1
	}
	return w
}

func validate(ctx context.Context, group string, weight int, nilFn bool) error {
	switch {
	case ctx == nil:
		return fmt.Errorf("%w: nil context", ErrInvalidTask)
	case group == "":
		return fmt.Errorf("%w: empty group key", ErrInvalidTask)
	case weight < 0:
		return fmt.Errorf("%w: negative weight %d", ErrInvalidTask, weight)
	case nilFn:
		return fmt.Errorf("%w: nil Fn", ErrInvalidTask)
	}
	return nil
}

// detachedGroup stands for a group whose state the executor does not keep
// (a refusal before admission), so that the task can still name it.
func detachedGroup(ex *Executor, key string) *group { return &group{ex: ex, key: key} }

// refuseInvalid refuses j, whose input validate found invalid (weight as
// given), and returns the error.
func (ex *Executor) refuseInvalid(j *job, group string, weight int, err error) error {
	j.g = detachedGroup(ex, group)
	weight = invalidWeight(weight)
	j.weight = weight // the listener's event names it too
	rej := &RejectedError{Group: group, ID: j.taskID(), Limit: LimitInvalid, Weight: weight, Err: err}
	ex.totals.countRefusal(Rejected, false)
	ex.completeRefused(j, Rejected, rej)
	return rej
}

// refuseCancelled completes j, whose context was done at submission, as
// Cancelled with cause.
func (ex *Executor) refuseCancelled(j *job, group string, cause error) {
	j.g = detachedGroup(ex, group)
	ex.totals.countRefusal(Cancelled, true)
	ex.completeRefused(j, Cancelled, cause)
}

// admission is one task's way through admit, and what its caller learns.
type admission struct {
	g      *group // locked, unless the refusal came before the group was found
	id     string // the task's ID (Submit), for the listener (allow)
	v      verdict
	r      refusal
	ps     [2]LimiterPermit
	ticket breaker.Ticket
}

// admit locks key's group, g as findGroup found it (or r, its refusal),
// and decides the admission of a task of weight w (admitLocked), after
// asking the group's breaker. On return a.g is locked, unless it is nil: a
// refusal before the group could be found.
//
// The caller allocates its task between findGroup and admit, outside the
// group's lock, unless the group is refusing (likelyAdmitted): an
// allocation may help the collector for a while, and a group's lock is
// what every one of its tasks waits on.
func (ex *Executor) admit(g *group, r *refusal, key string, w int, a *admission) {
	g, r = ex.lockFound(g, r, key)
	if g == nil {
		a.v, a.r = admitRefuse, *r
		return
	}
	a.g = g
	g.counts.Submitted++
	if g.br != nil && ex.stateNow() == open && !g.shutdown {
		t, err := ex.allow(g, a.id, w)
		if err == nil {
			a.ticket = t
			err = ticketRefusal(g.br, &a.ticket) // g's task may have opened it meanwhile
		}
		if err != nil {
			a.v, a.r = admitRefuse, refusal{limit: LimitBreaker, err: err, forced: true}
			return
		}
	}
	ex.admitLocked(a.g, w, a)
	a.noteRefusing()
}

// allow asks locked g's breaker to let a task through, the task of weight
// w and ID id, and returns with g locked again. The breaker may call
// OnStateChange, user code: it is asked with the lock released, and g
// pinned (pending) so that it is neither reclaimed nor evicted meanwhile.
// The breaker recovers a panic in OnStateChange, not a runtime.Goexit:
// then (or if the breaker's Clock panics) the deferred call unpins g and
// counts the task Rejected, so that g can go idle and its outcomes add up,
// tells the listener, which heard of the task's submission, that it was
// rejected (with ErrGoexit, or the panic as a *PanicError), and the
// caller's goroutine goes on exiting (or panicking) with no lock held.
//
// The panic is recovered to be told, and raised again from a deferred
// call: the unlock and the listener are user code, and one that exits the
// goroutine while the panic is under way would drop it (Go drops a panic
// when a deferred call exits its goroutine), the caller never seeing it.
// Raised as the goroutine exits, it goes on up; the exit goes on once the
// caller recovers it.
func (ex *Executor) allow(g *group, id string, w int) (t breaker.Ticket, err error) {
	g.pending++
	g.mu.Unlock()
	asked := false
	defer func() {
		if asked {
			return
		}
		p := recover()
		if p != nil {
			defer panic(p)
		}
		g.mu.Lock()
		g.pending--
		g.counts.add(Rejected)
		var b batch
		ex.unlock(g, &b)
		if ex.listener == nil {
			return
		}
		cause := ErrGoexit
		if p != nil {
			cause = newPanicError(p)
		}
		ex.notify(onRejected, Event{Group: g.key, ID: id, Weight: w, Status: Rejected,
			Err: &RejectedError{Group: g.key, ID: id, Limit: LimitBreaker, Weight: w, Err: cause}})
	}()
	t, err = g.br.AllowTicket()
	asked = true
	g.mu.Lock()
	g.pending--
	return t, err
}

// noteRefusing records in a's group whether a refused (group.refusing).
func (a *admission) noteRefusing() {
	if refusing := a.v == admitRefuse; a.g.refusing.Load() != refusing {
		a.g.refusing.Store(refusing)
	}
}

// likelyAdmitted reports whether a task for g is worth allocating before
// admit: g was found, and its last admission was not a refusal.
func likelyAdmitted(g *group) bool { return g != nil && !g.refusing.Load() }

// startNewLocked starts j, which admit started: it takes the ticket and
// cluster permits admit got, and needs a worker unless it is a Do call.
func (ex *Executor) startNewLocked(a *admission, j *job, b *batch) {
	j.g = a.g
	ex.attachLocked(a, j)
	ex.runLocked(a.g, j)
	if j.kind != kindDo {
		ex.launchLocked(j, b)
	}
}

// queueNewLocked queues j, which admit queued.
func (ex *Executor) queueNewLocked(a *admission, j *job) {
	j.g = a.g
	ex.attachLocked(a, j)
	var now time.Duration
	if ex.timeout > 0 {
		now = ex.since()
	}
	ex.enqueueLocked(a.g, j, now)
	ex.openLaneLocked(a.g)
}

func (ex *Executor) attachLocked(a *admission, j *job) {
	if a.g.br != nil {
		j.extra().ticket = a.ticket
	}
	if a.ps[0] != nil || a.ps[1] != nil {
		x := j.extra()
		x.cluster, x.bound = a.ps, true
	}
}

// refuseShared refuses t, a task without an ID, whose refusal's error is
// its group's shared one (endRefusal); h is its handle if allocated.
//
// A completed handle holds nothing of its task but its group, weight and
// outcome. So when the refusal is decided here (no rejection handler or
// CallerRuns may run the task) and it is the same as the group's last
// refusal of a task without an ID, the task gets that refusal's handle,
// and a group that keeps refusing the same way costs no allocation per
// Submit, as it costs none per Go or Do. Under overload this is most of
// Submit's cost: on two cores a refused Submit that allocated its
// 144-byte handle took 150 ns, one that shares it 55 (the allocation's
// cost is mostly the collector's assist work).
func refuseShared[T any](ex *Executor, a *admission, b *batch, t Task[T], ctx context.Context, w int, h *Handle[T]) (*Handle[T], error) {
	g := a.g
	var last *job // g's refusedTask, read under its lock
	decided, rej := ex.endRefusal(a, b, t.Group, w, true, &last)
	if decided && g != nil {
		if j := last; j != nil {
			if last, ok := j.body.(*Handle[T]); ok && last.err == error(rej) {
				if ex.listener != nil {
					ex.notify(onRejected, Event{Group: t.Group, Weight: w, Status: Rejected, Err: rej})
				}
				return last, ex.refusalError(a, rej)
			}
		}
	}
	if h == nil {
		h = newHandle(t, ctx, w)
	}
	err := ex.finishRefusal(a, &h.job, t.Group, decided, rej)
	if decided && g != nil {
		// Shared from now on, it keeps neither the caller's context nor
		// what Fn holds.
		h.fn, h.parent = nil, context.Background()
		// Kept only if g did not go idle since the refusal's unlock:
		// idleLocked then cleared what endRefusal read (never nil).
		g.refusedTask.CompareAndSwap(last, &h.job)
	}
	return h, err
}

// refusalReserved stands in a group's refusedTask for the handle that a
// refusal of a busy group is about to make, so that the group going idle
// meanwhile clears it (idleLocked), and the handle is not kept.
var refusalReserved job

// refuseAdmission ends the admission that refused j (rej its error),
// applying the rejection policy or handler unless the refusal is forced,
// and returns Submit's error.
func (ex *Executor) refuseAdmission(a *admission, b *batch, j *job, key string, rej *RejectedError) error {
	decided, _ := ex.endRefusal(a, b, key, j.weight, false, nil)
	return ex.finishRefusal(a, j, key, decided, rej)
}

// finishRefusal completes j, refused with rej, once its admission's locked
// section has ended (endRefusal decided whether a handler or CallerRuns
// decides), and returns Submit's error.
func (ex *Executor) finishRefusal(a *admission, j *job, key string, decided bool, rej *RejectedError) error {
	j.g = a.refusedGroup(ex, key)
	if !decided {
		return ex.decideRefusal(j, rej)
	}
	ex.completeRefused(j, Rejected, rej)
	return ex.refusalError(a, rej)
}

// refusalError is Submit's error for a decided refusal: rej under Abort or
// when the refusal is forced, nil otherwise (the handle says it).
func (ex *Executor) refusalError(a *admission, rej *RejectedError) error {
	if a.r.forced || ex.pol.RejectionPolicy() == policy.Abort {
		return rej
	}
	return nil
}

// refusedGroup is the group a refused task names: its state, or a stand-in
// if the refusal came before it was found.
func (a *admission) refusedGroup(ex *Executor, key string) *group {
	if a.g != nil {
		return a.g
	}
	return detachedGroup(ex, key)
}

// decideRefusal lets the rejection handler, or CallerRuns, decide what
// becomes of j, refused for lack of room (rej), and returns the caller's
// error. The outcome is counted once decided.
func (ex *Executor) decideRefusal(j *job, rej *RejectedError) error {
	// Refused, j was never queued, so nothing read the clock at its
	// submission: a run by its caller is timed from now, not from the
	// executor's start.
	j.submitted = ex.since()
	if ex.handler != nil {
		r := &Rejection{Group: rej.Group, ID: j.taskID(), Weight: j.weight, Ctx: j.parent, Err: rej, ex: ex, j: j}
		// Deferred, so that a handler that exits the goroutine
		// (runtime.Goexit) leaves the task refused, counted and complete,
		// as one that returns or panics does. RunInCaller after the handler
		// returned does nothing; if it won the race, the task runs (or ran)
		// and completes itself.
		defer func() {
			if r.state.CompareAndSwap(rejectionOpen, rejectionClosed) {
				ex.countOutcome(j.g, Rejected, false)
				ex.completeRefused(j, Rejected, rej)
			}
		}()
		return ex.callHandler(r)
	}
	ex.runInCaller(j, rej) // CallerRuns
	return nil
}

// endRefusal ends the locked section of a refused admission. It counts the
// refusal as Rejected, and reports true, unless the rejection handler or
// CallerRuns is to decide; then the caller counts the outcome. With want,
// it returns the refusal's error for a task of weight w without an ID (Go,
// Do): the group's last such error if it is the same refusal, so that a
// group that keeps refusing the same way costs no allocation per call.
// With last (refuseShared), a refusal that is decided reads into it the
// group's shared refusal handle, under the group's lock.
func (ex *Executor) endRefusal(a *admission, b *batch, key string, w int, want bool, last **job) (decided bool, rej *RejectedError) {
	decided = a.r.forced || (ex.handler == nil && ex.pol.RejectionPolicy() != policy.CallerRuns)
	if !decided && a.g != nil {
		return false, ex.endUndecided(a, b, key, w, want)
	}
	return decided, ex.endRefusalAs(a, b, key, w, want, last, decided)
}

// endRefusalAs is endRefusal, decided or not.
func (ex *Executor) endRefusalAs(a *admission, b *batch, key string, w int, want bool, last **job, decided bool) (rej *RejectedError) {
	if g := a.g; g == nil {
		if want {
			rej = a.r.error(key, "", w)
		}
		if decided {
			ex.totals.countRefusal(Rejected, true)
		} else {
			ex.totals.countRefusal(0, true)
		}
	} else {
		if want {
			if e := g.refused; e != nil && e.Limit == a.r.limit && e.Used == a.r.used && e.Max == a.r.max &&
				e.Weight == w && sameErr(e.Err, a.r.err) {
				rej = e
			} else {
				rej = a.r.error(key, "", w)
				g.refused = rej
			}
		}
		if decided {
			g.counts.add(Rejected)
			if last != nil {
				// Read under the lock: from here on, only idleLocked and other
				// refusals change it, and refuseShared keeps its handle only
				// if it is unchanged (the group did not go idle). A group idle
				// now keeps none: the unlock below clears it.
				if *last = g.refusedTask.Load(); *last == nil {
					*last = &refusalReserved
					g.refusedTask.Store(*last)
				}
			}
		}
		switch {
		case b != nil:
			ex.unlock(g, b)
		case g.idle() || g.resync:
			var b batch
			ex.unlock(g, &b) // a group made for this task, idle, or a drained lane's new head (lane.go)
		default:
			g.mu.Unlock() // a refusal changed nothing but the counts
		}
	}
	if a.g != nil && a.g.br != nil {
		a.ticket.Ignore() // outside the lock: the breaker may call OnStateChange (a zero Ticket ignores it)
	}
	return rej
}

// endUndecided is endRefusal for a refusal that the handler or CallerRuns
// decides once it returns, counting the outcome. The unlock may dispatch
// global room and complete another group's head found past its queue
// timeout, telling the listener, and the ticket's Ignore may call the
// breaker's OnStateChange: a call that exits the goroutine
// (runtime.Goexit) there ends the caller, who was to decide. The refusal
// then stands, counted, as for a handler that exits. A function of its
// own, so that a refusal decided at once does not pay for the defer.
func (ex *Executor) endUndecided(a *admission, b *batch, key string, w int, want bool) *RejectedError {
	exiting := true
	defer func() {
		if exiting {
			ex.countOutcome(a.g, Rejected, false)
		}
	}()
	rej := ex.endRefusalAs(a, b, key, w, want, nil, false)
	exiting = false
	return rej
}

// sameErr reports whether a and b are the same error, as == does, but
// false where == would panic: a cluster Limiter's refusal is user code,
// and its error may be of a type that is not comparable (a struct holding
// a slice, say). Compared under the group's lock, such an error would
// leave the lock held. A refusal for lack of room has no error (nil): that
// comparison stays inline, without the deferred recover.
func sameErr(a, b error) bool {
	if a == nil || b == nil {
		return a == b
	}
	return sameErrRecovered(a, b)
}

// sameErrRecovered is sameErr for two errors. The recover costs no
// allocation, where asking package reflect whether the values are
// comparable cost two a refusal.
func sameErrRecovered(a, b error) (same bool) {
	defer func() { _ = recover() }()
	return a == b
}

// countOutcome counts an outcome decided after the admission's lock was
// released: by a rejection handler, or by a task run in its caller.
func (ex *Executor) countOutcome(g *group, st Status, callerRuns bool) {
	if cur := ex.groups.load(g.key); cur == g {
		g.mu.Lock()
		if !g.dead {
			if callerRuns {
				g.counts.CallerRuns++
			}
			g.counts.add(st)
			g.mu.Unlock()
			return
		}
		g.mu.Unlock()
	}
	ex.totals.countLate(st, callerRuns)
}

// watchParent cancels j when Submit's context ends while j waits. Once j has
// started, its run context derives from that context and needs no watcher.
// Until it is armed, j is marked unwatched (jobExtra): a start meanwhile
// leaves it to j's worker to ask the context whether it ended.
func (ex *Executor) watchParent(j *job) {
	// Arming calls the context, user code (its own AfterFunc method, or
	// its Done again): if that panics or exits the goroutine, the caller,
	// Submit's or Go's, gets no handle, so j leaves its queue first
	// (unwatchable) rather than start later, unwatched, on a worker where
	// its context would fail again. An open-coded defer: no allocation.
	armed := false
	defer func() {
		if !armed {
			ex.unwatchable(j)
		}
	}()
	stop := context.AfterFunc(j.parent, func() { ex.cancel(j, context.Cause(j.parent)) })
	armed = true
	g := j.g
	g.mu.Lock()
	if j.state == stateWaiting {
		x := j.extra()
		x.stopAfter = stop
		x.unwatched = false
		stop = nil
	}
	g.mu.Unlock()
	if stop != nil {
		// j started meanwhile, unwatched: its worker asks the context.
		// The stop may be user code that panics: ignored, as wherever a
		// watcher is stopped, rather than unwinding Submit's caller, who
		// would lose the handle of a task that runs.
		stopWatcher(stop)
	}
}

// unwatchable removes waiting j, whose Submit context panicked or exited
// the goroutine as its watcher was armed (watchParent): j completes
// Failed with ErrGoexit, never started, as a task whose context fails so
// as its worker asks it at its start. A j that started meanwhile is left
// to that worker, which asks the context itself (endedAtStart).
func (ex *Executor) unwatchable(j *job) {
	g := j.g
	ex.lockDrained(g)
	if j.state != stateWaiting {
		ex.unlockDrained(g)
		return
	}
	ex.removeWaitingLocked(g, j, Failed)
	// Deferred, as in cancel: the unlock may dispatch and tell the
	// listener of another group's head past its queue timeout, and a
	// listener call that exits the goroutine would leave j incomplete.
	defer ex.completeRemoved(j, Failed, ErrGoexit)
	var b batch
	ex.unlock(g, &b)
}

// testHookQueued, when set by a test, runs in Submit and Go between the
// queueing of a task whose context can end and the arming of its watcher
// (watchParent).
var testHookQueued func()

func (ex *Executor) callHandler(r *Rejection) (err error) {
	defer func() {
		if recover() != nil {
			err = r.Err
		}
	}()
	return ex.handler(r)
}
