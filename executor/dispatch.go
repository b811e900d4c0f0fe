package executor

import (
	"math"
	"time"
)

// Dispatch rules (the executor's mutex is held throughout):
//
// A waiting task holds only its place in its group's in-flight limit. It
// starts when its weight fits its group's concurrency limit and the global
// limit at once. Within a group, tasks start in FIFO order.
//
// ex.ready lists the groups whose head task fits their own concurrency limit
// and so waits only for global room (and is no heavier than the global
// limit, which SetGlobalMaxInFlight may lower below it). A group with a deep
// backlog blocked by its own concurrency limit is not in ex.ready at all, so
// it never delays another group while global room is free.
//
// Global room goes to the groups in ex.ready by deficit round robin (DRR),
// with a quantum of one permit, in its surplus form (the deficit may go
// below zero, so that a heavy head never waits for credit at the front):
//
//   - When a group reaches the front of ex.ready and global room is not all
//     taken, its turn begins: its deficit (credit, in permits) grows by its
//     share (policy.GroupLimits.Share). ex.turn names it until the turn ends.
//   - During its turn, while its deficit is above zero, the group's head
//     starts as soon as it fits global room, and its weight is taken from
//     the deficit, which may go below zero: a debt of less than one task's
//     weight. When the deficit is zero or below, the turn ends: the group
//     goes to the back of ex.ready. A group in debt has its next turns end at
//     once, one share repaid per turn, until it has credit again. So each
//     waiting group is served permits, not tasks, in proportion to its share.
//   - A group with no task waiting keeps no credit: its deficit drops to 0
//     (a debt is kept), so an idle group that comes back gets one share per
//     turn, never a burst of saved-up credit.
//   - A group whose own concurrency limit fills during its turn leaves
//     ex.ready but keeps the turn (ex.turn) and its deficit. If no other
//     group's turn has begun when it fits its limit again (global room was
//     all taken meanwhile, typically by its own tasks), it goes back to the
//     front and resumes its turn; otherwise it joins the back. Either way it
//     loses none of the credit the interrupted turn gave it, but it keeps at
//     most one share of it, so time spent held back by its own limit never
//     turns into a burst. It gets no credit while out of ex.ready: it could
//     not use it.
//
// SetGroupLimits (limits.go) may change a group's share and concurrency
// limit at any time. The deficit is then clamped so that the bounds above
// hold under the new values: a turn under way keeps at most one new share
// of credit, and a debt stays under the new concurrency limit (the heaviest
// task the group can start).
//
// No starvation: a group whose turn has begun with credit keeps the turn
// until its head starts; if the head does not fit the global room left,
// nothing else starts until enough room has freed for it, so a heavy task is
// never overtaken forever by lighter ones (the rule x/sync's semaphore
// uses). DRR only decides whose turn comes next: a group is passed over only
// while it repays the debt of its last heavy start (at most ceil((weight-1)
// / share) turns), and between two turns of a group each other group starts
// at most its share plus one task's weight.
//
// Cost: a turn that ends without a start repays at least one permit of a
// debt that an earlier start made, so picking the next group is O(1)
// amortised per permit started, whatever the number of waiting groups; no
// step scans the groups. When global room is all taken, dispatch stops at
// once without beginning a turn.
//
// Submit's fast path (a task starts at once) applies only when its group
// has no task waiting, the task fits its limits, and ex.ready is empty: no
// group is waiting for global room, so no turn is skipped.
// Likewise a finishing task's group, when ex.ready is empty, starts its own
// next task without passing through ex.ready (startFreedLocked): the same
// start, the same charge to its deficit.

// updateReadyLocked keeps g in ex.ready exactly when its head waits only for
// global room, and in ex.backlog exactly when it has a task waiting.
func (ex *Executor) updateReadyLocked(g *group) {
	h := g.head()
	if h == nil {
		g.deficit = min(g.deficit, 0) // nothing waiting: no credit kept
		g.clusterWait = false         // the next head asks the limiter afresh
		if ex.turn == g {
			ex.turn = nil
		}
	}
	if (h != nil) != g.backlogNode.InList() {
		if h != nil {
			ex.backlog.PushBack(&g.backlogNode)
			g.backlogWin = ex.fair.win
		} else {
			ex.backlog.Remove(&g.backlogNode)
		}
	}
	// A head heavier than a lowered global limit could never start: it is
	// not in line, so it never holds a turn that blocks the other groups.
	want := h != nil && g.conc.Fits(h.weight) && h.weight <= ex.global.Limit() && !g.clusterWait
	switch {
	case want && !g.readyNode.InList():
		if ex.turn == g {
			ex.ready.PushFront(&g.readyNode) // resumes its turn
		} else {
			ex.ready.PushBack(&g.readyNode)
		}
	case !want && g.readyNode.InList():
		ex.ready.Remove(&g.readyNode)
	}
}

