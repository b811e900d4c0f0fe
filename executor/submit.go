package executor

import (
	"context"
	"fmt"
	"github.com/groupexec/groupexec/policy"
	"time"
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
// and a resolver's invalid answer (LimitResolver). If ctx is already done, the handle
// completes Cancelled and Submit returns ctx's error.
//
// Cancelling ctx later cancels the task, as Handle.Cancel does.
func Submit[T any](ex *Executor, ctx context.Context, t Task[T]) (*Handle[T], error) {
	h := &Handle[T]{id: t.ID, fn: t.Fn}
	h.parent, h.body, h.weight = ctx, h, t.Weight
	if h.weight == 0 {
		h.weight = 1
	}
	if err := validate(ctx, t.Group, t.Weight, t.Fn == nil); err != nil {
		return h, ex.refuseInvalid(&h.job, t.Group, t.Weight, err)
	}
	return h, ex.submit(&h.job, t.Group)
}

// ExecuteAll submits every task with ctx, waits for all of them, and returns
// their results in the order of tasks. Cancelling ctx cancels the tasks not
// yet done; ExecuteAll still returns only when each has completed, so a Fn
// that ignores its context delays it.
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

// refuseInvalid refuses j, whose input validate found invalid (weight as
// given), and returns Submit's error.
func (ex *Executor) refuseInvalid(j *job, group string, weight int, err error) error {
	j.g = detachedGroup(ex, group)
	if j.parent == nil {
		j.parent = context.Background()
	}
	return ex.refuse(j, &RejectedError{Group: group, ID: j.taskID(), Limit: LimitInvalid, Weight: weight, Err: err}, true)
}

// detachedGroup stands for a group whose state the executor does not keep
// (a refusal before admission), so that the handle can still name it.
func detachedGroup(ex *Executor, key string) *group { return &group{ex: ex, key: key} }

// submit admits j into the group named key.
func (ex *Executor) submit(j *job, key string) error {
	if ex.listener != nil {
		ex.notify(onSubmitted, Event{Group: key, ID: j.taskID(), Weight: j.weight})
	}
	// A reusable Go task's context is Background: no calls to ask it.
	bg := j.flags == bgGo
	if err := ctxErr(j.parent, bg); err != nil {
		return ex.refuseCancelled(j, key, err)
	}
	var now time.Duration
	if ex.timed(j) {
		now = ex.since()
		j.submitted = now
	}
	if ex.lanes {
		// A task behind a waiting one takes the group's lane (lane.go).
		if g := ex.laneGroup(key); g != nil {
			j.g = g
			// Done is the caller's code: called outside every lock.
			if watch := !bg && j.parent.Done() != nil; j.g.lane.admit(j, watch) {
				if watch {
					ex.watchParent(j, true)
				}
				return nil
			}
		}
	}
	return ex.submitLocked(j, key, now)
}

// refuseCancelled completes j, whose Submit context is done (err), as
// Cancelled, and returns err.
func (ex *Executor) refuseCancelled(j *job, key string, err error) error {
	j.g = detachedGroup(ex, key)
	ex.mu.Lock()
	ex.counts.Submitted++
	ex.counts.add(Cancelled)
	ex.mu.Unlock()
	ex.completeCancelled(j, context.Cause(j.parent), 0)
	return err
}

// submitLocked is submit past the lane: it admits j under the executor's
// lock. now is j's submission time if submit read it.
func (ex *Executor) submitLocked(j *job, key string, now time.Duration) error {
	ex.mu.Lock()
	g := ex.groups[key]
	if g == nil && ex.state == open {
		// Limits set by SetGroupLimits win over the policy's, whose
		// resolvers are then not called.
		l, set := ex.overrides[key]
		if !set {
			// The resolver is user code: call it outside the lock.
			ex.mu.Unlock()
			var err error
			l, err = ex.pol.Group(key)
			if err != nil {
				j.g = detachedGroup(ex, key)
				ex.mu.Lock()
				ex.counts.Submitted++
				ex.mu.Unlock()
				return ex.refuse(j, &RejectedError{Group: key, ID: j.taskID(), Limit: LimitResolver, Weight: j.weight, Err: err}, true)
			}
			ex.mu.Lock()
			if o, ok := ex.overrides[key]; ok {
				l = o // set meanwhile
			}
		}
		if g = ex.groups[key]; g == nil && ex.state == open {
			g = newGroup(ex, key, l)
			ex.groups[key] = g
			ex.indexLocked(g)
		}
	}
	if g != nil {
		ex.closeLaneLocked(g) // what it admitted comes first, and counts
	}
	ex.counts.Submitted++
	if g == nil {
		ex.mu.Unlock()
		j.g = detachedGroup(ex, key)
		return ex.refuse(j, &RejectedError{Group: key, ID: j.taskID(), Limit: LimitShutdown, Err: ErrShutdown}, true)
	}
	j.g = g
	g.counts.Submitted++
	if g.br != nil && ex.state == open && !g.shutdown {
		if rej := ex.ticketUnlocked(g, j); rej != nil {
			return ex.refuse(j, rej, true)
		}
	}
	if ex.timeout > 0 {
		// Queue deadlines must follow queue order (timeout.go), so with a
		// timeout the submission time is taken under the lock.
		now = ex.since()
		j.submitted = now
	}
	var b batch
	rej, forced := ex.admitLocked(g, j, now, &b)
	if rej != nil {
		if g.idle() {
			// A group made for a refused task is idle from the start: it
			// is reclaimed like any other.
			ex.groupIdleLocked(g)
		}
		ex.launchLocked(&b)
		ex.mu.Unlock()
		ex.afterUnlock(&b)
		return ex.refuse(j, rej, forced)
	}
	if j.state == stateRunning {
		// Started at once: the fast path.
		ex.runq.Push(j)
		ex.launchLocked(&b)
		ex.mu.Unlock()
		ex.afterUnlock(&b)
		return nil
	}
	// Read before unlocking: once the lock is released j may start, run,
	// complete, and be reused (recycle.go) before this goroutine goes on.
	// (Only a j with context.Background is reused, and it needs no watcher.)
	watch := j.parent.Done() != nil
	ex.dispatchLocked(&b)
	ex.openLaneLocked(g)
	ex.launchLocked(&b)
	ex.mu.Unlock()
	ex.afterUnlock(&b)
	if watch {
		ex.watchParent(j, false)
	}
	return nil
}

// ctxErr returns ctx's error; bg says ctx is context.Background.
func ctxErr(ctx context.Context, bg bool) error {
	if bg {
		return nil
	}
	return ctx.Err()
}

// ticketUnlocked asks g's breaker to let j through. The breaker may call
// OnStateChange, user code, so the lock is released meanwhile; g is pinned
// (pending) so that it is neither reclaimed nor evicted in between. It
// returns with the lock held, or with it released and the refusal.
func (ex *Executor) ticketUnlocked(g *group, j *job) *RejectedError {
	g.pending++
	ex.idle.Remove(&g.idleNode)
	ex.mu.Unlock()
	t, err := g.br.AllowTicket()
	ex.mu.Lock()
	g.pending--
	if err != nil {
		if g.idle() {
			ex.groupIdleLocked(g)
		}
		ex.mu.Unlock()
		return &RejectedError{Group: g.key, ID: j.taskID(), Limit: LimitBreaker, Weight: j.weight, Err: err}
	}
	j.extra().ticket = t
	return nil
}

// admitLocked decides j's admission into g: it starts j, queues it, or
// returns why not and whether the refusal is forced (no rejection policy
// applies). Tasks displaced under DiscardOldest go in b.
func (ex *Executor) admitLocked(g *group, j *job, now time.Duration, b *batch) (rej *RejectedError, forced bool) {
	w := j.weight
	refuse := func(l Limit, used, limit int, err error) *RejectedError {
		return &RejectedError{Group: g.key, ID: j.taskID(), Limit: l, Weight: w, Used: used, Max: limit, Err: err}
	}
	switch {
	case ex.state != open:
		return refuse(LimitShutdown, 0, 0, ErrShutdown), true
	case g.shutdown:
		return refuse(LimitShutdown, 0, 0, ErrGroupShutdown), true
	// The three limits, in their order; a task heavier than one can never run.
	case w > ex.global.Limit():
		return refuse(LimitGlobalInFlight, ex.global.Used(), ex.global.Limit(), ErrTooHeavy), true
	case w > g.inFlight.Limit():
		return refuse(LimitGroupInFlight, g.inFlight.Used(), g.inFlight.Limit(), ErrTooHeavy), true
	case w > g.conc.Limit():
		return refuse(LimitGroupConcurrency, g.conc.Used(), g.conc.Limit(), ErrTooHeavy), true
	case !g.inFlight.Fits(w):
		return refuse(LimitGroupInFlight, g.inFlight.Used(), g.inFlight.Limit(), nil), false
	}
	clusterWait := false
	if g.queued() == 0 && g.conc.Fits(w) && ex.ready.Len() == 0 && ex.global.Fits(w) {
		if ex.cluster == nil {
			ex.admitToGroupLocked(g, j)
			ex.startLocked(g, j)
			return nil, false
		}
		switch o, rej := ex.cluster.acquireLocked(g, j); o {
		case clusterGranted:
			ex.admitToGroupLocked(g, j)
			ex.startLocked(g, j)
			return nil, false
		case clusterRefused:
			return rej, true
		case clusterWaitGroup:
			clusterWait = true // it waits like any other task
		}
	}
	if n := g.queued(); n >= g.limits.QueueThreshold && !ex.displaceLocked(g, w, b) {
		return refuse(LimitGroupQueue, n, g.limits.QueueThreshold, nil), false
	}
	if t := ex.pol.GlobalQueueThreshold(); ex.waiting >= t {
		return refuse(LimitGlobalQueue, ex.waiting, t, nil), false
	}
	ex.admitToGroupLocked(g, j)
	j.state = stateWaiting
	g.flushLightLocked() // j goes behind them
	g.waiting.PushBack(j)
	ex.waiting++
	if g.queued() == 1 {
		g.clusterWait = clusterWait
		ex.updateReadyLocked(g)
		ex.armLocked(g, now)
	}
	return nil, false
}

// displaceLocked makes room in g's full queue for a new task of weight w
// under DiscardOldest: it removes g's oldest waiting tasks, as few as leave
// room for the new one in g's queue threshold (and so in its in-flight limit
// and the global queue threshold, which it had passed), and puts them in b to
// complete Rejected with ErrDisplaced. It removes nothing and reports false
// if the policy is another, a rejection handler is set, or removing every
// waiting task would not make room. Only a full group queue displaces: every
// other refusal under DiscardOldest behaves as under Discard.
func (ex *Executor) displaceLocked(g *group, w int, b *batch) bool {
	if ex.handler != nil || ex.pol.RejectionPolicy() != policy.DiscardOldest || g.overLimitLocked() {
		return false
	}
	g.flushLightLocked() // walked below
	used, full := g.waiting.Len(), g.limits.QueueThreshold
	free := g.inFlight.Limit() - g.inFlight.Used()
	waiting, globalWaiting := g.waiting.Len(), ex.waiting
	globalMax := ex.pol.GlobalQueueThreshold()
	k := 0
	for n := g.waiting.Front(); w > free || waiting >= g.limits.QueueThreshold || globalWaiting >= globalMax; n = n.next {
		if n == nil {
			return false
		}
		free += n.weight
		waiting--
		globalWaiting--
		k++
	}
	g.pending++ // the group must not go idle, and be reclaimed, in between
	for range k {
		old := g.head()
		ex.removeWaitingLocked(old, Rejected)
		b.displaced.add(displacement{old, &RejectedError{Group: g.key, ID: old.taskID(), Limit: LimitGroupQueue,
			Weight: old.weight, Used: used, Max: full, Err: ErrDisplaced}})
	}
	g.pending--
	return true
}

func (ex *Executor) admitToGroupLocked(g *group, j *job) {
	g.inFlight.Acquire(j.weight)
	ex.tasks++
	ex.idle.Remove(&g.idleNode)
}

// watchParent cancels j when Submit's context ends while j waits. Once j has
// started, its run context derives from that context and needs no watcher.
// inLane says j came in through its group's lane (lane.go).
func (ex *Executor) watchParent(j *job, inLane bool) {
	stop := context.AfterFunc(j.parent, func() { ex.cancel(j, context.Cause(j.parent)) })
	if inLane && j.g.lane.watch(j, stop) {
		return
	}
	ex.mu.Lock()
	if j.state == stateWaiting {
		j.extra().stopAfter = stop
		stop = nil
	}
	ex.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// refuse completes a task that was not admitted, applying the rejection
// policy or handler unless forced, and returns Submit's error.
func (ex *Executor) refuse(j *job, rej *RejectedError, forced bool) error {
	if !forced && ex.handler != nil {
		r := &Rejection{Group: rej.Group, ID: j.taskID(), Weight: j.weight, Ctx: j.parent, Err: rej, ex: ex, j: j}
		err := ex.callHandler(r)
		// RunInCaller after the handler returned does nothing; if it won
		// the race, the task runs (or ran) and completes its own handle.
		if r.state.CompareAndSwap(rejectionOpen, rejectionClosed) {
			ex.completeRejected(j, rej, 0)
		}
		return err
	}
	switch {
	case forced:
	case ex.pol.RejectionPolicy() == policy.Discard, ex.pol.RejectionPolicy() == policy.DiscardOldest:
		ex.completeRejected(j, rej, 0)
		return nil
	case ex.pol.RejectionPolicy() == policy.CallerRuns:
		if ex.listener != nil {
			e := ex.event(j)
			e.Status, e.Err = Rejected, rej
			ex.notify(onRejected, e)
		}
		ex.runInCaller(j)
		return nil
	}
	ex.completeRejected(j, rej, 0)
	return rej
}

func (ex *Executor) callHandler(r *Rejection) (err error) {
	defer func() {
		if recover() != nil {
			err = r.Err
		}
	}()
	return ex.handler(r)
}
