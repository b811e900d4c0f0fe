package executor

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/groupexec/groupexec/breaker"
)

// doubleCompletions counts attempts to complete a handle twice. Every path
// completes a handle once; tests assert that this stays zero.
var doubleCompletions atomic.Int64

// closedChan is returned by Done methods once their event has happened, so
// that a completed handle never allocates a channel.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

type jobState uint8

const (
	stateNew jobState = iota
	stateWaiting
	stateRunning
	stateDone
)

// body is the typed half of a task: Handle[T] implements it, so the executor
// stores tasks without boxing them as any.
type body interface {
	// call runs Fn with ctx, keeps its value, and classifies the outcome.
	// It does not recover a panic: its caller does (callRecovered).
	call(ctx context.Context) (Status, error)
	// taskID returns the task's ID ("" for a task without one).
	taskID() string
	// record keeps the outcome that a Result reports beyond the status and
	// the queued time; publish calls it once, before marking the job done.
	record(err error, duration time.Duration)
	// doneChan returns the channel Done handed out, if any (for a Do
	// call, its wake-up channel).
	doneChan() chan struct{}
}

// jobKind says how a started job runs.
type jobKind uint8

const (
	kindHandle jobKind = iota // Submit's: on a worker goroutine, with a handle
	kindGo                    // Go's: on a worker goroutine, without a handle
	kindDo                    // Do's: in its caller's goroutine, woken when it starts
)

// job is the untyped state of a task, shared by Handle[T], Go's tasks and
// Do's waiters. Fields under "group" are guarded by its group's mutex;
// fields under "handle" by mu; done and the outcome are published by done.
// Rarely used state is in x (jobs.go).
type job struct {
	// group
	next, prev *job // in its group's waiting queue (jobList)
	g          *group
	// submitted is when the job was submitted, since the executor's epoch,
	// until the job completes; from then on it is how long the job waited
	// from submission to start (Result.Queued). Every reader of the
	// submission time runs before the job completes (the goroutine that
	// completes it reads it first).
	submitted time.Duration

	// set before the job is shared, then read-only
	weight int
	parent context.Context
	body   body

	x atomic.Pointer[jobExtra] // made on first use (extra)

	state  jobState // group
	kind   jobKind  // read-only
	flags  jobFlags // read-only once run
	status Status   // outcome, written once before done is set
	done   completion
}

// jobFlags are a job's facts that its other fields do not say, in one
// byte, so that a job with them stays within its size.
type jobFlags uint8

const (
	// flagDetached: run by CallerRuns, outside the executor; no group stop
	// reaches it.
	flagDetached jobFlags = 1 << iota
	// flagBackground: a Go or Do task with context.Background, reused once
	// it completes (recycle.go, do.go). The context is compared once and
	// the answer kept: comparing an interface value is a call.
	flagBackground
)

func (j *job) detached() bool { return j.flags&flagDetached != 0 }

// Handle is a submitted task: wait for it, cancel it, or watch it complete.
// A Handle is never nil and completes exactly once. It is safe for
// concurrent use.
type Handle[T any] struct {
	job
	// What only a handle needs is here, not in job, so that a task
	// started with Go or Do is smaller.
	id string
	// the channel Done handed out, announced in done
	doneCh chanSlot
	// outcome, written once before done is set
	err      error
	duration time.Duration
	// value comes before fn: a zero-size last field would be padded.
	value T
	fn    func(ctx context.Context) (T, error)
}

// Group returns the task's group key.
func (h *Handle[T]) Group() string { return h.g.key }

// ID returns the task's ID.
func (h *Handle[T]) ID() string { return h.id }

// Done returns a channel that is closed when the task has completed.
func (h *Handle[T]) Done() <-chan struct{} {
	s := h.done.v.Load()
	switch {
	case s == completed:
		return closedChan
	case s&hasChan != 0:
		return h.doneCh.Load()
	}
	// The first to ask makes the channel, then announces it in the done
	// word, which publish swaps: either publish sees the announcement and
	// closes the channel, or the announcement fails on the completed word.
	c := make(chan struct{})
	if !h.doneCh.CompareAndSwap(nil, c) {
		c = h.doneCh.Load() // another's
	}
	if testHookDoneStored != nil {
		testHookDoneStored()
	}
	if !h.done.announce() {
		return closedChan
	}
	return c
}

// testHookDoneStored, when set by a test, runs in Done between storing the
// channel and announcing it: the window a publish must be able to fall into.
var testHookDoneStored func()

// Wait blocks until the task completes and returns its result. If ctx ends
// first, Wait returns ctx's error and the task goes on; cancel it with
// Cancel. A nil ctx waits without limit.
func (h *Handle[T]) Wait(ctx context.Context) (Result[T], error) {
	if !h.done.Load() {
		var ctxDone <-chan struct{}
		if ctx != nil {
			ctxDone = ctx.Done()
		}
		select {
		case <-h.Done():
		case <-ctxDone:
			return Result[T]{}, doneErr(ctx)
		}
	}
	return h.result(), nil
}

// Result returns the task's result and true once it has completed, or the
// zero Result and false before.
func (h *Handle[T]) Result() (Result[T], bool) {
	if !h.done.Load() {
		return Result[T]{}, false
	}
	return h.result(), true
}

func (h *Handle[T]) result() Result[T] {
	return Result[T]{
		Status: h.status, Value: h.value, Err: h.err, Group: h.g.key, ID: h.id,
		Queued: h.submitted /* the queued time once done */, Duration: h.duration,
	}
}

