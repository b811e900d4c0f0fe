package executor

import (
	"context"
	"sync"

	"github.com/groupexec/groupexec/breaker"
)

// A job's size is most of what a waiting task costs and, on tiny tasks, a
// large part of what every task costs: a batch of handles kept alive is
// what the collector scans, and each byte is zeroed at Submit (measured:
// 80 more bytes per handle cost ~55 ns per task on the flat benchmark). So a
// job keeps in line only what every task uses, links itself into its
// group's lists without a node of its own, leaves what only a handle needs
// (ID, outcome, Done channel) to Handle, so that a waiting task started with
// Go costs 96 bytes (shrinking it from 144 saved memory but no measurable
// time: session 12), and keeps the rest, which most tasks never need, in a
// jobExtra made on first use.

// jobExtra is the part of a job that most tasks never use: a watcher on
// Submit's context, cluster permits, a breaker ticket, and the run context's
// cancellation. The price is one allocation more for a task that needs it:
// for instance a Fn that calls Done on its context when Submit's context is
// never cancelled (the job is then the run context, and its Done channel
// lives here). Each field is guarded as the comment says; the pointer to it
// is set once (job.extra) and never changes.
type jobExtra struct {
	// guarded by the executor's mutex, or by the lane's while the job is in
	// its group's lane (lane.go)
	stopAfter func() bool // stops the Submit-ctx watcher, if any
	laneSeq   uint64      // the lane's take count when it admitted the job
	// cluster holds the cluster permits while running (global, group; see
	// cluster.go), when bound is set.
	cluster [2]Permit
	bound   bool

	// set by Submit before the job is shared; then used by the goroutine
	// that settles the job (a Ticket is finished once: the zero Ticket
	// ignores further calls)
	ticket breaker.Ticket // the group breaker's, settled when the job completes

	// guarded by mu
	mu        sync.Mutex
	cancelCh  chan struct{} // Done of the run context when it is the job itself
	cancelled error         // set when the run context is cancelled
	cancelRun context.CancelCauseFunc
	watched   bool // listed in its group's watched set (context.go)
	ended     bool // the run has ended: never listed again
}

// taskID returns j's task ID, kept by its handle.
func (j *job) taskID() string { return j.body.taskID() }

// extra returns j's jobExtra, making it on first use.
func (j *job) extra() *jobExtra {
	if x := j.x.Load(); x != nil {
		return x
	}
	x := new(jobExtra)
	if j.x.CompareAndSwap(nil, x) {
		return x
	}
	return j.x.Load()
}

// jobList is a FIFO of jobs linked through their next and prev fields: a
// group's waiting queue, or its lane's tasks. A job is in at most one list
// at a time, and only while it waits. Guarded by the executor's mutex (the
// lane's by the lane's).
type jobList struct {
	front, back *job
	n           int
}

// Len returns the number of jobs in l.
func (l *jobList) Len() int { return l.n }

// Front returns the first job, or nil.
func (l *jobList) Front() *job { return l.front }

// PushBack appends j, which must not be in a list.
func (l *jobList) PushBack(j *job) {
	if j.prev != nil || j.next != nil || l.front == j {
		panic("executor: a job pushed onto a list it is already in")
	}
	j.prev = l.back
	if l.back != nil {
		l.back.next = j
	} else {
		l.front = j
	}
	l.back = j
	l.n++
}

// Remove takes j, which must be in l, out of l.
func (l *jobList) Remove(j *job) {
	if j.prev != nil {
		j.prev.next = j.next
	} else if l.front == j {
		l.front = j.next
	} else {
		panic("executor: a job removed from a list it is not in")
	}
	if j.next != nil {
		j.next.prev = j.prev
	} else {
		l.back = j.prev
	}
	j.next, j.prev = nil, nil
	l.n--
}

// pushBackList appends the jobs of o, which must be in no other list,
// in their order.
func (l *jobList) pushBackList(o *jobList) {
	if o.n == 0 {
		return
	}
	o.front.prev = l.back
	if l.back != nil {
		l.back.next = o.front
	} else {
		l.front = o.front
	}
	l.back = o.back
	l.n += o.n
}

// lightQueue is a FIFO of light tasks (go.go): the functions of reusable Go
// tasks that came in through a lane, not yet made jobs. Guarded by the
// executor's mutex.
type lightQueue struct {
	fns  []goFn
	next int // fns[:next] are taken, and nil
}

// Len returns the number of tasks in q.
func (q *lightQueue) Len() int { return len(q.fns) - q.next }

// pop removes and returns the first task; q must not be empty.
func (q *lightQueue) pop() goFn {
	fn := q.fns[q.next]
	q.fns[q.next] = nil
	q.next++
	if q.next == len(q.fns) {
		q.fns, q.next = q.fns[:0], 0
	}
	return fn
}

// add appends fns, a lane's buffer, and returns an empty buffer for the
// lane: fns itself when its tasks were copied, or q's own when q was empty
// and takes fns as it is.
func (q *lightQueue) add(fns []goFn) []goFn {
	if len(fns) == 0 {
		return fns
	}
	if q.Len() == 0 {
		old := q.fns[:0]
		q.fns, q.next = fns, 0
		return old
	}
	q.fns = append(q.fns, fns...)
	clear(fns)
	return fns[:0]
}
