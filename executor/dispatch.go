package executor

import (
	"math"
	"sync"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/internal/queue"
	"github.com/groupexec/groupexec/policy"
)

// Dispatch: global room for the groups that wait for it.
//
// A waiting task holds only its place in its group's in-flight limit. It
// starts when its weight fits its group's concurrency limit and the global
// limit at once. Within a group, tasks start in FIFO order.
//
// A group whose head fits its own concurrency limit and waits only for
// global room is in the dispatcher's ready list (wantsGlobalLocked); a group
// with a backlog blocked by its own concurrency limit is not, so it never
// delays another group while global room is free. While the ready list is
// not empty (globalRoom.waiters > 0), no start takes global room directly:
// a finish gives its permits back and the dispatcher hands them out, under
// its mutex. While it is empty, which is whenever groups do not contend for
// global room, starts and finishes never take the dispatcher's mutex.
//
// A group changes its own state under its own mutex only. When that change
// may move it in or out of the ready list, the goroutine that made it calls
// resync after unlocking: resync takes the dispatcher's mutex, then the
// group's, and puts the group where its state says (placeLocked). Between
// the two, the list may be stale; the dispatcher re-checks every group it
// looks at, so a stale entry costs a look, never a wrong start.
//
// No start is lost: a group joins the ready list and then dispatches, under
// the dispatcher's mutex; a finish gives its permits back and then, if any
// group is in the list, dispatches. Whichever comes second sees the other's
// write (the atomics are sequentially consistent).
//
// Global room goes to the groups in the ready list by deficit round robin
// (DRR), with a quantum of one permit, in its surplus form (the deficit may
// go below zero, so that a heavy head never waits for credit at the front):
//
//   - When a group reaches the front of the list and global room is not all
//     taken, its turn begins: its deficit (credit, in permits) grows by its
//     share (policy.GroupLimits.Share). disp.turn names it until the turn
//     ends.
//   - During its turn, while its deficit is above zero, the group's head
//     starts as soon as it fits global room, and its weight is taken from
//     the deficit, which may go below zero: a debt of less than one task's
//     weight. When the deficit is zero or below, the turn ends: the group
//     goes to the back of the list. A group in debt has its next turns end
//     at once, one share repaid per turn, until it has credit again. So
//     each waiting group is served permits, not tasks, in proportion to its
//     share.
//   - A group with no task waiting keeps no credit: its deficit drops to 0
//     (a debt is kept), so an idle group that comes back gets one share per
//     turn, never a burst of saved-up credit.
//   - A group whose own concurrency limit fills during its turn leaves the
//     list but keeps the turn and its deficit. If no other group's turn has
//     begun when it fits its limit again, it goes back to the front and
//     resumes its turn; otherwise it joins the back. It keeps at most one
//     share of credit, so time spent held back by its own limit never turns
//     into a burst.
//
// SetGroupLimits (limits.go) may change a group's share and concurrency
// limit at any time. The deficit is then clamped so that the bounds above
// hold under the new values.
//
// No starvation: a group whose turn has begun with credit keeps the turn
// until its head starts; if the head does not fit the global room left,
// nothing else starts until enough room has freed for it, so a heavy task is
// never overtaken forever by lighter ones (the rule x/sync's semaphore
// uses). Between two turns of a group each other group starts at most its
// share plus one task's weight.
//
// Starts made while no group waits for global room do not pass through DRR:
// there is no contention to arbitrate, and every group gets what its own
// limits allow.

// dispatcher is the state shared by the groups that wait for global room.
type dispatcher struct {
	mu    sync.Mutex
	ready queue.List[*group] // groups whose head waits only for global room, in turn
	turn  *group             // the group whose turn is under way, or nil
	known queue.List[*group] // groups that waited for global room in this window (fair.go)
	fair  fairness
}

// wantsGlobalLocked reports whether g's head waits only for global room:
// it fits g's concurrency limit and could ever fit the global limit, and no
// cluster limiter holds it (g.mu held).
func (ex *Executor) wantsGlobalLocked(g *group) bool {
	w := 1 // a light task's (light.go)
	if h := g.waiting.front; h != nil {
		w = h.weight
	} else if g.light.n == 0 {
		return false
	}
	return !g.clusterWait && !g.dead && g.running <= g.limits.MaxConcurrency-w &&
		w <= ex.global.max() && ex.stateNow() != closed
}

