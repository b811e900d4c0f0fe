package executor

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Do admits one unit of work for group under every limit, as a task of
// weight 1, and runs fn in the calling goroutine once it is admitted; it
// returns fn's error. It is for a caller that has a goroutine already, a
// request handler for one: the work does not hop to another goroutine.
//
// The work waits in its group's FIFO queue like any task (the same order,
// shares, queue timeout and rejection policy), and is cancelled by ctx while
// it waits: it then leaves the queue at once, freeing its place. fn's
// context is derived from ctx and is also cancelled by a shutdown's
// deadline or Close; Shutdown and Close wait for fn to return.
// GroupFromContext of fn's context, or of one derived from it, returns
// group, so that a request handler run as fn need not derive it again.
//
// When fn did not run, Do always returns an error, whatever the rejection
// policy, since the caller has no handle to look at: a *RejectedError
// matching ErrRejected (with ErrQueueTimeout, ErrDisplaced, ErrTooHeavy,
// breaker.ErrOpenState, ... as for Submit), an error matching ErrShutdown
// or ErrGroupShutdown, one matching ErrInvalidTask for invalid input, or
// ctx's error. Under policy.CallerRuns a refused fn runs in the caller
// outside the limits. Under a rejection handler, the handler's error is
// returned unless it ran fn (Rejection.RunInCaller), and then fn's; a
// panic in fn run that way is recovered as for Submit, into a *PanicError.
//
// A panic in fn, or a runtime.Goexit, releases its permits and goes on up
// Do's caller's stack, as if Do were not there; the listener and Stats see
// the task Failed. One in ctx's own code that Do calls (its Done or Value
// as a queued call waits, its Err or Value as it starts, the stop of an
// AfterFunc method of its own as fn's context ends) keeps no permit, nor
// a place in the queue, either: they come back before it goes on up the
// stack, unless Do takes a stop that panics as done.
//
// An admitted call costs one small allocation, fn's context (32 B), unless
// ctx is context.Background: then, as for Go, fn's context is its group's,
// which only the group's stop cancels and which carries no values.
// Otherwise fn's context, kept past the call, is cancelled when the call
// ends, as one that fn derived with a deferred cancel would be; so is that
// of a call run in its caller (CallerRuns, RunInCaller), whatever ctx. A
// refused call
// allocates nothing once its group has refused the same way before: the
// error is the group's last one, shared, and must not be modified.
func (ex *Executor) Do(ctx context.Context, group string, fn func(context.Context) error) error {
	return ex.DoWeighted(ctx, group, 1, fn)
}

