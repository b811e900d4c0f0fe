package executor

import (
	"time"

	"github.com/groupexec/groupexec/policy"
)

// Admission. Submit, Go and Do decide a task's admission the same way,
// under its group's mutex alone (admitLocked): it starts at once, joins the
// group's queue, or is refused. Nothing shared is locked on the way: the
// global limit is an atomic (global.go), and the dispatcher's mutex is taken
// only after the group's is released, when the task's group must wait for
// global room (dispatch.go).

// verdict is what admitLocked decided for a task.
type verdict uint8

const (
	// admitStart: its running permits are taken; it runs now.
	admitStart verdict = iota
	// admitQueue: it waits; the caller queues it (enqueueLocked) before
	// unlocking.
	admitQueue
	// admitRefuse: it is refused, for the reason given.
	admitRefuse
	// admitRoom: it fits its group's in-flight limit; the caller gives the
	// admission a batch and decides the rest (admitRoomLocked). A refusal
	// of a full group so costs no batch, which is most of an admission's
	// stack frame.
	admitRoom
)

// refusal is why a task was not admitted, before it becomes a
// *RejectedError: a refusal costs no allocation until the caller needs
// the error.
type refusal struct {
	limit     Limit
	used, max int
	err       error
	forced    bool // no rejection policy applies
}

func (r *refusal) error(group, id string, weight int) *RejectedError {
	e := new(RejectedError)
	r.fill(e, group, id, weight)
	return e
}

func (r *refusal) fill(e *RejectedError, group, id string, weight int) {
	*e = RejectedError{Group: group, ID: id, Limit: r.limit, Weight: weight, Used: r.used, Max: r.max, Err: r.err}
}

// admitLocked decides the admission into g of a task of weight w, for a:
// a.v, and a.r when it refuses. On admitStart, the task's permits are
// taken (and a.ps holds its cluster permits, if any); the caller marks it
// running (runLocked). Tasks displaced from g's queue under DiscardOldest
// go in a's batch.
func (ex *Executor) admitLocked(g *group, w int, a *admission) {
	refuse := &a.r
	a.v = admitRefuse
	l := &g.limits
	switch {
	case ex.stateNow() != open:
		*refuse = refusal{limit: LimitShutdown, err: ErrShutdown, forced: true}
	case g.shutdown:
		*refuse = refusal{limit: LimitShutdown, err: ErrGroupShutdown, forced: true}
	// The three limits, in their order; a task heavier than one can never run.
	case w > 1 && w > ex.global.max(): // the limit is at least 1: a read of its cache line saved
		*refuse = refusal{limit: LimitGlobalInFlight, used: int(ex.global.used.Load()), max: ex.global.max(), err: ErrTooHeavy, forced: true}
	case w > l.MaxInFlight:
		*refuse = refusal{limit: LimitGroupInFlight, used: g.inFlight, max: l.MaxInFlight, err: ErrTooHeavy, forced: true}
	case w > l.MaxConcurrency:
		*refuse = refusal{limit: LimitGroupConcurrency, used: g.running, max: l.MaxConcurrency, err: ErrTooHeavy, forced: true}
	case g.inFlight > l.MaxInFlight-w:
		*refuse = refusal{limit: LimitGroupInFlight, used: g.inFlight, max: l.MaxInFlight}
	default:
		a.v = admitRoom
	}
}

// admitRoomLocked decides, with b, the admission of a task that fits g's
// in-flight limit (admitRoom): it starts if it fits the rest, is queued
// if the queue thresholds have room, or is refused (admitRefuse).
func (ex *Executor) admitRoomLocked(g *group, w int, a *admission, b *batch) {
	l := &g.limits
	clusterWait := false
	if g.queued() == 0 && g.running <= l.MaxConcurrency-w && ex.global.fitsAlone(w) {
		if ex.cluster == nil {
			g.inFlight += w
			a.v = admitStart
			return
		}
		o, cr, cps := ex.cluster.acquire(g.key, w)
		switch o {
		case clusterGranted:
			g.inFlight += w
			a.v, a.ps = admitStart, cps
			return
		case clusterRefused:
			ex.global.give(w)
			b.gave = true
			a.v, a.r = admitRefuse, *cr
			return
		case clusterWaitGroup:
			clusterWait = true // it waits like any other task
		}
		ex.global.give(w)
		b.gave = true
	}
	displaced := false // the displacement kept the task's place in the global queue threshold
	if n := g.queued(); n >= l.QueueThreshold {
		if !ex.displaceLocked(g, w, b) {
			a.v, a.r = admitRefuse, refusal{limit: LimitGroupQueue, used: n, max: l.QueueThreshold}
			return
		}
		displaced = true
	}
	if t := ex.queueLimit; !displaced && !ex.takeQueueRoom(t) {
		a.v, a.r = admitRefuse, refusal{limit: LimitGlobalQueue, used: int(ex.waiting.Load()), max: t}
		return
	}
	if g.queued() == 0 {
		g.clusterWait = clusterWait
	}
	a.v = admitQueue
}