// resync puts g where its state says in the ready list, then dispatches.
// Started tasks go in b.
func (ex *Executor) resync(g *group, b *batch) {
	d := &ex.disp
	d.mu.Lock()
	g.mu.Lock()
	ex.resyncLocked(g, b)
}

// resyncLocked is resync with the dispatcher's mutex and g's held; it
// releases both.
func (ex *Executor) resyncLocked(g *group, b *batch) {
	if g.transit > 0 {
		ex.global.give(g.transit)
		g.transit = 0
		ex.endLocked(g, b) // it may be idle now
	}
	ex.placeLocked(g)
	g.mu.Unlock()
	ex.dispatchLocked(b)
	ex.disp.mu.Unlock()
}

// dispatch hands free global room to the groups that wait for it.
func (ex *Executor) dispatch(b *batch) {
	d := &ex.disp
	d.mu.Lock()
	ex.dispatchLocked(b)
	d.mu.Unlock()
}

// placeLocked keeps g in the ready list exactly when its head waits only
// for global room (the dispatcher's mutex and g.mu held).
func (ex *Executor) placeLocked(g *group) {
	d := &ex.disp
	g.resync = false
	ex.dropCreditLocked(g)
	want := ex.wantsGlobalLocked(g)
	switch {
	case want && !g.inReady:
		if d.turn == g {
			d.ready.PushFront(&g.readyNode) // resumes its turn
		} else {
			d.ready.PushBack(&g.readyNode)
		}
		g.inReady = true
		ex.global.waiters.Add(1)
		if !g.known {
			d.known.PushBack(&g.knownNode)
			g.known = true
		}
	case !want && g.inReady:
		d.ready.Remove(&g.readyNode)
		g.inReady = false
		ex.global.waiters.Add(-1)
	}
}

// dropCreditLocked applies the rule that a group with nothing waiting
// keeps no credit (a debt is kept) and no turn: if g's queue is empty, or
// was empty at some point since the dispatcher last looked, which a start
// made without the dispatcher (startFreedLocked) may have done.
func (ex *Executor) dropCreditLocked(g *group) {
	if g.queued() > 0 && g.emptied == g.creditAt {
		return
	}
	g.creditAt = g.emptied
	g.deficit = min(g.deficit, 0)
	if d := &ex.disp; d.turn == g {
		d.turn = nil
	}
}

// beginTurnLocked starts g's turn: one share more credit, on top of at most
// one share kept from an interrupted turn, or of a debt.
func (ex *Executor) beginTurnLocked(g *group) {
	ex.dropCreditLocked(g)
	share := max(g.limits.Share, 1)
	kept := min(g.deficit, share)
	if kept > math.MaxInt-share {
		g.deficit = math.MaxInt
	} else {
		g.deficit = kept + share
	}
	ex.disp.turn = g
}