// DoWeighted is Do for work of the given weight: it takes weight permits at
// every limit (0 means 1; a negative weight is invalid).
func (ex *Executor) DoWeighted(ctx context.Context, group string, weight int, fn func(context.Context) error) error {
	if err := validate(ctx, group, weight, fn == nil); err != nil {
		ex.totals.countRefusal(Rejected, false)
		rej := &RejectedError{Group: group, Limit: LimitInvalid, Weight: invalidWeight(weight), Err: err}
		if ex.listener != nil {
			ex.notify(onRejected, Event{Group: group, Weight: rej.Weight, Status: Rejected, Err: rej})
		}
		return rej
	}
	w := max(weight, 1)
	if ex.listener != nil {
		ex.notify(onSubmitted, Event{Group: group, Weight: w})
	}
	if err := ctx.Err(); err != nil {
		ex.totals.countRefusal(Cancelled, true)
		if ex.listener != nil {
			ex.notify(onCompleted, Event{Group: group, Weight: w, Status: Cancelled, Err: context.Cause(ctx)})
		}
		return err
	}
	var now time.Duration
	if ex.listener != nil {
		now = ex.since() // the events report the wait; nothing else reads it
	}
	g, r := ex.findGroup(group)
	bg := ctx == background // compared once: an interface comparison is a call
	var d *doTask
	if likelyAdmitted(g) {
		d = newDoTask(ctx, fn, w, bg)
	}
	var a admission
	var b *batch // only for a task that fits its group's bulkhead
	if ex.admit(g, r, group, w, &a); a.v == admitRoom {
		b = new(batch)
		ex.admitRoomLocked(a.g, w, &a, b)
		a.noteRefusing()
	}
	switch a.v {
	case admitStart:
		if d == nil {
			d = newDoTask(ctx, fn, w, bg)
		}
		d.submitted = now
		ex.startNewLocked(&a, &d.job, b)
		if ex.listener != nil {
			return ex.unlockStartedDo(d, a.g, b)
		}
		ex.unlock(a.g, b)
		return ex.runDo(d)
	case admitQueue:
		if d == nil {
			d = newDoTask(ctx, fn, w, bg)
		}
		d.submitted = now
		d.wake = make(chan struct{})
		ex.queueNewLocked(&a, &d.job)
		return ex.waitDo(ctx, d, b) // it unlocks d's group
	}
	decided, rej := ex.endRefusal(&a, b, group, w, true, nil)
	if decided {
		if ex.listener != nil {
			ex.notify(onRejected, Event{Group: group, Weight: w, Status: Rejected, Err: rej})
		}
		return rej
	}
	if d == nil {
		d = newDoTask(ctx, fn, w, bg)
	}
	d.g = a.refusedGroup(ex, group)
	if ex.handler == nil {
		return ex.doInCaller(d, rej) // CallerRuns
	}
	d.wake = make(chan struct{}) // closed when the task completes, run or refused
	err := ex.decideRefusal(&d.job, rej)
	<-d.wake // RunInCaller from another goroutine may still be running it
	if d.err != error(rej) {
		return d.err // RunInCaller ran fn
	}
	if err == nil {
		err = rej
	}
	return err
}

// doTask is a Do call's task. It goes back to doTaskPool when its call
// ends, unless something may still refer to it: fn's context, when that
// is the task itself (runCtx: for a call run outside the limits), or what
// only some tasks take (jobExtra). fn's context is its group's (groupCtx)
// when the call's context is context.Background, else a doCtx.
type doTask struct {
	job
	fn func(context.Context) error
	// wake is closed when the task leaves its queue: started, or removed
	// (then status and err say why). It is made only for a task that
	// waits.
	wake chan struct{}
	err  error
}

func newDoTask(ctx context.Context, fn func(context.Context) error, w int, bg bool) *doTask {
	d, _ := doTaskPool.Get().(*doTask)
	if d == nil {
		d = new(doTask)
	}
	d.fn = fn
	d.kind, d.parent, d.body, d.weight = kindDo, ctx, d, w
	if bg {
		d.flags = flagBackground
	}
	return d
}

// doTaskPool holds the tasks of Do calls that have ended. In the server workload (2-core machine, six alternating
// runs) Do took 336 ns a request instead of 398 at GOMAXPROCS 1, and
// 1.19x x/sync's time instead of 1.50x at 2: the allocation and the
// collector's work for it were 18% of a profile at 1 and 17% at 2. A pool, not its group's spares
// as for Go: a Do task is put back by its caller, after its group's lock.
var doTaskPool sync.Pool

func (d *doTask) taskID() string                    { return "" }
func (d *doTask) record(err error, _ time.Duration) { d.err = err }
func (d *doTask) doneChan() chan struct{}           { return d.wake }

func (d *doTask) call(ctx context.Context) (Status, error) {
	err := d.fn(ctx)
	return classify(err), err
}

// errNotReturned is the recorded error of a Do call whose fn panicked or
// called runtime.Goexit: the panic itself goes on up the caller's stack.
var errNotReturned = errors.New("executor: Do's fn panicked or called runtime.Goexit")

