package executor

import (
	"context"
	"sync/atomic"

	"github.com/groupexec/groupexec/policy"
)

// Light tasks.
//
// A Go task with context.Background is its function and its group, and
// nothing else, when the executor has no listener to tell of it, no queue
// timeout to time it, and no breaker ticket or cluster permit to attach to
// it: weight 1, no ID, no handle, no watcher, no clock reading. So when it
// must wait, Go queues fn alone, one word, in its group's light queue
// (group.light), behind the group's waiting jobs. It becomes a job when it
// starts:
//
//   - A finishing task that is a reused Go task itself (recycle.go) hands
//     its permits to the light task at its group's head and is reused for
//     it, when the general path would start that task on the permits just
//     released (handsOffLocked): its running permits, at its group's
//     concurrency limit and at the global limit, pass as they are.
//   - Otherwise it becomes a Go task where a head is needed (headLocked): a
//     spare of its group, a pooled task or a new one.
//
// Order within the group stays FIFO: light tasks always come after the jobs
// queued before them. A job queued behind light tasks makes them jobs first
// (flushLightLocked): a cost in proportion to the light tasks queued since
// the last such job, each made a job once at most. A light task removed
// without running (DiscardOldest's displacement, the cancelling of a
// group's waiting tasks) is only counted: nothing waits on it. A light task
// is counted, and limited, as any waiting task.
//
// What it buys, on the batch workloads with Go (a backlog in each group):
// a queued task costs the submitter a word written instead of a task
// initialized, and a finish with a light head costs no task put back and
// none taken, no read of the head (a task the submitter wrote on another
// core) and no write of the global count: see benchmarks/README.md, "What
// each of the executor's mechanisms buys". The ring keeps the capacity of
// its group's longest backlog of light tasks, 8 bytes a task, until the
// group's state is dropped.

// goFn is a Go task's function.
type goFn = func(ctx context.Context) error

// lightAllowed reports whether Go may queue light tasks: nothing but its
// function is needed of a Go task with context.Background while it waits.
func (ex *Executor) lightAllowed() bool {
	return ex.listener == nil && ex.timeout <= 0 && ex.breaker == nil && ex.cluster == nil
}

// lightQueue is a FIFO of light tasks: a ring of functions.
type lightQueue struct {
	fns  []goFn // len(fns) is 0 or a power of two
	head int
	n    int
}

func (q *lightQueue) push(fn goFn) {
	if q.n == len(q.fns) {
		fns := make([]goFn, max(16, 2*len(q.fns)))
		k := copy(fns, q.fns[q.head:])
		copy(fns[k:], q.fns[:q.head])
		q.fns, q.head = fns, 0
	}
	q.fns[(q.head+q.n)&(len(q.fns)-1)] = fn
	q.n++
}

func (q *lightQueue) pop() goFn {
	fn := q.fns[q.head]
	q.fns[q.head] = nil
	q.head = (q.head + 1) & (len(q.fns) - 1)
	q.n--
	return fn
}

// queueLightLocked queues fn, a light task that admitLocked queued, at the
// back of g's queue, holding its place in g's in-flight limit.
func (ex *Executor) queueLightLocked(g *group, fn goFn) {
	g.inFlight++
	g.light.push(fn)
	if g.light.n == hintDepth && ex.groups.hint.Load() != g {
		ex.groups.hint.Store(g) // a backlog (groupIndex.hint)
	}
	if g.queued() == 1 {
		g.backlogWin = ex.disp.fair.win.Load()
	}
}

// queuesBehindLocked reports whether a task of weight 1 that fits g's
// in-flight limit joins g's queue, behind a backlog, with room in both
// queue thresholds, so that nothing else is to decide: it neither starts
// nor displaces, and queued at the back it changes neither g's head nor
// g's place among the groups waiting for global room. Go then queues a
// light task with no batch to act on after unlocking: on the flat batch
// with Go at GOMAXPROCS 1, 78 to 66 ns a task. Not if the lock's drain of
// g's lane gave g a new head (resync; lane.go), which the unlock must act on.
func (ex *Executor) queuesBehindLocked(g *group) bool {
	n := g.queued()
	return n > 0 && n < g.limits.QueueThreshold && ex.queueLimit == policy.Unlimited && !g.resync
}

// dropLightLocked removes g's first k light tasks, never to run, and counts
// them as st.
func (ex *Executor) dropLightLocked(g *group, k int, st Status) {
	for range k {
		g.light.pop()
		ex.dequeuedLocked(g)
		g.inFlight--
		g.counts.add(st)
	}
	if k > 0 {
		g.resync = true // its head may have changed
	}
}

// headLocked returns g's first waiting task, made a job if it is a light
// task, or nil if none waits.
func (g *group) headLocked() *job {
	if h := g.waiting.front; h != nil || g.light.n == 0 {
		return h
	}
	g.unlightLocked()
	return g.waiting.front
}

// flushLightLocked makes every light task of g a job, at the back of its
// waiting queue.
func (g *group) flushLightLocked() {
	for g.light.n > 0 {
		g.unlightLocked()
	}
}

// unlightLocked makes the first light task of g a job at the back of its
// waiting queue.
func (g *group) unlightLocked() {
	fn := g.light.pop()
	t := g.takeSpareLocked(fn)
	if t == nil {
		t = newGoTask(background, fn, true)
	}
	t.g, t.state = g, stateWaiting
	g.waiting.PushBack(&t.job)
}

// handsOffLocked reports whether finish may hand the permits of t, a
// reusable Go task that has just released them, to the light task at the
// head of its group g (handOffLocked): exactly when startFreedLocked would
// start that task on them.
func (ex *Executor) handsOffLocked(g *group, t *goTask) bool {
	return g.waiting.front == nil && g.light.n > 0 && t.x.Load() == nil &&
		ex.startsOnFreedLocked(g, 1) && ex.global.used.Load() <= ex.global.limit.Load()
}

// handOffLocked starts the light task at g's head as t, completed and
// reused: t's running permits pass to it as they are.
func (ex *Executor) handOffLocked(g *group, t *goTask) {
	t.renew(g.light.pop())
	ex.dequeuedLocked(g)
	ex.runLocked(g, &t.job)
	if trackRunning {
		handOffs.Add(1)
	}
}

// quietLocked reports whether ending a locked section of g that leaves a
// task running (so g is neither idle nor drained) needs nothing but the
// unlock: no resync, no permits in transit, and g's place among the groups
// waiting for global room as its state says. A finish that hands off then
// declares no batch: on the flat batch with Go at GOMAXPROCS 1, 66 to 55
// ns a task.
func (ex *Executor) quietLocked(g *group) bool {
	return !g.resync && g.transit == 0 && ex.wantsGlobalLocked(g) == g.inReady
}

// handOffs counts the handoffs made while trackRunning is set (tests).
var handOffs atomic.Int64