// dispatchLocked starts waiting tasks while global room allows, by deficit
// round robin over the ready list, putting them in b. A head found past its
// queue timeout is removed instead, never run. The dispatcher's mutex is
// held; each group's is taken in turn.
func (ex *Executor) dispatchLocked(b *batch) {
	d := &ex.disp
	for n := d.ready.Front(); n != nil; n = d.ready.Front() {
		g := n.Value
		if d.turn != g && ex.global.used.Load() >= ex.global.limit.Load() {
			return // no room at all: no turn begins (asked before locking g)
		}
		g.mu.Lock()
		if !ex.wantsGlobalLocked(g) {
			ex.placeLocked(g) // stale: out of the list
			g.mu.Unlock()
			continue
		}
		j := g.headLocked()
		if ex.timeout > 0 {
			// Read under g's lock, for each group: a reading taken
			// before it (at the pass's first group) is older by the wait
			// for this lock, and a head whose deadline passed meanwhile
			// would start, having waited longer than the timeout.
			now := ex.since()
			if now-j.submitted >= ex.timeout {
				ex.removeWaitingLocked(g, j, Rejected)
				b.expired.add(j)
				ex.armLocked(g, now)
				ex.endLocked(g, b)
				g.mu.Unlock()
				continue
			}
		}
		if g.br != nil {
			if err := breakerRefusal(g, j); err != nil {
				ex.removeWaitingLocked(g, j, Rejected)
				r := refusal{limit: LimitBreaker, err: err, forced: true}
				b.displaced.add(displacement{j, r.error(g.key, j.taskID(), j.weight)})
				ex.endLocked(g, b)
				g.mu.Unlock()
				continue
			}
		}
		if d.turn != g {
			if ex.global.used.Load() >= ex.global.limit.Load() {
				g.mu.Unlock()
				return // no room at all: no turn begins
			}
			ex.beginTurnLocked(g)
		}
		if g.deficit <= 0 {
			// The turn ends, or a debt is repaid by one share.
			d.turn = nil
			d.ready.Rotate() // g, the front, goes to the back
			g.mu.Unlock()
			continue
		}
		if !ex.global.take(j.weight) {
			g.mu.Unlock()
			return // the head keeps the turn until room frees: never overtaken
		}
		var ps [2]LimiterPermit
		if ex.cluster != nil {
			o, r, cps := ex.cluster.acquire(g.key, j.weight)
			if o != clusterGranted {
				ex.global.give(j.weight)
			}
			switch o {
			case clusterWaitGlobal:
				g.mu.Unlock()
				return // as for local global room: the head keeps the turn
			case clusterWaitGroup:
				// As for its own concurrency limit: the group leaves the
				// list, keeping its turn, until the limiter notifies.
				g.clusterWait = true
				ex.placeLocked(g)
				g.mu.Unlock()
				continue
			case clusterRefused:
				ex.removeWaitingLocked(g, j, Rejected)
				b.displaced.add(displacement{j, r.error(g.key, j.taskID(), j.weight)})
				ex.endLocked(g, b)
				g.mu.Unlock()
				continue
			}
			ps = cps
		}
		g.deficit -= j.weight
		ex.startLocked(g, j, ps, b)
		full := ex.countFairLocked(g, j.weight)
		ex.placeLocked(g)
		if g.deficit <= 0 && g.inReady {
			// The turn ends with the start that used its credit: g, still
			// the front, goes to the back, instead of at the next look at
			// g, a second lock of g. On the grouped batch with Go at
			// GOMAXPROCS 1: 0.89x the time a task.
			d.turn = nil
			d.ready.Rotate()
		}
		g.mu.Unlock()
		if full {
			ex.endWindowLocked()
		}
	}
}

// breakerRefusal returns the error with which g's breaker, not nil,
// refuses j, a task that waited in g's queue, as it would start, or nil:
// ticketRefusal of the ticket j was admitted with. The callers check
// g.br first, so that a group without a breaker pays no call.
func breakerRefusal(g *group, j *job) error {
	x := j.x.Load()
	if x == nil || !x.hasTicket() {
		return nil // the breaker was not asked at its admission
	}
	return ticketRefusal(g.br, &x.ticket)
}

// ticketRefusal returns the error with which br refuses to start a task
// that holds t, or nil. br let the task through when t was taken, but may
// have opened since: while the task waited in its group's queue, or while
// admit asked it with the group's lock released (allow). The task is
// refused if br is open now, or half-open and t is not one of its probes.
// State only reads, so br calls no user code (OnStateChange) under the
// group's lock; so an open breaker past its Timeout still refuses, until a
// new task is admitted as its probe.
func ticketRefusal(br *breaker.CircuitBreaker, t *breaker.Ticket) error {
	switch br.State() {
	case breaker.StateOpen:
		return breaker.ErrOpenState
	case breaker.StateHalfOpen:
		if !t.Probe() {
			return breaker.ErrTooManyRequests
		}
	}
	return nil
}

// startFreedLocked starts g's head on the global permits (w of them) that
// g's finishing task has just released, if nothing else has a claim on
// them: no group waits for global room, g's head fits its own limits and
// no cluster limiter has a say. It returns the started task, or nil. The
// permits pass from the finished task to the head without passing through
// the shared count when the weights are equal.
//
// Otherwise the permits go back. If groups wait for global room, or g's
// head now does, they go back through the dispatcher (g.transit, given
// back by resync): under its mutex, together with g's return to the ready
// list and the dispatch, so that no other dispatch hands them out while g
// is on its way back into line. Deficit round robin depends on it: a group
// whose task finishes must not lose its turn to one that happens to
// dispatch first.
func (ex *Executor) startFreedLocked(g *group, w int, b *batch) *job {
	h := g.waiting.front
	hw := 1 // a light head's weight (light.go)
	if h != nil {
		hw = h.weight
	}
	// With a queue timeout or a breaker no task is light: h is not nil if
	// it is read.
	if g.queued() > 0 && ex.startsOnFreedLocked(g, hw) &&
		(ex.timeout <= 0 || ex.since()-h.submitted < ex.timeout) && (g.br == nil || breakerRefusal(g, h) == nil) {
		// The head starts if the permits in use after its start fit the
		// limit, which SetGlobalMaxInFlight may have lowered under them.
		fits := true
		switch used, limit := ex.global.used.Load(), ex.global.limit.Load(); {
		case hw <= w && used-int64(w-hw) <= limit:
			if hw < w {
				ex.global.give(w - hw)
				b.gave = true
			}
		case hw > w && ex.global.take(hw-w):
		default:
			fits = false
		}
		if fits {
			h = g.headLocked()
			ex.startLocked(g, h, [2]LimiterPermit{}, nil)
			return h
		}
	}
	if ex.global.waiters.Load() > 0 || ex.wantsGlobalLocked(g) {
		g.transit += w
		return nil
	}
	ex.global.give(w)
	b.gave = true
	return nil
}

