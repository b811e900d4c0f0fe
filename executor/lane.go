package executor

import (
	"sync"

	"github.com/groupexec/groupexec/policy"
)

// The lane: a way into a group's queue without the executor's lock, for a
// task that must wait anyway.
//
// A task must wait when its group already has a task waiting (FIFO within a
// group). While that holds, Submit has nothing to decide but the group's
// in-flight limit and queue threshold, and both only shrink the room left.
// So the lock holder that queued the group's head lends the group's lane
// that room as credit, in permits, and a Submit that finds enough credit
// takes its weight and links the task behind the lane's last one, under the
// lane's own small mutex. It takes no executor lock and writes nothing the
// workers touch: the submitting goroutines and the workers stop contending,
// which on two cores is most of what a queued task cost.
//
// A Submit whose context can be cancelled registers the watcher that
// cancels its task outside every lock (the context is the caller's code)
// and stores it under the lane's mutex if the task is still in the lane
// (the lane counts its takes); otherwise under the executor's lock, as on
// the locked path.
//
// Whoever holds the executor's lock and needs the group's queue as it is
// moves the lane's tasks to its back (drainLocked): one splice of a list
// the submitters already linked, and the admission accounting the lane
// skipped (in-flight permits, counts) for all of them at once. Whoever needs
// no more to come in closes the lane (closeLaneLocked).
//
// Invariants (the executor's lock held):
//   - a lane is open only while its group has a task in its waiting list: a
//     task admitted through it always has one ahead, and the group is not
//     idle, so never dropped; removing the group's last listed task closes
//     the lane first, unless the lane has tasks to move behind it;
//   - a closed lane holds no task;
//   - every operation that needs a group's queue or in-flight count exact,
//     or changes its limits or lifecycle (cancel, shutdown, eviction,
//     limits, statistics), drains or closes its lane first; one that raises
//     what the group holds (a Submit on the locked path) closes it, and
//     reopens it with credit computed afresh. Releasing permits and reading
//     the queue's head need neither: the lane only adds behind the head,
//     and its credit stays within a room that a release only widens.
//
// A Go task with context.Background leaves only its function in the lane
// (a light task, go.go).
//
// Lanes open only where the locked path would decide nothing else: no
// queue timeout (deadlines follow queue order, taken under the lock), no
// group breaker (a ticket per task), no cluster limiter, no global queue
// threshold (a count across groups), an executor and a group still open.

// lane is a group's way in without the executor's lock. Its fields are
// guarded by mu; it sits on cache lines of its own, apart from the group's
// fields that the workers write.
type lane struct {
	_      [64]byte
	key    string // the group's, read-only: Submit's hint reads it here, not on the group's lines that workers write
	mu     sync.Mutex
	open   bool
	credit int     // permits that may still come in
	maxW   int     // the heaviest task that may come in: one that can start
	jobs   jobList // admitted, not yet in the queue, oldest first
	fns    []goFn  // light tasks admitted behind jobs, oldest first (admitLight)
	w      int     // their permits, both kinds
	seq    uint64  // counts takes: a job admitted at seq is in the lane until the next
	_      [64]byte
}

// laneMaxCredit bounds the credit lent at once, so that sums never
// overflow an int, even of 32 bits.
const laneMaxCredit = 1 << 30

// lanesAllowed reports whether the executor's configuration lets lanes open.
func (ex *Executor) lanesAllowed() bool {
	return ex.timeout == 0 && ex.cluster == nil && ex.breaker == nil &&
		ex.pol.GlobalQueueThreshold() == policy.Unlimited
}

// admit takes j into its group's lane if it is open and has room,
// reporting whether it did: j is then waiting. With watch (Submit's context
// can be cancelled), it notes in j's extra when j came in, for watch.
func (l *lane) admit(j *job, watch bool) bool {
	l.mu.Lock()
	// Not behind light tasks: those are moved to the queue after jobs.
	if !l.open || j.weight > l.credit || j.weight > l.maxW || len(l.fns) > 0 {
		l.mu.Unlock()
		return false
	}
	l.credit -= j.weight
	if watch {
		j.extra().laneSeq = l.seq
	}
	j.state = stateWaiting
	l.jobs.PushBack(j)
	l.w += j.weight
	l.mu.Unlock()
	return true
}

