package executor

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/groupexec/groupexec/breaker"
)

// A job keeps in line only what every task uses, and links itself into
// its group's queue without a node of its own; what only a handle needs
// (ID, outcome, Done channel) is in Handle, and what most tasks never need
// is in a jobExtra made on first use.

// jobExtra is the part of a job that most tasks never use: a watcher on
// Submit's context, cluster permits, a breaker ticket, and the run context's
// cancellation. The price is one allocation more for a task that needs it.
// Each field is guarded as the comment says; the pointer to it is set once
// (job.extra) and never changes.
type jobExtra struct {
	// guarded by the group's mutex while the job waits
	//
	// stopAfter stops the Submit-ctx watcher, if any. Once the job has
	// left its queue it is no longer the group's: the one goroutine that
	// started the job's run (its worker, endedAtStart) or completes it
	// removed (completeRemoved) calls it, with no lock held.
	stopAfter func() bool
	// unwatched: Submit's (or Go's) context can end, and the job is queued
	// while its watcher is not armed yet (watchParent), which Submit does
	// once the group's lock is released. Only watchParent clears it, while
	// the job waits: a job that starts unwatched stays so, and whether its
	// context ended is not known; asking is a call to the context, user
	// code, not made under the group's lock. Its worker asks before Fn, as
	// a Do call asks its own on waking, and does not run Fn if the context
	// has ended (endedAtStart), nor if its watcher fired (stopAfter).
	unwatched bool
	// asking: the job's worker is asking Submit's context whether it
	// ended (endedAtStart), and then its cause: the job is counted
	// started, has not run, and the listener has not been told it
	// started. Read and written by that worker only: if the context exits
	// the goroutine or panics, the worker's deferred finish counts the job
	// as never started. It is read only while the job is the worker's
	// current task, so a job whose context ended is left with it set.
	asking bool
	// cluster holds the cluster permits while running (global, group; see
	// cluster.go), when bound is set.
	cluster [2]LimiterPermit
	bound   bool

	// set by Submit before the job is shared; then used by the goroutine
	// that settles the job (a Ticket is finished once: the zero Ticket
	// ignores further calls)
	ticket breaker.Ticket // the group breaker's, settled when the job completes

	// guarded by mu
	mu         sync.Mutex
	cancelCh   chan struct{} // Done of the run context when it is the job itself
	cancelled  error         // set when the run context is cancelled
	cancelRun  context.CancelCauseFunc
	stopParent func() bool // stops the merge of Submit's context into cancelCh (context.go)
	watched    bool        // listed in its group's watched set (context.go)
	ended      bool        // the run has ended: never listed again

	// late: runCtx.Done made cancelCh, which the end of the run may not
	// see (endRun may find no x): the job's completion closes it
	// (endLate), unless endRunWith, which closes it, cleared the flag
	// first. Written under mu, read by complete without it.
	late atomic.Bool
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
// group's waiting queue. A job is in at most one list
// at a time, and only while it waits. Guarded by its group's mutex.
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
