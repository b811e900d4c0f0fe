package executor

import (
	"sync"
	"sync/atomic"

	"github.com/groupexec/groupexec/policy"
)

// The lane: the tail of a backlogged group's queue, which Submit and Go
// append to without the group's lock.
//
// A Submit into a group with a long backlog has nothing to decide but its
// place at the back: where the group has no in-flight limit and no queue
// threshold, and nothing else may refuse or time out a waiting task (no
// queue timeout, breaker, cluster limiter, listener or global queue
// threshold), a task of weight 1 whose context cannot be cancelled just
// waits behind the others. Yet it took the group's mutex, which the
// group's finishing workers take too: where one goroutine submits a batch
// into one group, that goroutine is what limits, and on two cores nearly a
// third of its time per task went to the lookup and to the lock, whose
// cache lines the workers on the other core had just written.
//
// So a group whose queue grows to laneOpenDepth opens its lane, and
// Submit appends such a task to it under the lane's own mutex, which only
// the submitters and, once per many tasks, a drain take. So does Go for a
// light task (a Go task with context.Background, queued as its function
// alone: light.go), whose backlog grows the same way from a Go fan-out.
// A drain moves the lane's tasks to the back of the group's queue, in
// order, under the group's mutex: every admission does it first
// (lockFound), so that the queue stays FIFO whatever way a task comes in,
// as do a cancel, a shutdown and a change of the group's limits; and a
// finishing task does it once its group's queue is down to laneDrainDepth,
// closing the lane if it was empty. A task in the lane is counted by Stats
// as waiting and submitted.
//
// A lane is open only while its group has a backlog: it opens at a queue
// of laneOpenDepth, and whatever takes the last task out of the queue (a
// start by a finish or by the dispatcher, a cancel) drains the lane, and
// closes it if it is empty (dequeuedLocked). So a task appended to a lane
// would have queued behind others anyway: it never waits in a lane while
// its group has room to start it. And nothing is left in a lane: the
// tasks of a backlog each leave the queue, and the last to leave drains
// it. The lane closes only under its mutex, so that an append either
// lands before the close, whose drain takes it, or finds the lane closed
// and takes the group's lock instead. A group with an open lane has a
// backlog, so it is neither idle nor drained.
//
// What it buys, on the 2-core machine: on the flat batch with Submit, at
// GOMAXPROCS 2, 0.58x-0.60x the time per task in alternating runs of the
// builds without and with it (six and eight rounds), 0.82x in paired runs
// in one process (lanes kept closed, then not, 30 alternating batches);
// with ~200 ns of work, 0.65x-0.71x and 0.72x. At GOMAXPROCS 1, 0.90x and
// 0.91x (paired). The grouped batches with Submit, whose groups' queues
// reach the depth at GOMAXPROCS 1, and the submitters' shape: 0.96x-1.05x,
// within the noise. For Go's light tasks (paired, as above): the flat
// batch 0.90x at GOMAXPROCS 1 and 0.88x at 2, with work 0.96x and 0.87x;
// the grouped batches 0.99x-1.03x, the submitters' shape 1.02x-1.04x,
// within the noise.
type lane struct {
	mu    sync.Mutex
	tasks []laneTask // appended, in submission order (mu)
	// spare is the array of the tasks last drained, for the next ones
	// (the group's mutex).
	spare []laneTask
}

// laneTask is a task in a lane: a Submit task, or a light Go task (its
// function alone, light.go).
type laneTask struct {
	j  *job
	fn goFn
}

// laneOpenDepth is the waiting tasks at which a group opens its lane: a
// backlog, not a task or two queued behind a busy group.
const laneOpenDepth = 64

// laneDrainDepth is the waiting tasks at which a finish drains its group's
// lane: enough left that the workers do not run dry meanwhile.
const laneDrainDepth = 32

