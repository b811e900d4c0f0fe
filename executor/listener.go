package executor

import (
	"context"
	"sync/atomic"
	"time"
)

// Event describes a task to a Listener.
type Event struct {
	Group  string // the task's group
	ID     string // the task's ID (Task.ID), possibly empty
	Weight int    // the permits the task takes (0 in Task.Weight reads 1)
	// Status and Err are set for OnCompleted and OnRejected.
	Status Status
	Err    error
	// Queued and Duration are as in Result; Queued is set from OnStarted on.
	Queued   time.Duration
	Duration time.Duration
	// Started, set for OnCompleted, reports whether OnStarted was called
	// for the task: false for one Cancelled while it waited, or whose
	// context had ended by its start (Cancelled), or panicked or exited
	// the goroutine as the executor asked it then (Failed): none of them
	// ran. Duration alone cannot tell them from a task that ran for a
	// measured 0.
	Started bool
}

// Listener observes tasks. It is for metrics, logs and traces only: its calls
// may run concurrently and on any goroutine, never under an executor lock,
// and a panic in one is recovered and ignored.
//
// For each task: OnSubmitted once its input is valid, then either OnRejected
// (refused, or timed out in the queue), or OnStarted followed by OnCompleted,
// or OnCompleted alone (Cancelled while waiting, or never run: see
// Event.Started). A task run in its caller (CallerRuns, or a rejection
// handler's Rejection.RunInCaller) sees OnRejected, then OnStarted and
// OnCompleted. Invalid input gets OnRejected only.
//
// OnCompleted is called before the task's handle completes (a caller that
// has its result knows the listener was told): there the task's own
// Handle.Wait never returns, and its Result reports false. The task's
// permits are back by then, but a task that their release started (its
// group's next, or one the freed global room let start) may wait to run,
// counted running, until OnCompleted returns: it runs next on the same
// goroutine. So OnCompleted must not wait for the room of the task's group
// (a Do or a Handle.Wait there), nor for another task, and a slow one
// delays the next.
//
// An executor has one Listener (WithListener); Listeners makes one of
// several, a metrics collector and one's own, say.
type Listener interface {
	OnSubmitted(Event) // a task with valid input arrived, before its admission
	OnStarted(Event)   // its function starts, under its permits or in its caller
	OnCompleted(Event) // it completed, having started, or Cancelled while it waited
	OnRejected(Event)  // it was refused, timed out in its queue or was displaced
}

// ListenerFuncs is a Listener made of optional functions; nil ones are
// skipped.
type ListenerFuncs struct {
	// Submitted, Started, Completed and Rejected are called by OnSubmitted,
	// OnStarted, OnCompleted and OnRejected.
	Submitted, Started, Completed, Rejected func(Event)
}

// OnSubmitted calls Submitted, if set.
func (l ListenerFuncs) OnSubmitted(e Event) { call(l.Submitted, e) }

// OnStarted calls Started, if set.
func (l ListenerFuncs) OnStarted(e Event) { call(l.Started, e) }

// OnCompleted calls Completed, if set.
func (l ListenerFuncs) OnCompleted(e Event) { call(l.Completed, e) }

// OnRejected calls Rejected, if set.
func (l ListenerFuncs) OnRejected(e Event) { call(l.Rejected, e) }

func call(f func(Event), e Event) {
	if f != nil {
		f(e)
	}
}

// Rejection is a task refused for lack of room, as a RejectionHandler sees it.
type Rejection struct {
	Group  string // the task's group
	ID     string // the task's ID, possibly empty
	Weight int    // the permits the task asked for
	// Ctx is the context the task was submitted with.
	Ctx context.Context
	// Err is the refusal: a *RejectedError matching ErrRejected.
	Err error

	ex    *Executor
	j     *job
	state atomic.Int32 // rejectionOpen, then rejectionRan or rejectionClosed, once
}

const (
	rejectionOpen int32 = iota
	rejectionRan
	rejectionClosed
)

// RunInCaller runs the task now, in the calling goroutine, outside every
// limit, and completes its handle with the outcome, as CallerRuns does. Only
// the first call before the handler returns runs the task; other calls, and
// calls after the handler has returned, do nothing.
func (r *Rejection) RunInCaller() {
	if r.state.CompareAndSwap(rejectionOpen, rejectionRan) {
		r.ex.runInCaller(r.j, r.Err)
	}
}

// RejectionHandler decides what happens to a task refused for lack of room
// (a full bulkhead or queue), instead of the policy's default. Its returned
// error is what Submit returns. Unless it calls RunInCaller, the task's handle
// completes Rejected with r.Err. It runs in Submit's goroutine, outside every
// lock; a panicking handler counts as returning r.Err, and one that exits
// the goroutine (runtime.Goexit) leaves the task Rejected too.
//
// It is not called for refusals that leave no choice (a task too heavy to
// ever run, invalid input, a shutdown, an open group breaker, a resolver's
// invalid answer: Submit returns those errors) nor for queue timeouts
// (Submit has already returned).
type RejectionHandler func(r *Rejection) error

func (ex *Executor) event(j *job) Event {
	return Event{Group: j.g.key, ID: j.taskID(), Weight: j.weight}
}

// notify calls one listener method with panics recovered.
func (ex *Executor) notify(f func(Listener, Event), e Event) {
	if ex.listener == nil {
		return
	}
	defer func() { _ = recover() }()
	f(ex.listener, e)
}

var (
	onSubmitted = Listener.OnSubmitted
	onStarted   = Listener.OnStarted
	onCompleted = Listener.OnCompleted
	onRejected  = Listener.OnRejected
)
