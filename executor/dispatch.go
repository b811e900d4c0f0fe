package executor

import "time"

// Dispatch rules (the executor's mutex is held throughout):
//
// A waiting task holds only its place in its group's in-flight limit. It
// starts when its weight fits its group's concurrency limit and the global
// limit at once. Within a group, tasks start in FIFO order.
//
// ex.ready lists, in turn, the groups whose head task fits their own
// concurrency limit and so waits only for global room. When global room
// frees, the front group's head starts if it fits, and the group goes to the
// back of the line if its next task also fits its own limit. If the front
// head does not fit, nothing else starts until enough room has freed for it:
// a heavy task is never overtaken forever by lighter ones (the rule x/sync's
// semaphore uses), so no task starves. A group whose own running task ends
// joins the back of the line; when no other group is waiting, it is the
// front, so the freed group's next task starts at once.
//
// A group with a deep backlog blocked by its own concurrency limit is not in
// ex.ready at all, so it never delays another group while global room is
// free.

// updateReadyLocked keeps g in ex.ready exactly when its head waits only for
// global room.
func (ex *Executor) updateReadyLocked(g *group) {
	h := g.head()
	want := h != nil && g.conc.Fits(h.weight)
	switch {
	case want && !g.readyNode.InList():
		ex.ready.PushBack(&g.readyNode)
	case !want && g.readyNode.InList():
		ex.ready.Remove(&g.readyNode)
	}
}

// dispatchLocked starts waiting tasks while global room allows, groups in
// turn, putting them on the run queue. A head found past its queue timeout
// is removed instead, never run.
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
		if !ex.global.Fits(j.weight) {
			return
		}
		ex.ready.Remove(n)
		ex.startLocked(g, j)
		ex.updateReadyLocked(g)
		ex.runq.Push(j)
	}
}

// startLocked takes j's running permits and marks it running.
func (ex *Executor) startLocked(g *group, j *job) {
	if j.state == stateWaiting {
		g.waiting.Remove(&j.node)
		ex.waiting--
		if j.stopAfter != nil {
			// The run context derives from Submit's: no watcher needed.
			j.stopAfter()
			j.stopAfter = nil
		}
	}
	g.conc.Acquire(j.weight)
	ex.global.Acquire(j.weight)
	g.running.PushBack(&j.node)
	j.state = stateRunning
	g.counts.Started++
	ex.counts.Started++
}

// removeWaitingLocked takes a waiting j out of its queue, never to run, and
// counts it as st. The caller dispatches afterwards: removing a head can let
// others start.
func (ex *Executor) removeWaitingLocked(j *job, st Status) {
	g := j.g
	g.waiting.Remove(&j.node)
	ex.waiting--
	g.counts.add(st)
	ex.counts.add(st)
	ex.releaseLocked(g, j)
	ex.updateReadyLocked(g)
}

// releaseLocked ends j's admission: it gives back its place in the group's
// in-flight limit and handles a group or executor that goes idle.
func (ex *Executor) releaseLocked(g *group, j *job) {
	g.inFlight.Release(j.weight)
	ex.tasks--
	j.state = stateDone
	if g.idle() {
		ex.groupIdleLocked(g)
	}
	if ex.tasks == 0 && ex.drainWaits != nil {
		for _, c := range ex.drainWaits {
			close(c)
		}
		ex.drainWaits = nil
	}
}

// groupIdleLocked handles a group with no task left: it wakes ShutdownGroup,
// and evicts or parks the group's state. Parked idle groups are reclaimed
// oldest first past maxIdle, so the group map stays bounded by the busy
// groups plus maxIdle (plus groups kept shut down or with a breaker that is
// not closed).
func (ex *Executor) groupIdleLocked(g *group) {
	for _, c := range g.drainWaits {
		close(c)
	}
	g.drainWaits = nil
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
	ex.idle.Remove(&g.idleNode)
	if ex.groups[g.key] == g {
		delete(ex.groups, g.key)
	}
}

// batch is what a locked section decided, acted on after unlocking.
type batch struct {
	hand    few[handoff] // started tasks for parked workers
	spawn   few[*job]    // started tasks for new goroutines
	expired few[*job]    // removed past their queue timeout
}

type handoff struct {
	w worker
	j *job
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

func (l *few[T]) at(i int) T {
	if i == 0 {
		return l.one
	}
	return l.more[i-1]
}