// beginTurnLocked starts g's turn: one share more credit, on top of at most
// one share kept from an interrupted turn, or of a debt.
func (ex *Executor) beginTurnLocked(g *group) {
	share := max(g.limits.Share, 1)
	kept := min(g.deficit, share)
	if kept > math.MaxInt-share {
		g.deficit = math.MaxInt
	} else {
		g.deficit = kept + share
	}
	if ex.turn != g {
		ex.turn = g // a pointer write costs a write barrier while the GC marks
	}
}

// dispatchLocked starts waiting tasks while global room allows, by deficit
// round robin over ex.ready, putting them on the run queue. A head found past
// its queue timeout is removed instead, never run.
func (ex *Executor) dispatchLocked(b *batch) {
	if ex.state == closed {
		return
	}
	var now time.Duration
	for n := ex.ready.Front(); n != nil; n = ex.ready.Front() {
		g := n.Value
		j := g.head()
		if ex.timeout > 0 {
			if now == 0 {
				now = ex.since()
			}
			if now-j.submitted >= ex.timeout {
				ex.removeWaitingLocked(j, Rejected)
				b.expired.add(j)
				continue
			}
		}
		if ex.turn != g {
			if ex.global.Used() >= ex.global.Limit() {
				return // no room at all: no turn begins
			}
			ex.beginTurnLocked(g)
		}
		if g.deficit <= 0 {
			// The turn ends, or a debt is repaid by one share.
			ex.turn = nil
			ex.ready.Rotate() // n, the front, goes to the back
			continue
		}
		if !ex.global.Fits(j.weight) {
			return // the head keeps the turn until room frees: never overtaken
		}
		if ex.cluster != nil {
			switch o, rej := ex.cluster.acquireLocked(g, j); o {
			case clusterWaitGlobal:
				return // as for local global room: the head keeps the turn
			case clusterWaitGroup:
				// As for its own concurrency limit: the group leaves
				// ex.ready, keeping its turn, until the limiter notifies.
				g.clusterWait = true
				ex.updateReadyLocked(g)
				continue
			case clusterRefused:
				ex.removeWaitingLocked(j, Rejected)
				b.displaced.add(displacement{j, rej})
				continue
			}
		}
		g.deficit -= j.weight
		ex.startLocked(g, j)
		ex.updateReadyLocked(g)
		ex.runq.Push(j)
	}
}

// startFreedLocked starts g's head if g, whose task just released its
// permits, would be alone in ex.ready and its head fits: exactly what
// updateReadyLocked and dispatchLocked would do then (g joins ex.ready, its
// turn begins as often as it takes to have credit, the head starts, g
// leaves ex.ready again if its limit is full), without moving g in and out
// of ex.ready. On a deep backlog in one group that is every finish, and the
// two list updates were about 6% of the flat benchmark's CPU, most of it in
// the collector's write barriers. It returns the started task, which the
// caller puts on the run queue or runs, or nil, changing nothing, when the
// general path must decide: another group waits for global room, the head
// does not fit, or a queue timeout or cluster limiter has a say.
//
// spare, if not nil, is a task that the caller keeps for reuse: a light
// task takes it (and leaves nil).
func (ex *Executor) startFreedLocked(g *group, spare **goTask) *job {
	// A light task at the head (go.go) starts as a job made for it here,
	// without passing through g.waiting.
	h := g.waiting.front
	w := 1
	if h != nil {
		w = h.weight
	} else if len(g.light.fns) == 0 { // empty (lightQueue.pop)
		return nil
	}
	if ex.ready.Len() != 0 || ex.state == closed || ex.timeout > 0 || ex.cluster != nil ||
		g.clusterWait || !g.conc.Fits(w) || !ex.global.Fits(w) {
		return nil
	}
	ex.chargeTurnLocked(g, w)
	if h != nil {
		ex.startLocked(g, h)
	} else {
		h = ex.startLightLocked(g, spare)
	}
	// g stays in ex.backlog while it has a head, and stays out of ex.ready
	// while no head can fit its own limit: nothing to update then, as on
	// every start of a group that runs at its limit. (Its limit full is
	// asked first: it needs no load of the next task, a cache miss.)
	if !g.conc.Fits(1) && g.queued() > 0 {
		return h
	}
	ex.updateReadyLocked(g)
	return h
}