// admitLight takes fn, a light task (go.go), into the lane if it is open
// and has room, reporting whether it did.
func (l *lane) admitLight(fn goFn) bool {
	l.mu.Lock()
	if !l.open || l.credit < 1 { // maxW, a limit, is at least 1
		l.mu.Unlock()
		return false
	}
	l.credit--
	l.fns = append(l.fns, fn)
	l.w++
	l.mu.Unlock()
	return true
}

// watch sets stop, the watcher on Submit's context of j admitted with
// watch, if j is still in the lane, so that a Submit with a cancellable
// context takes no executor lock either. It reports false if j has left
// the lane: its fields are then the executor lock's again, and the caller
// takes that.
func (l *lane) watch(j *job, stop func() bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	x := j.extra()
	if x.laneSeq != l.seq {
		return false
	}
	x.stopAfter = stop // read under the executor's lock after the move
	return true
}

// segment is the tasks taken out of a lane, oldest first, and their
// permits.
type segment struct {
	jobs jobList
	fns  []goFn // behind jobs
	w    int
}

// How take leaves the lane.
const (
	keepOpen    = iota
	closeLane   // closed
	closeIfIdle // closed if it held nothing
)

// take empties the lane and leaves it open or closed as how says. buf,
// empty, is where light tasks go from now on.
func (l *lane) take(how int, buf []goFn) segment {
	l.mu.Lock()
	s := segment{l.jobs, l.fns, l.w}
	l.jobs, l.fns, l.w = jobList{}, buf, 0
	l.seq++
	if how == closeLane || how == closeIfIdle && s.jobs.n == 0 && len(s.fns) == 0 {
		l.open = false
	}
	l.mu.Unlock()
	return s
}

// drainLocked moves g's lane to the back of its queue and does the
// admission accounting the lane skipped.
func (ex *Executor) drainLocked(g *group) {
	if ex.lanes {
		ex.spliceLocked(g, g.lane.take(keepOpen, g.laneBuf))
	}
}

// closeLaneLocked closes g's lane and drains it.
func (ex *Executor) closeLaneLocked(g *group) {
	if ex.lanes {
		ex.spliceLocked(g, g.lane.take(closeLane, g.laneBuf))
	}
}

func (ex *Executor) spliceLocked(g *group, s segment) {
	n := s.jobs.n + len(s.fns)
	if n == 0 {
		g.laneBuf = s.fns
		return
	}
	if s.jobs.n > 0 {
		g.flushLightLocked() // the queue's light tasks come before these jobs
		g.waiting.pushBackList(&s.jobs)
	}
	g.laneBuf = g.light.add(s.fns)
	g.inFlight.Acquire(s.w)
	ex.tasks += n
	ex.waiting += n
	ex.counts.Submitted += uint64(n)
	g.counts.Submitted += uint64(n)
	ex.laneAdmitted += uint64(n)
	ex.lightAdmitted += uint64(len(s.fns))
}

// openLaneLocked lends g's lane the room its in-flight limit and queue
// threshold have left, if the lane may open.
func (ex *Executor) openLaneLocked(g *group) {
	if !ex.lanes || ex.state != open || g.shutdown || g.evict || g.queued() == 0 {
		return
	}
	credit := min(g.inFlight.Limit()-g.inFlight.Used(), g.limits.QueueThreshold-g.queued(), laneMaxCredit)
	l := &g.lane
	l.mu.Lock()
	opened := credit > 0 && !l.open // a closed lane is empty
	if opened {
		l.open, l.credit = true, credit
		l.maxW = min(g.conc.Limit(), ex.global.Limit())
	}
	l.mu.Unlock()
	if opened && ex.hint.Load() != g {
		ex.hint.Store(g)
	}
}

// closeLanesLocked closes every lane: the executor stops taking tasks.
func (ex *Executor) closeLanesLocked() {
	for n := ex.backlog.Front(); n != nil; n = n.Next() {
		ex.closeLaneLocked(n.Value)
	}
}
