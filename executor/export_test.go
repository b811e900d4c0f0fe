package executor

import (
	"fmt"
	"runtime"
)

// The invariant checks list every group's running tasks, which the
// executor only counts.
func init() { trackRunning = true }

// DoubleCompletions exposes the count of attempts to complete a handle twice.
func DoubleCompletions() int64 { return doubleCompletions.Load() }

// checkList verifies l's links and length.
func checkList(l *jobList) string {
	n := 0
	var prev *job
	for j := l.front; j != nil; j = j.next {
		if j.prev != prev {
			return "a job's prev link is wrong"
		}
		prev = j
		n++
	}
	switch {
	case l.back != prev:
		return "back is not the last job"
	case n != l.n:
		return "length does not match the links"
	}
	return ""
}

// CheckInvariants verifies the executor's bookkeeping against its lists; it
// returns a description of the first inconsistency, or "".
func (ex *Executor) CheckInvariants() string {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	waiting, tasks, running := 0, 0, 0
	for k, g := range ex.groups {
		if g.key != k {
			return "group key mismatch"
		}
		w, r := 0, 0
		if msg := checkList(&g.waiting); msg != "" {
			return "waiting queue: " + msg
		}
		if len(g.runningSet) != g.running {
			return "running count does not match running tasks"
		}
		for j := g.waiting.Front(); j != nil; j = j.next {
			if j.state != stateWaiting {
				return "non-waiting task in a waiting queue"
			}
			w += j.weight
		}
		if msg := checkLight(ex, g); msg != "" {
			return msg + ": " + k
		}
		w += g.light.Len() // each of weight 1
		for j := range g.runningSet {
			if j.state != stateRunning {
				return "a task counted running is not running"
			}
			r += j.weight
		}
		if g.conc.Used() != r {
			return "group concurrency permits do not match running tasks"
		}
		if g.inFlight.Used() != w+r {
			return "group in-flight permits do not match admitted tasks"
		}
		// A limit may have less room than is in use only after it was
		// lowered (SetGroupLimits): Sem.Acquire panics beyond the limit.
		if g.limits.MaxInFlight != g.inFlight.Limit() || g.limits.MaxConcurrency != g.conc.Limit() {
			return "group limits and permits disagree: " + k
		}
		// The head as head() would make it, without making it: a
		// light task weighs 1.
		h := g.waiting.Front()
		if h == nil && g.light.Len() > 0 {
			h = &job{weight: 1}
		}
		if want := h != nil && g.conc.Fits(h.weight) && h.weight <= ex.global.Limit() && !g.clusterWait; want != g.readyNode.InList() {
			return "ready list membership wrong for group " + k
		}
		if (h != nil) != g.backlogNode.InList() {
			return "backlog list membership wrong for group " + k
		}
		if h == nil && g.clusterWait {
			return "group with nothing waiting waits for a cluster notify: " + k
		}
		if h == nil && g.deficit > 0 {
			return "group with nothing waiting keeps credit: " + k
		}
		if g.deficit < 0 && -g.deficit >= g.conc.Limit() {
			return "group debt larger than a task: " + k
		}
		if msg := checkLane(ex, g); msg != "" {
			return msg + ": " + k
		}
		waiting += g.queued()
		tasks += g.tasks()
		running += r
	}
	if ex.waiting != waiting || ex.tasks != tasks {
		return "executor task counts do not match groups"
	}
	if ex.global.Used() != running {
		return "global permits do not match running tasks"
	}
	// A spare task (recycle.go) is done, in no list, with nothing extra.
	for _, l := range [][]*goTask{ex.free, ex.old} {
		for _, t := range l {
			if t.state != stateDone || t.next != nil || t.prev != nil || t.x.Load() != nil || !t.reusable() {
				return "a spare Go task is not a completed reusable one"
			}
			if _, running := t.g.runningSet[&t.job]; running {
				return "a spare Go task is still running"
			}
		}
	}
	// With a cluster global limiter, the front may wait for its permits.
	clusterGlobal := ex.cluster != nil && ex.cluster.global != nil
	if f := ex.ready.Front(); f != nil && ex.state != closed && ex.global.Fits(headWeight(f.Value)) && !clusterGlobal {
		return "ready front fits global room but did not start"
	}
	if t := ex.turn; t != nil {
		if t.queued() == 0 {
			return "the turn is held by a group with nothing waiting"
		}
		if t.readyNode.InList() && ex.ready.Front() != &t.readyNode {
			return "the group holding the turn is in line but not at the front"
		}
	}
	return ""
}

// WatchesParent reports whether h still has a watcher registered on its
// Submit context.
func WatchesParent[T any](h *Handle[T]) bool {
	ex := h.g.ex
	ex.mu.Lock()
	defer ex.mu.Unlock()
	x := h.x.Load()
	return x != nil && x.stopAfter != nil
}