// chargeTurnLocked charges a start of w permits to g's turn, g being alone
// in line: a turn without credit ends, and g begins the next one.
func (ex *Executor) chargeTurnLocked(g *group, w int) {
	for ex.turn != g || g.deficit <= 0 {
		ex.beginTurnLocked(g)
	}
	g.deficit -= w
}

// startLocked takes j's running permits and marks it running.
func (ex *Executor) startLocked(g *group, j *job) {
	if j.state == stateWaiting {
		if g.queued() == 1 && ex.lanes {
			// A lane stays open only behind a waiting task: it closes
			// unless it has tasks to move behind this one.
			ex.closeIdleLaneLocked(g)
		}
		g.waiting.Remove(j)
		ex.waiting--
		if x := j.x.Load(); x != nil && x.stopAfter != nil {
			// The run context derives from Submit's: no watcher needed.
			x.stopAfter()
			x.stopAfter = nil
		}
	}
	ex.runLocked(g, j)
}

// startLightLocked starts the light task at g's head, which has nothing
// ahead of it in g.waiting, as startLocked would once head made it a job,
// taking *spare for it if not nil (lightTaskFromLocked).
func (ex *Executor) startLightLocked(g *group, spare **goTask) *job {
	j := &ex.lightTaskFromLocked(g, ex.popLightLocked(g), spare).job
	ex.runLocked(g, j)
	return j
}

// popLightLocked takes the light task at g's head out of the queue, which
// has nothing ahead of it in g.waiting, to start it.
func (ex *Executor) popLightLocked(g *group) goFn {
	fn := g.light.pop()
	ex.waiting--
	if ex.lanes && g.queued() == 0 {
		// As in startLocked: the lane closes unless it has tasks to
		// move behind this one.
		ex.closeIdleLaneLocked(g)
	}
	return fn
}

// closeIdleLaneLocked moves g's lane to its queue, which is empty, and
// closes the lane if it held nothing.
func (ex *Executor) closeIdleLaneLocked(g *group) {
	ex.spliceLocked(g, g.lane.take(closeIfIdle, g.laneBuf))
}

// handsOffLocked reports whether finish may hand j's running permits to
// the light task at the head of j's group (handOffLocked): exactly when the
// general path (release, then startFreedLocked) would start that task, on
// the permits just released, and keep j for reuse. j is a reusable task
// whose handle has no listener to tell.
func (ex *Executor) handsOffLocked(g *group, j *job) bool {
	return !noHandOff && j.reusable() && g.waiting.front == nil && len(g.light.fns) != 0 && // a light head (lightQueue.pop)
		ex.ready.Len() == 0 && ex.state != closed && !g.clusterWait && !ex.drainWanted.Load() &&
		j.x.Load() == nil && // keepLocked's condition
		// The head (weight 1, as j) fits once j's permits are back: no
		// limit was lowered under what is running.
		g.conc.Used() <= g.conc.Limit() && ex.global.Used() <= ex.global.Limit()
}

// noHandOff, set by tests only, makes every finish take the general path,
// to compare the two.
var noHandOff bool

// handOffLocked completes j, as finish's general path would, and starts the
// light task at its group's head as j itself, reused: j's running permits
// (one at the group's concurrency limit and one at the global limit, as
// the head's weight is 1) pass to it as they are, and so does j's place
// among g's running tasks, so that neither limit is written. A deep
// backlog of light tasks in one group has a handoff at every finish; on two
// cores, lines that neither core writes stop moving between them.
func (ex *Executor) handOffLocked(g *group, j *job, st Status) *job {
	if trackRunning {
		g.trackLocked(j, false)
	}
	g.counts.add(st)
	ex.counts.add(st)
	// j's admission ends (endAdmissionLocked; g is not idle: its head
	// starts) and j completes (publishReusable).
	g.inFlight.Release(1)
	ex.tasks--
	j.publishReusable(st)
	// The head leaves the queue and starts as j (startLightLocked).
	fn := ex.popLightLocked(g)
	ex.chargeTurnLocked(g, 1)
	j.body.(*goTask).reset(fn, stateRunning)
	if trackRunning {
		g.trackLocked(j, true)
	}
	ex.countStartLocked(g, 1)
	if g.queued() == 0 {
		ex.updateReadyLocked(g) // no head left: g leaves the backlog
	}
	return j
}

// runLocked takes j's running permits and marks it running.
func (ex *Executor) runLocked(g *group, j *job) {
	g.conc.Acquire(j.weight)
	ex.global.Acquire(j.weight)
	g.running++
	if trackRunning {
		g.trackLocked(j, true)
	}
	j.state = stateRunning
	ex.countStartLocked(g, j.weight)
}

