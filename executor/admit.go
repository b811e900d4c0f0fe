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

// admitLocked decides the admission into g of a task of weight w. On
// admitStart, the task's permits are taken (and ps holds its cluster
// permits, if any); the caller marks it running (runLocked). Tasks
// displaced from g's queue under DiscardOldest go in b.
func (ex *Executor) admitLocked(g *group, w int, b *batch) (v verdict, r refusal, ps [2]Permit) {
	refuse := func(l Limit, used, limit int, err error, forced bool) (verdict, refusal, [2]Permit) {
		return admitRefuse, refusal{limit: l, used: used, max: limit, err: err, forced: forced}, ps
	}
	l := &g.limits
	switch {
	case ex.stateNow() != open:
		return refuse(LimitShutdown, 0, 0, ErrShutdown, true)
	case g.shutdown:
		return refuse(LimitShutdown, 0, 0, ErrGroupShutdown, true)
	// The three limits, in their order; a task heavier than one can never run.
	case w > ex.global.max():
		return refuse(LimitGlobalInFlight, int(ex.global.used.Load()), ex.global.max(), ErrTooHeavy, true)
	case w > l.MaxInFlight:
		return refuse(LimitGroupInFlight, g.inFlight, l.MaxInFlight, ErrTooHeavy, true)
	case w > l.MaxConcurrency:
		return refuse(LimitGroupConcurrency, g.running, l.MaxConcurrency, ErrTooHeavy, true)
	case g.inFlight > l.MaxInFlight-w:
		return refuse(LimitGroupInFlight, g.inFlight, l.MaxInFlight, nil, false)
	}
	clusterWait := false
	if g.waiting.Len() == 0 && g.running <= l.MaxConcurrency-w && ex.global.fitsAlone(w) {
		if ex.cluster == nil {
			g.inFlight += w
			return admitStart, r, ps
		}
		o, cr, cps := ex.cluster.acquire(g.key, w)
		switch o {
		case clusterGranted:
			g.inFlight += w
			return admitStart, r, cps
		case clusterRefused:
			ex.global.give(w)
			b.gave = true
			return admitRefuse, *cr, ps
		case clusterWaitGroup:
			clusterWait = true // it waits like any other task
		}
		ex.global.give(w)
		b.gave = true
	}
	if n := g.waiting.Len(); n >= l.QueueThreshold && !ex.displaceLocked(g, w, b) {
		return refuse(LimitGroupQueue, n, l.QueueThreshold, nil, false)
	}
	if t := ex.pol.GlobalQueueThreshold(); !ex.takeQueueRoom(t) {
		return refuse(LimitGlobalQueue, int(ex.waiting.Load()), t, nil, false)
	}
	if g.waiting.Len() == 0 {
		g.clusterWait = clusterWait
	}
	return admitQueue, r, ps
}

// takeQueueRoom counts a task into the global queue threshold t, and
// reports false, counting nothing, if the threshold is reached.
func (ex *Executor) takeQueueRoom(t int) bool {
	if t == policy.Unlimited {
		ex.waiting.Add(1)
		return true
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
	g.inFlight += j.weight
	j.state = stateWaiting
	if ex.timeout > 0 {
		// Queue deadlines follow queue order (timeout.go), so the
		// submission time is taken under the lock.
		j.submitted = now
	}
	g.waiting.PushBack(j)
	if g.waiting.Len() == 1 {
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
// waiting task would not make room. Only a full group queue displaces: every
// other refusal under DiscardOldest behaves as under Discard.
func (ex *Executor) displaceLocked(g *group, w int, b *batch) bool {
	if ex.handler != nil || ex.pol.RejectionPolicy() != policy.DiscardOldest || g.overLimitLocked() {
		return false
	}
	used, full := g.waiting.Len(), g.limits.QueueThreshold
	free := g.limits.MaxInFlight - g.inFlight
	waiting := g.waiting.Len()
	globalWaiting := int(ex.waiting.Load())
	globalMax := ex.pol.GlobalQueueThreshold()
	k := 0
	for n := g.waiting.Front(); w > free || waiting >= full || globalWaiting >= globalMax; n = n.next {
		if n == nil {
			return false
		}
		free += n.weight
		waiting--
		globalWaiting--
		k++
	}
	for range k {
		old := g.waiting.Front()
		ex.removeWaitingLocked(g, old, Rejected)
		b.displaced.add(displacement{old, &RejectedError{Group: g.key, ID: old.taskID(),
			Limit: LimitGroupQueue, Weight: old.weight, Used: used, Max: full, Err: ErrDisplaced}})
	}
	return true
}

// overLimitLocked reports whether g holds more than a lowered limit allows:
// then it displaces nothing under DiscardOldest.
func (g *group) overLimitLocked() bool {
	return g.inFlight > g.limits.MaxInFlight || g.waiting.Len() > g.limits.QueueThreshold
}