// checkLane verifies g's lane (lane.go) against its state.
func checkLane(ex *Executor, g *group) string {
	l := &g.lane
	l.mu.Lock()
	defer l.mu.Unlock()
	n, w := 0, 0
	var prev *job
	for j := l.jobs.front; j != nil; j = j.next {
		if j.prev != prev || j.state != stateWaiting || j.g != g {
			return "a lane's task is mislinked or not waiting"
		}
		prev = j
		n++
		w += j.weight
	}
	for _, fn := range l.fns {
		if fn == nil {
			return "a lane's light task has no function"
		}
	}
	n += len(l.fns)
	w += len(l.fns)
	switch {
	case prev != l.jobs.back || n != l.jobs.n+len(l.fns) || w != l.w:
		return "a lane's count or back does not match its tasks"
	case len(l.fns) > 0 && !ex.light:
		return "a lane holds light tasks where none may come in"
	case !l.open && n > 0:
		return "a closed lane holds tasks"
	case !l.open:
		return ""
	case !ex.lanes || ex.state != open || g.shutdown || g.evict:
		return "a lane open where none may be"
	case g.queued() == 0:
		return "a lane open with no task waiting ahead"
	case g.inFlight.Used()+l.w+l.credit > g.inFlight.Limit():
		return "lane credit beyond the in-flight limit"
	case g.queued()+n+l.credit > g.limits.QueueThreshold:
		return "lane credit beyond the queue threshold"
	case l.maxW > min(g.conc.Limit(), ex.global.Limit()):
		return "a lane takes tasks heavier than can start"
	}
	return ""
}

// LaneOpen reports whether group's lane is open (lane.go).
func LaneOpen(ex *Executor, group string) bool {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	g := ex.groups[group]
	if g == nil {
		return false
	}
	g.lane.mu.Lock()
	defer g.lane.mu.Unlock()
	return g.lane.open
}

// LaneLen returns how many tasks wait in group's lane, admitted and not
// yet moved to its queue.
func LaneLen(ex *Executor, group string) int {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	g := ex.groups[group]
	if g == nil {
		return 0
	}
	g.lane.mu.Lock()
	defer g.lane.mu.Unlock()
	return g.lane.jobs.n + len(g.lane.fns)
}

// checkLight verifies g's light tasks (go.go): only where they may come in,
// each with its function, those taken cleared.
func checkLight(ex *Executor, g *group) string {
	q := &g.light
	if q.next < 0 || q.next > len(q.fns) || q.next > 0 && q.next == len(q.fns) {
		return "light queue's front out of range"
	}
	if q.Len() > 0 && !ex.light {
		return "light tasks where none may come in"
	}
	for i, fn := range q.fns {
		if (fn == nil) != (i < q.next) {
			return "light queue's functions do not match its front"
		}
	}
	return ""
}

// headWeight returns the weight of g's head, as head() would make it.
func headWeight(g *group) int {
	if h := g.waiting.Front(); h != nil {
		return h.weight
	}
	return 1 // a light task
}

// Hint returns the key of the group Submit tries first (ex.hint), and
// whether that group is the one the executor keeps under that key.
func Hint(ex *Executor) (key string, current bool) {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	g := ex.hint.Load()
	if g == nil {
		return "", false
	}
	return g.key, ex.groups[g.key] == g
}

// DrainState describes the drain bookkeeping, for debugging a hang.
func DrainState(ex *Executor) string {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	s := fmt.Sprintf("tasks %d unsettled %d drainWanted %v drainWaits %d drainGroups %d state %d",
		ex.tasks, ex.unsettled.Load(), ex.drainWanted.Load(), len(ex.drainWaits), len(ex.drainGroups), ex.state)
	for k, g := range ex.groups {
		s += fmt.Sprintf("; %s: tasks %d unsettled %d pending %d", k, g.tasks(), g.unsettled.Load(), g.pending)
	}
	return s
}

// LaneAdmitted returns how many tasks came in through lanes, counted once
// moved to their queue.
func LaneAdmitted(ex *Executor) uint64 {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	return ex.laneAdmitted
}

// SetHandOff turns finish's handoff to a light task (handOffLocked) on or
// off, for every executor, and returns the previous setting.
func SetHandOff(on bool) bool {
	prev := !noHandOff
	noHandOff = !on
	return prev
}

// LightAdmitted returns how many of LaneAdmitted's tasks were light ones
// (go.go).
func LightAdmitted(ex *Executor) uint64 {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	return ex.lightAdmitted
}

// LanesEnabled reports whether ex's configuration lets lanes open.
func LanesEnabled(ex *Executor) bool { return ex.lanes }

// WaitIdle waits until ex has no admitted task; it allocates nothing.
func WaitIdle(ex *Executor) {
	for {
		ex.mu.Lock()
		n := ex.tasks
		ex.mu.Unlock()
		if n == 0 {
			return
		}
		runtime.Gosched()
	}
}

// SpareTasks returns how many Go tasks ex keeps for reuse, and whether a
// collection is to age them.
func SpareTasks(ex *Executor) (n int, aging bool) {
	ex.spare.mu.Lock()
	n = len(ex.spare.tasks) - ex.spare.next
	ex.spare.mu.Unlock()
	ex.mu.Lock()
	defer ex.mu.Unlock()
	return n + len(ex.free) + len(ex.old), ex.aging
}