// takeQueueRoom counts a task into the global queue threshold t, and
// reports false, counting nothing, if the threshold is reached.
func (ex *Executor) takeQueueRoom(t int) bool {
	if t == policy.Unlimited {
		return true // nothing to count against: ex.waiting is not kept
	}
	for {
		n := ex.waiting.Load()
		if n >= int64(t) {
			return false
		}
		if ex.waiting.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// enqueueLocked puts j, which admitLocked queued, at the back of g's queue,
// holding its place in g's in-flight limit. now is the current time since
// the epoch, or 0 if no queue timeout is set.
func (ex *Executor) enqueueLocked(g *group, j *job, now time.Duration) {
	if g.light.n > 0 {
		g.flushLightLocked() // FIFO: the light tasks come before j
	}
	g.inFlight += j.weight
	j.state = stateWaiting
	if ex.timeout > 0 {
		// Queue deadlines follow queue order (timeout.go), so the
		// submission time is taken under the lock.
		j.submitted = now
	}
	g.waiting.PushBack(j)
	if g.queued() == 1 {
		g.backlogWin = ex.disp.fair.win.Load()
		ex.armLocked(g, now)
	}
}

// displaceLocked makes room in g's full queue for a new task of weight w
// under DiscardOldest: it removes g's oldest waiting tasks, as few as leave
// room for the new one in g's queue threshold (and so in its in-flight limit
// and the global queue threshold, which it had passed), and puts them in b to
// complete Rejected with ErrDisplaced. It removes nothing and reports false
// if the policy is another, a rejection handler is set, or removing every
// waiting task would not make room. On success the new task has its place in
// the global queue threshold. Only a full group queue displaces: every
// other refusal under DiscardOldest behaves as under Discard.
func (ex *Executor) displaceLocked(g *group, w int, b *batch) bool {
	if ex.handler != nil || ex.pol.RejectionPolicy() != policy.DiscardOldest || g.overLimitLocked() {
		return false
	}
	used, full := g.queued(), g.limits.QueueThreshold
	free := g.limits.MaxInFlight - g.inFlight
	waiting := used
	globalWaiting := int(ex.waiting.Load())
	globalMax := ex.queueLimit
	jobs, light := 0, 0 // the oldest: the jobs, then the light tasks behind them
	n := g.waiting.Front()
	for w > free || waiting >= full || globalWaiting >= globalMax {
		switch {
		case n != nil:
			free += n.weight
			n = n.next
			jobs++
		case light < g.light.n:
			free++
			light++
		default:
			return false
		}
		waiting--
		globalWaiting--
	}
	if globalMax != policy.Unlimited {
		// The first task displaced (there is one) passes its place in the
		// global queue threshold to the new task instead of giving it up,
		// which another group's admission could take meanwhile, leaving the
		// new task refused after its group made room for it.
		g.keepQueueRoom = true
	}
	for range jobs {
		old := g.waiting.Front()
		ex.removeWaitingLocked(g, old, Rejected)
		b.displaced.add(displacement{old, &RejectedError{Group: g.key, ID: old.taskID(),
			Limit: LimitGroupQueue, Weight: old.weight, Used: used, Max: full, Err: ErrDisplaced}})
	}
	ex.dropLightLocked(g, light, Rejected)
	return true
}

// overLimitLocked reports whether g holds more than a lowered limit allows:
// then it displaces nothing under DiscardOldest.
func (g *group) overLimitLocked() bool {
	return g.inFlight > g.limits.MaxInFlight || g.queued() > g.limits.QueueThreshold
}