// startsOnFreedLocked reports whether g's head, of weight hw, may start on
// the permits g's finishing task has just released, as far as anything but
// the global count and the queue timeout says: no group waits for global
// room (nor g itself), no cluster limiter has a say, and the head fits g's
// concurrency limit (the finished task's permits are back).
func (ex *Executor) startsOnFreedLocked(g *group, hw int) bool {
	return !g.inReady && !g.clusterWait && ex.cluster == nil && ex.stateNow() != closed &&
		g.running <= g.limits.MaxConcurrency-hw && ex.global.waiters.Load() == 0
}

// startLocked marks waiting j started, its global permits taken: it leaves
// the queue and takes its running permits. A task that needs a new
// goroutine or a wake-up goes in b, unless b is nil (the caller runs it).
func (ex *Executor) startLocked(g *group, j *job, ps [2]LimiterPermit, b *batch) {
	// Submit's context, if it can end, is left to j's worker to ask
	// (endedAtStart): the watcher's stop, or the context itself if j
	// starts unwatched, is user code, not called under the group's lock.
	ex.dequeueLocked(g, j)
	if ps[0] != nil || ps[1] != nil {
		x := j.extra()
		x.cluster, x.bound = ps, true
	}
	ex.runLocked(g, j)
	if b != nil {
		ex.launchLocked(j, b)
	}
}

// dequeueLocked takes j out of g's queue.
func (ex *Executor) dequeueLocked(g *group, j *job) {
	g.waiting.Remove(j)
	ex.dequeuedLocked(g)
}

// dequeuedLocked counts a task out of g's queue.
func (ex *Executor) dequeuedLocked(g *group) {
	if ex.queueLimit != policy.Unlimited {
		if g.keepQueueRoom {
			g.keepQueueRoom = false // the place passes to the task that displaced it (displaceLocked)
		} else {
			ex.waiting.Add(-1)
		}
	}
	if g.queued() != 0 {
		return
	}
	if g.laneOpen.Load() {
		// The queue is gone, however it went (started by a finish or by
		// the dispatcher, cancelled): the lane closes, or the tasks
		// appended meanwhile become the queue (lane.go). Then the
		// backlog goes on: those tasks waited behind it, so g keeps its
		// credit, its turn and its fairness window.
		win := g.backlogWin
		ex.drainLaneLocked(g, false, true)
		if g.queued() > 0 {
			g.backlogWin = win
			return
		}
	}
	g.emptied++
	g.clusterWait = false // the next head asks the limiter afresh
}

// runLocked takes j's running permits in g (the global ones are taken) and
// marks it running.
func (ex *Executor) runLocked(g *group, j *job) {
	g.running += j.weight
	g.runningTasks++
	g.counts.Started++
	g.served += uint64(j.weight)
	j.state = stateRunning
	if trackRunning {
		g.trackLocked(j, true)
	}
}

// removeWaitingLocked takes waiting j out of g's queue, never to run, and
// counts it as st. The caller completes it after unlocking and resyncs g
// (its head may have changed); completeRemoved stops the watcher on
// Submit's context, if any, outside the lock.
func (ex *Executor) removeWaitingLocked(g *group, j *job, st Status) {
	if g.waiting.front == j {
		// The group waited for its cluster limiter on j's behalf (j's
		// weight): the next head asks the limiter afresh, for its own.
		g.clusterWait = false
	}
	ex.dequeueLocked(g, j)
	g.inFlight -= j.weight
	g.counts.add(st)
	j.state = stateDone
	ex.unsettleLocked(g, j)
	g.resync = true
}