// removeWaitingLocked takes a waiting j out of its queue, never to run, and
// counts it as st. The caller dispatches afterwards: removing a head can let
// others start.
func (ex *Executor) removeWaitingLocked(j *job, st Status) {
	g := j.g
	ex.closeLaneLocked(g) // j may still be in the lane
	if x := j.x.Load(); x != nil && x.stopAfter != nil {
		// Never runs: Submit's context no longer needs watching (nor keeps j).
		x.stopAfter()
		x.stopAfter = nil
	}
	g.waiting.Remove(j)
	ex.waiting--
	g.counts.add(st)
	ex.counts.add(st)
	ex.releaseLocked(g, j)
	ex.updateReadyLocked(g)
}

// releaseLocked ends j's admission: it gives back its place in the group's
// in-flight limit and handles a group or executor that goes idle. j's handle
// is completed later, outside the lock: until then j counts as unsettled
// (drain.go).
func (ex *Executor) releaseLocked(g *group, j *job) {
	ex.endAdmissionLocked(g, j)
	j.released = true
	ex.unsettleLocked(g, j)
}

// unsettleLocked counts j, whose admission has ended, as unsettled until
// its handle has completed (drain.go); ex.settled ends that.
func (ex *Executor) unsettleLocked(g *group, j *job) {
	g.unsettled.Add(1)
	ex.unsettled.Add(1)
}

// endAdmissionLocked is releaseLocked for a j whose handle completes in the
// same locked section (finish, without a listener), so that it need not be
// unsettled.
func (ex *Executor) endAdmissionLocked(g *group, j *job) {
	g.inFlight.Release(j.weight)
	ex.tasks--
	j.state = stateDone
	if g.idle() {
		ex.groupIdleLocked(g)
	}
}

// groupIdleLocked handles a group with no task left: it wakes ShutdownGroup,
// and evicts or parks the group's state. Parked idle groups are reclaimed
// oldest first past maxIdle, so the group map stays bounded by the busy
// groups plus maxIdle (plus groups kept shut down or with a breaker that is
// not closed).
func (ex *Executor) groupIdleLocked(g *group) {
	if g.timer != nil {
		g.timer.Stop()
		g.timer = nil
	}
	switch {
	case g.evict:
		ex.dropLocked(g)
	case g.shutdown:
	default:
		ex.idle.Remove(&g.idleNode) // already idle: now the most recent
		ex.idle.PushBack(&g.idleNode)
		for ex.idle.Len() > ex.maxIdle {
			old := ex.idle.Front().Value
			if !old.reclaimable() {
				// Kept, out of the idle list, until used and idle again.
				ex.idle.Remove(&old.idleNode)
				continue
			}
			ex.dropLocked(old)
		}
	}
}

func (ex *Executor) dropLocked(g *group) {
	if ex.turn == g {
		ex.turn = nil
	}
	ex.idle.Remove(&g.idleNode)
	if ex.groups[g.key] == g {
		delete(ex.groups, g.key)
		ex.unindexLocked(g)
		ex.hint.CompareAndSwap(g, nil)
	}
}

// batch is what a locked section decided, acted on after unlocking.
type batch struct {
	hand      few[handoff]      // started tasks for parked workers
	spawn     few[*job]         // started tasks for new goroutines
	expired   few[*job]         // removed past their queue timeout
	displaced few[displacement] // removed under DiscardOldest
}

type displacement struct {
	j   *job
	rej *RejectedError
}

type handoff struct {
	w worker
	j *job
}

// empty reports whether b holds nothing to act on.
func (b *batch) empty() bool {
	return b.hand.n|b.spawn.n|b.expired.n|b.displaced.n == 0
}

// reset empties b for reuse, keeping what it allocated.
func (b *batch) reset() {
	b.hand.reset()
	b.spawn.reset()
	b.expired.reset()
	b.displaced.reset()
}

// few is a list that allocates only past its first element.
type few[T any] struct {
	n    int
	one  T
	more []T
}

func (l *few[T]) add(v T) {
	if l.n == 0 {
		l.one = v
	} else {
		l.more = append(l.more, v)
	}
	l.n++
}

// reset empties l, keeping the room it allocated. It drops its elements:
// they hold jobs.
func (l *few[T]) reset() {
	if l.n == 0 {
		return
	}
	var zero T
	l.one = zero
	clear(l.more)
	l.more = l.more[:0]
	l.n = 0
}

func (l *few[T]) at(i int) T {
	if i == 0 {
		return l.one
	}
	return l.more[i-1]
}