// laneFitsLocked reports whether g's lane may open: nothing but the order
// of its queue decides for a Submit task of weight 1 that joins it.
func (ex *Executor) laneFitsLocked(g *group) bool {
	return ex.timeout <= 0 && ex.listener == nil && ex.cluster == nil && ex.queueLimit == policy.Unlimited &&
		g.br == nil && !g.shutdown && !g.dead &&
		g.limits.MaxInFlight == policy.Unlimited && g.limits.QueueThreshold == policy.Unlimited &&
		ex.stateNow() == open
}

// openLaneLocked opens g's lane if g has a backlog and nothing else to
// decide for the tasks that join it (g.mu held).
func (ex *Executor) openLaneLocked(g *group) {
	if g.queued() < laneOpenDepth || g.laneOpen.Load() || !ex.laneFitsLocked(g) {
		return
	}
	g.lane.mu.Lock()
	g.laneOpen.Store(true)
	g.lane.mu.Unlock()
}

// pushLane appends j, a Submit task of weight 1 whose context cannot be
// cancelled, to g's lane, and reports whether it did: false if the lane
// is closed, or the executor no longer takes tasks (Shutdown closes the
// lanes after it says so).
func (ex *Executor) pushLane(g *group, j *job) bool {
	j.g = g
	j.submitted = ex.since()
	return ex.appendLane(g, laneTask{j: j})
}

// pushLaneLight appends fn, a light Go task, to g's lane, and reports
// whether it did, as pushLane.
func (ex *Executor) pushLaneLight(g *group, fn goFn) bool {
	return ex.appendLane(g, laneTask{fn: fn})
}

func (ex *Executor) appendLane(g *group, t laneTask) bool {
	l := &g.lane
	l.mu.Lock()
	ok := g.laneOpen.Load() && ex.stateNow() == open
	if ok {
		l.tasks = append(l.tasks, t)
	}
	l.mu.Unlock()
	if ok && trackRunning {
		lanePushes.Add(1)
	}
	return ok
}

// lanePushes counts the tasks appended to lanes while trackRunning is set
// (tests).
var lanePushes atomic.Int64

// drainLaneLocked moves the tasks in g's lane to the back of g's queue
// (g.mu held). close closes the lane; closeIfEmpty closes it if it held
// no task. If the tasks become g's head, g.resync is set, so that the
// section's unlock puts g where its new head says.
func (ex *Executor) drainLaneLocked(g *group, close, closeIfEmpty bool) {
	l := &g.lane
	l.mu.Lock()
	ts := l.tasks
	l.tasks, l.spare = l.spare[:0], nil
	if close || (closeIfEmpty && len(ts) == 0) {
		g.laneOpen.Store(false)
	}
	l.mu.Unlock()
	if len(ts) > 0 && g.queued() == 0 {
		g.resync = true
	}
	for i, t := range ts {
		g.counts.Submitted++
		if t.j != nil {
			ex.enqueueLocked(g, t.j, 0) // no queue timeout where a lane opens
		} else {
			ex.queueLightLocked(g, t.fn)
		}
		ts[i] = laneTask{}
	}
	l.spare = ts[:0]
}

// lockDrained locks g and moves its lane's tasks, if any, into its queue.
func (ex *Executor) lockDrained(g *group) {
	g.mu.Lock()
	if g.laneOpen.Load() {
		ex.drainLaneLocked(g, false, false)
	}
}

// unlockDrained releases g.mu after a section that drained g's lane and
// made no other change that its unlock must act on: if the lane's tasks
// became g's head, the unlock puts g where its head says.
func (ex *Executor) unlockDrained(g *group) {
	if !g.resync {
		g.mu.Unlock()
		return
	}
	var b batch
	ex.unlock(g, &b)
}

// closeLaneLocked drains g's lane and closes it (g.mu held): g's limits
// change, or g or the executor shuts down.
func (ex *Executor) closeLaneLocked(g *group) {
	if g.laneOpen.Load() {
		ex.drainLaneLocked(g, true, false)
	}
}

// laneLen returns the number of tasks in g's lane.
func (g *group) laneLen() int {
	if !g.laneOpen.Load() {
		return 0
	}
	g.lane.mu.Lock()
	defer g.lane.mu.Unlock()
	return len(g.lane.tasks)
}