// Cancel cancels the task, if it has not completed. A waiting task is
// removed and completes Cancelled without running; a running task's
// context is cancelled (cause context.Canceled) and its outcome is what Fn
// returns, which may be Success or Failed if Fn ignores its context.
//
// Cancel reports whether this call cancelled the task: true if it removed
// the waiting task, or was first to cancel the running task's context while
// Fn could still see it. It returns false, and does nothing, if the task
// has completed, was already cancelled (by an earlier Cancel or a
// shutdown), or runs in its submitter's goroutine (CallerRuns), which the
// executor does not cancel.
//
// A task whose Submit context ended while it waited does not run, even if
// it was started before the executor learned of the context's end: its
// worker checks before calling Fn. A Cancel meanwhile finds the task
// running; then the first of the two cancellations the executor records
// is the one the task completes with. Cancel reports true exactly when it
// is its own: the task completes Cancelled with context.Canceled. Reporting
// false, it leaves the task to complete Cancelled with the context's cause.
func (h *Handle[T]) Cancel() bool {
	if h.done.Load() {
		return false
	}
	return h.g.ex.cancel(&h.job, context.Canceled)
}

func (h *Handle[T]) taskID() string                           { return h.id }
func (h *Handle[T]) record(err error, duration time.Duration) { h.err, h.duration = err, duration }
func (h *Handle[T]) doneChan() chan struct{}                  { return h.doneCh.Load() }

func (h *Handle[T]) call(ctx context.Context) (Status, error) {
	var err error
	h.value, err = h.fn(ctx)
	return classify(err), err
}

// settle records st in the group's breaker, once: Success and Failed count,
// anything else gives the request back. It runs outside every executor lock,
// since the breaker may call OnStateChange. A finished task settles before
// its permits are released, so that its group cannot be reclaimed as idle
// with a breaker that has not yet seen the failure.
func (j *job) settle(st Status) {
	if x := j.x.Load(); x != nil { // no extra, no ticket: inlined, no call
		x.settle(st)
	}
}

// hasTicket reports whether x holds a breaker ticket not yet settled (a
// settled Ticket is zero).
func (x *jobExtra) hasTicket() bool { return x.ticket != breaker.Ticket{} }

func (x *jobExtra) settle(st Status) {
	if !x.hasTicket() {
		return // settled already, or no breaker: nothing to recover from
	}
	// Recording a failure calls the breaker's ReadyToTrip, user code whose
	// panic the breaker lets go on up. finish settles a task before it
	// releases its permits: a panic there would keep them for good, and,
	// on a worker, crash the process. It is recovered and ignored: the
	// failure is counted, the breaker does not trip.
	defer func() { _ = recover() }()
	switch st {
	case Success:
		x.ticket.Success()
	case Failed:
		x.ticket.Failure()
	default:
		x.ticket.Ignore()
	}
}

// complete settles j's breaker ticket, if not yet done, publishes the
// outcome and closes the channel Done handed out. It reports false, and
// changes nothing, if the job had already completed. The caller accounts
// for the drain (settled) if j's admission ended in an earlier locked
// section.
func (j *job) complete(st Status, err error, queued, duration time.Duration) bool {
	j.settle(st)
	ch, ok := j.publish(st, err, queued, duration)
	if ch != nil {
		close(ch)
	}
	return ok
}

// publish records the outcome and marks j done. It returns the channel to
// close (the one Done handed out, or a Do call's wake-up), or reports
// false, changing nothing, if j had already completed. It takes no lock
// (a caller may hold its group's), and when Done handed out no channel,
// which is the common case, it costs two atomic operations on one word:
// claim, then swap. A task without a handle costs one.
func (j *job) publish(st Status, err error, queued, duration time.Duration) (chan struct{}, bool) {
	if j.kind != kindHandle {
		if !j.done.v.CompareAndSwap(pending, completed) {
			doubleCompletions.Add(1)
			return nil, false
		}
		j.closeLate()
		j.status = st // read by a Do call after its wake-up, by nothing for Go
		if j.kind == kindDo {
			j.body.record(err, duration)
			return j.body.doneChan(), true
		}
		return nil, true
	}
	if !j.done.claim() {
		doubleCompletions.Add(1)
		return nil, false
	}
	j.closeLate() // before Wait can return: claimed, not completed yet
	j.status, j.submitted = st, queued
	j.body.record(err, duration)
	if j.done.v.Swap(completed)&hasChan != 0 {
		// Done stored the channel before it announced it.
		return j.body.doneChan(), true
	}
	return nil, true
}

// completion is a job's done word: pending, claimed by the completing
// goroutine while it writes the outcome, then completed; while not
// completed, the hasChan bit says that Done handed out a channel (in
// Handle.doneCh) for publish to close.
type completion struct{ v atomic.Uint32 }

const (
	pending uint32 = iota
	claimed
	completed

	hasChan uint32 = 1 << 2
)

// Load reports whether the outcome is published.
func (c *completion) Load() bool { return c.v.Load() == completed }

// begun reports whether the job's completion has begun: claimed, or
// completed. A job completes once its run (if any) has ended.
func (c *completion) begun() bool { return c.v.Load()&^hasChan != pending }

// claim takes the right to publish, once.
func (c *completion) claim() bool {
	for {
		s := c.v.Load()
		if s&^hasChan != pending {
			return false
		}
		if c.v.CompareAndSwap(s, s|claimed) {
			return true
		}
	}
}

// announce sets hasChan, reporting false if the job completed first.
func (c *completion) announce() bool {
	for {
		s := c.v.Load()
		switch {
		case s == completed:
			return false
		case s&hasChan != 0:
			return true
		}
		if c.v.CompareAndSwap(s, s|hasChan) {
			return true
		}
	}
}
