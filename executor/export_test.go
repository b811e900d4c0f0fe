package executor

import (
	"fmt"
	"runtime"

	"github.com/groupexec/groupexec/policy"
)

// The invariant checks list every group's running tasks, which the
// executor only counts.
func init() { trackRunning = true }

// HandOffs returns the number of light tasks started by a handoff.
func HandOffs() int64 { return handOffs.Load() }

// LanePushes returns the Submit tasks appended to a group's lane so far.
func LanePushes() int64 { return lanePushes.Load() }

// LightQueued returns the number of light tasks waiting in group, and
// whether the executor queues light tasks at all.
func (ex *Executor) LightQueued(group string) (int, bool) {
	g := ex.groups.load(group)
	if g == nil {
		return 0, ex.light
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.light.n, ex.light
}

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

// CheckInvariants verifies the executor's bookkeeping against its lists,
// with the dispatcher and every group locked; it returns a description of
// the first inconsistency, or "". A group made while it runs is not
// locked, and may hold permits or queued tasks the sums miss: a mismatch of
// the executor-wide counts is reported only if it lasts.
func (ex *Executor) CheckInvariants() string {
	var msg string
	for try := 0; try < 20; try++ {
		var retry bool
		msg, retry = ex.checkInvariants()
		if !retry {
			return msg
		}
		runtime.Gosched()
	}
	return msg
}

func (ex *Executor) checkInvariants() (msg string, retry bool) {
	d := &ex.disp
	d.mu.Lock()
	defer d.mu.Unlock()
	var locked []*group
	defer func() {
		for _, g := range locked {
			g.mu.Unlock()
		}
	}()
	ex.groups.each(func(g *group) bool {
		g.mu.Lock()
		locked = append(locked, g)
		return true
	})
	waiting, running, ready := 0, 0, 0
	for _, g := range locked {
		k := g.key
		if g.dead {
			if g.tasks() != 0 {
				return "a dropped group has tasks: " + k, false
			}
			continue
		}
		if cur := ex.groups.load(k); cur != g {
			return "group key mismatch: " + k, false
		}
		if msg := checkList(&g.waiting); msg != "" {
			return "waiting queue: " + msg, false
		}
		if len(g.runningSet) != g.runningTasks {
			return "running count does not match running tasks: " + k, false
		}
		w, r := 0, 0
		for j := g.waiting.Front(); j != nil; j = j.next {
			if j.state != stateWaiting {
				return "non-waiting task in a waiting queue", false
			}
			if j.g != g {
				return "a waiting task names another group", false
			}
			w += j.weight
		}
		if g.light.n > 0 && !ex.light {
			return "light tasks in an executor that allows none: " + k, false
		}
		for i := range g.light.n {
			if g.light.fns[(g.light.head+i)&(len(g.light.fns)-1)] == nil {
				return "a light task without a function: " + k, false
			}
		}
		w += g.light.n // weight 1 each
		for j := range g.runningSet {
			if j.state != stateRunning {
				return "a task counted running is not running", false
			}
			r += j.weight
		}
		if g.running != r {
			return "group concurrency permits do not match running tasks: " + k, false
		}
		if g.inFlight != w+r {
			return fmt.Sprintf("group in-flight permits (%d) do not match admitted tasks (%d waiting, %d running): %s", g.inFlight, w, r, k), false
		}
		// Once closed, no group wants global room: Close's cancel, which
		// follows, takes each group's waiting tasks out and its place in
		// the ready list with them.
		if want := ex.wantsGlobalLocked(g); want != g.inReady && !g.resync && ex.stateNow() != closed {
			return fmt.Sprintf("ready list membership wrong for group %s (in %v, wants %v)", k, g.inReady, want), false
		}
		if g.inReady != g.readyNode.InList() {
			return "ready flag and list disagree: " + k, false
		}
		if g.known != g.knownNode.InList() {
			return "known flag and list disagree: " + k, false
		}
		if g.inReady {
			ready++
		}
		if g.queued() == 0 && g.clusterWait {
			return "group with nothing waiting waits for a cluster notify: " + k, false
		}
		if msg := checkLane(g); msg != "" {
			return msg + ": " + k, false
		}
		if g.deficit < 0 && -g.deficit >= max(g.limits.MaxConcurrency, 1) {
			return "group debt larger than a task: " + k, false
		}
		waiting += g.queued()
		running += r + g.transit
	}
	if n := int(ex.waiting.Load()); n != waiting && ex.queueLimit != policy.Unlimited {
		return fmt.Sprintf("executor waiting count %d does not match the groups' %d", n, waiting), true
	}
	// A group dropped while in the ready list (its last task finished and
	// it was evicted or reclaimed) leaves the list at its resync, which
	// waits for the dispatcher's mutex held here, and it is no longer in
	// the index: it is counted in line while its resync is pending.
	mine := make(map[*group]bool, len(locked))
	for _, g := range locked {
		mine[g] = true
	}
	for n := d.ready.Front(); n != nil; n = n.Next() {
		g := n.Value
		if mine[g] {
			if g.dead && !g.resync {
				return "a dropped group is in the ready list without a resync pending: " + g.key, false
			}
			if g.dead {
				ready++
			}
			continue
		}
		g.mu.Lock()
		dead, pending := g.dead, g.resync
		g.mu.Unlock()
		if !dead || !pending {
			return "a group outside the index is in the ready list without a resync pending: " + g.key, false
		}
		ready++
	}
	if n := ex.global.waiters.Load(); int(n) != d.ready.Len() || d.ready.Len() != ready {
		return fmt.Sprintf("ready list length %d, waiters %d, groups in it %d", d.ready.Len(), n, ready), false
	}
	if used := int(ex.global.used.Load()); used != running {
		return fmt.Sprintf("global permits %d do not match running tasks' %d", used, running), true
	}
	if t := d.turn; t != nil && t.readyNode.InList() && d.ready.Front() != &t.readyNode {
		return "the group holding the turn is in line but not at the front", false
	}
	return "", false
}

// WatchesParent reports whether h still has a watcher registered on its
// Submit context. It is safe only on a task that waits, or whose
// completion the caller has seen (Wait, Done, Result): the group's lock
// guards the watcher while the task waits, but once the task has left its
// queue the goroutine that started or removed it clears the watcher
// without that lock (endedAtStart, completeRemoved), ordered before the
// completion only.
func WatchesParent[T any](h *Handle[T]) bool {
	g := h.g
	g.mu.Lock()
	defer g.mu.Unlock()
	x := h.x.Load()
	return x != nil && x.stopAfter != nil
}

// checkLane checks g's lane (g.mu held): a closed lane holds no task, an
// open one belongs to a group that may take tasks without its lock, and a
// task in it has not been admitted yet and names g.
func checkLane(g *group) string {
	l := &g.lane
	l.mu.Lock()
	defer l.mu.Unlock()
	if !g.laneOpen.Load() {
		if len(l.tasks) > 0 {
			return "a closed lane holds tasks"
		}
		return ""
	}
	if g.dead || g.shutdown || g.limits.MaxInFlight != policy.Unlimited || g.limits.QueueThreshold != policy.Unlimited {
		return "a lane is open where its group's state decides for new tasks"
	}
	if g.queued() == 0 {
		return "a lane is open where its group has no backlog"
	}
	for _, t := range l.tasks {
		if j := t.j; j != nil && (t.fn != nil || j.state != stateNew || j.g != g || j.weight != 1 || j.kind != kindHandle) {
			return "a lane holds a task that is not a new Submit task of weight 1 of its group"
		}
		if t.j == nil && t.fn == nil {
			return "a lane holds an empty task"
		}
	}
	return ""
}

// Parked returns the number of parked workers.
func (ex *Executor) Parked() int { return len(ex.parked) }

// GlobalQueued returns the tasks counted against the global queue
// threshold, and the threshold.
func (ex *Executor) GlobalQueued() (n, limit int) { return int(ex.waiting.Load()), ex.queueLimit }

// SetHookMarked sets the function lockMarkedGroup (ShutdownGroup) calls
// between finding or making its group and locking it; nil removes it.
func SetHookMarked(f func()) { testHookMarked = f }

// SetHookQueued sets the function Submit and Go call between queueing a
// task whose context can end and arming the watcher of that context; nil
// removes it.
func SetHookQueued(f func()) { testHookQueued = f }

// SetHookExpiring sets the function a queue timeout's timer calls with
// its executor as it fires, before it locks its group; nil removes it.
func SetHookExpiring(f func(*Executor)) {
	if f == nil {
		testHookExpiring.Store(nil)
		return
	}
	testHookExpiring.Store(&f)
}

// SetHookDropped sets the function called with a group's key when its
// state is dropped, once it has left the index, under its mutex; nil
// removes it.
func SetHookDropped(f func(key string)) { testHookDropped = f }

// SetHookOverridden sets the function SetGroupLimits and ResetGroupLimits
// call between changing a group's override and applying it; nil removes
// it.
func SetHookOverridden(f func()) { testHookOverridden = f }

// KnownGroups returns the groups in the dispatcher's known list (fair.go),
// and how many of them have been dropped.
func (ex *Executor) KnownGroups() (n, dropped int) {
	d := &ex.disp
	d.mu.Lock()
	defer d.mu.Unlock()
	for nd := d.known.Front(); nd != nil; nd = nd.Next() {
		g := nd.Value
		g.mu.Lock()
		if g.dead {
			dropped++
		}
		g.mu.Unlock()
		n++
	}
	return n, dropped
}

// KeepsRefusedHandle reports whether group keeps a refused Submit's handle
// for its next refusal (refuseShared).
func (ex *Executor) KeepsRefusedHandle(group string) bool {
	g := ex.groups.load(group)
	return g != nil && g.refusedTask.Load() != nil
}

// Drained returns a channel closed once group has no task admitted and
// none unsettled (a nil one if it has none already): by then its going
// idle has been handled, since endLocked wakes the drain waiters after
// idleLocked.
func (ex *Executor) Drained(group string) <-chan struct{} {
	g := ex.groups.load(group)
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if c := ex.waitDrainLocked(g); c != nil {
		return c
	}
	return closedChan
}

// FinishIdle makes the state of group, as its first task does, and ends a
// locked section of it as a finish that leaves it idle does, with a
// finished task to complete (b.fin). It reports whether the group was
// dropped, and the task completed, by the time the section released the
// group's mutex.
func (ex *Executor) FinishIdle(group string) (dropped, done bool) {
	g, r := ex.findGroup(group)
	if r != nil {
		panic(r.err)
	}
	j := &job{g: g, kind: kindGo}
	b := batch{fin: finished{j: j, st: Success}}
	g.mu.Lock()
	ex.endLocked(g, &b)
	dropped, done = g.dead, j.done.v.Load() == completed
	g.mu.Unlock()
	ex.afterUnlock(&b)
	return dropped, done
}

// GlobalWaiters returns the number of groups registered as waiting for
// global room (the dispatcher's ready list): a task counted Waiting in
// Stats is there only once its group has been placed, a moment later.
func GlobalWaiters(ex *Executor) int { return int(ex.global.waiters.Load()) }