// waitDo waits until d, queued, starts or leaves its queue, then runs it.
//
// d's group is locked, its admission's section ended by b: waitDo unlocks
// it once its deferred call is in place, since the unlock may call user
// code too. Under DiscardOldest it completes the tasks d displaced,
// telling the listener: a listener call that exits the goroutine
// (runtime.Goexit) would otherwise leave d queued with no caller, to start
// later and hold its permits for ever.
func (ex *Executor) waitDo(ctx context.Context, d *doTask, b *batch) error {
	// ctx is user code: if its Done, or once it is done its Value
	// (context.Cause), panics or exits the goroutine while d is in line,
	// d leaves its queue first (abandonDo), as a panic in fn gives its
	// permits back. A deferred call costs no allocation, and the call
	// waits anyway.
	waiting := true
	defer func() {
		if waiting {
			if p := recover(); p != nil {
				defer panic(p) // as in runDo
			}
			ex.abandonDo(d)
		}
	}()
	ex.unlock(d.g, b)
	select {
	case <-d.wake:
	case <-ctx.Done():
		cause := doneCause(ctx) // user code: not under the group's lock
		g := d.g
		g.mu.Lock()
		if d.state == stateWaiting {
			// Cancelled while waiting: it leaves the queue, freeing its place.
			ex.removeWaitingLocked(g, &d.job, Cancelled)
			waiting = false
			// Deferred, as in cancel: a listener call in the unlock's
			// dispatch that exits the goroutine leaves d counted
			// unsettled, and its group's drain waiting, otherwise.
			defer ex.completeRemoved(&d.job, Cancelled, cause)
			var b batch
			ex.unlock(g, &b)
			return doneErr(ctx)
		}
		g.mu.Unlock()
		<-d.wake // started or removed meanwhile: closed, or about to be
	}
	waiting = false
	if d.status != 0 {
		return d.err // removed: a queue timeout, a displacement, a shutdown
	}
	if err := ex.doEndedAtStart(ctx, d); err != nil {
		return err
	}
	return ex.runDo(d)
}

// abandonDo ends d, a queued call whose context panicked or exited the
// goroutine as the call waited: d leaves its queue, completing Failed, or,
// if it started meanwhile, finishes unrun, as when asking ctx at its start
// fails so (doEndedAtStart). Nothing is left to do if it was removed
// meanwhile (a queue timeout, a displacement, a shutdown).
func (ex *Executor) abandonDo(d *doTask) {
	g := d.g
	g.mu.Lock()
	if d.state == stateWaiting {
		ex.removeWaitingLocked(g, &d.job, Failed)
		// Deferred, as in cancel: a listener call in the unlock's
		// dispatch that exits the goroutine would leave d incomplete.
		defer ex.completeRemoved(&d.job, Failed, errNotReturned)
		var b batch
		ex.unlock(g, &b)
		return
	}
	g.mu.Unlock()
	<-d.wake // started or removed: closed, or about to be
	if d.status == 0 {
		ex.finishUnrun(&d.job, Failed, errNotReturned, ex.since()-d.submitted, 0)
	}
}

// doEndedAtStart reports ctx's error if it ended before d, started, could
// run: then fn does not run, and d's permits go to the next in line (the
// rule x/sync's semaphore follows since golang/go#63615). d is not counted
// as started, as a Submit or Go task whose context ended by its start is
// not (endedAtStart). ctx is user code: if asking it panics or exits the
// goroutine, d still finishes, unstarted, before that goes on up the
// caller, as a panic in fn does, so that its permits come back.
func (ex *Executor) doEndedAtStart(ctx context.Context, d *doTask) (err error) {
	// Failed until ctx has answered: 0 (no status) if it has not ended.
	st, cause := Failed, error(errNotReturned)
	defer func() {
		if st != 0 {
			if p := recover(); p != nil {
				defer panic(p) // as in runDo
			}
			ex.finishUnrun(&d.job, st, cause, ex.since()-d.submitted, 0)
		}
	}()
	if err = ctx.Err(); err == nil {
		st = 0
		return nil
	}
	st, cause = Cancelled, context.Cause(ctx)
	return err
}

// unlockStartedDo unlocks g, whose admission started d, and runs d. The
// unlock may resync g, if another section left it so as it waits for the
// dispatcher's mutex, and dispatch: time out another group's head and tell
// the listener, which may exit the goroutine (runtime.Goexit). Then d,
// counted running, finishes unrun, so that its permits come back. Only
// with a listener: without one, the unlock calls no user code.
func (ex *Executor) unlockStartedDo(d *doTask, g *group, b *batch) error {
	unlocked := false
	defer func() {
		if !unlocked {
			ex.finishUnrun(&d.job, Failed, errNotReturned, ex.since()-d.submitted, 0)
		}
	}()
	ex.unlock(g, b)
	unlocked = true
	return ex.runDo(d)
}

// runDo runs d, started, in the calling goroutine, and finishes it.
func (ex *Executor) runDo(d *doTask) (err error) {
	var start, queued time.Duration
	if ex.listener != nil {
		start = ex.since()
		queued = start - d.submitted
	}
	returned := false
	var c *doCtx // fn's context, if the task is not
	defer func() {
		if !returned {
			// fn panicked or called runtime.Goexit, or its run context or
			// the listener exited the goroutine before it ran, or the run
			// context's end did after it returned (a call's context may be
			// user code, as its own AfterFunc method's stop): its permits
			// come back, and the panic goes on up the stack.
			//
			// The panic is recovered and raised again from a deferred
			// call: the finish tells the listener and may run the group
			// breaker's callbacks, user code that, exiting the goroutine
			// (runtime.Goexit), would drop a panic still under way (Go
			// drops a panic when a deferred call exits its goroutine).
			// Raised as the goroutine exits, it goes on up; the exit goes
			// on once the caller recovers it.
			if p := recover(); p != nil {
				defer panic(p)
			}
			if c != nil {
				c.end()
			}
			d.endRun()
			ex.finish(&d.job, Failed, errNotReturned, queued, ex.ranSince(start), 0)
		}
	}()
	ctx, err := ex.begin(&d.job, queued)
	if err != nil { // a cluster permit's Bind panicked: fn does not run
		returned = true
		d.endRun()
		ex.finish(&d.job, Failed, err, queued, 0, 0)
		return err
	}
	c, _ = ctx.(*doCtx)
	err = d.fn(ctx)
	// Reused, if nothing but this call can refer to it once finished: its
	// run context was its group's, or a doCtx that lets it go. A task that
	// took anything extra (x) is left alone.
	reuse := d.reusable() || c != nil && c.end()
	d.endRun()
	returned = true
	ex.finish(&d.job, classify(err), err, queued, ex.ranSince(start), 0)
	if reuse && d.x.Load() == nil {
		*d = doTask{}
		doTaskPool.Put(d)
	}
	return err
}

// doInCaller runs d, refused (rej) under CallerRuns, in the calling
// goroutine outside every limit. A panic in fn goes on up the stack.
func (ex *Executor) doInCaller(d *doTask, rej *RejectedError) (err error) {
	d.flags |= flagDetached
	start := ex.since()
	st := Failed
	err = errNotReturned
	var c *doCtx   // fn's context
	begun := false // the listener is told it started
	// Deferred before the listener hears of the refusal, as in runInCaller:
	// a listener call that exits the goroutine leaves the outcome counted
	// (Failed, unrun), else the call would be submitted and never end.
	defer func() {
		if p := recover(); p != nil {
			defer panic(p) // as in runDo: the listener may exit the goroutine
		}
		if c != nil {
			c.end() // the task is not reused: it only ends fn's context
		}
		d.endRun()
		ex.countOutcome(d.g, st, true)
		if ex.listener != nil {
			ex.notify(onCompleted, Event{Group: rej.Group, Weight: d.weight, Status: st, Err: err, Duration: ex.since() - start, Started: begun})
		}
	}()
	if ex.listener != nil {
		ex.notify(onRejected, Event{Group: rej.Group, Weight: d.weight, Status: Rejected, Err: rej})
	}
	begun = true
	ctx, berr := ex.begin(&d.job, 0)
	if berr != nil {
		return berr
	}
	c, _ = ctx.(*doCtx)
	err = d.fn(ctx)
	st = classify(err)
	return err
}

// ranSince returns the time since start, read only when a listener is
// told (Do reads no clock otherwise).
func (ex *Executor) ranSince(start time.Duration) time.Duration {
	if ex.listener == nil {
		return 0
	}
	return ex.since() - start
}
