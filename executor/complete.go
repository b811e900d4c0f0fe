package executor

import "context"

// Completing tasks that did not run under the limits: refused, removed
// from their queue, or run by their caller.

// completeRemoved completes j, removed from its queue without running
// (removeWaitingLocked counted it), as st with err: Rejected (a queue
// timeout, a displacement, a cluster limiter's refusal) or Cancelled. It
// tells the listener first, and settles j for the drain after.
func (ex *Executor) completeRemoved(j *job, st Status, err error) {
	queued := ex.since() - j.submitted
	// Deferred, so that j completes, and its drain counts it, even if the
	// listener, or the stop of the watcher below, exits the goroutine
	// (runtime.Goexit, which neither notify nor stopWatcher can recover):
	// the goroutine is the caller of Cancel, a displacing Submit's or the
	// queue timeout's, and j's handle is another's.
	defer ex.settled(j.g)
	defer j.complete(st, err, queued, 0)
	if x := j.x.Load(); x != nil && x.stopAfter != nil {
		// Never runs: Submit's context no longer needs watching (nor keeps
		// j). Removed, j is no longer the group's: its lock is not needed.
		stop := x.stopAfter
		x.stopAfter = nil
		stopWatcher(stop)
	}
	if ex.listener != nil {
		e := ex.event(j)
		e.Status, e.Err, e.Queued = st, err, queued
		if st == Rejected {
			ex.notify(onRejected, e)
		} else {
			ex.notify(onCompleted, e)
		}
	}
}

// completeEach calls complete for 0 to n-1, each completing a removed
// task (completeRemoved). A listener call that exits the goroutine
// (runtime.Goexit) ends it only after the tasks after the one it was told
// of are completed too: completeRemoved completes that one, and the rest
// may be other callers' handles, which a drain waits for. cancelAll calls
// it across groups for the same reason.
func completeEach(n int, complete func(i int)) { completeFrom(0, n, complete) }

func completeFrom(i, n int, complete func(i int)) {
	defer func() {
		if i < n { // complete(i) exited the goroutine
			completeFrom(i+1, n, complete)
		}
	}()
	for ; i < n; i++ {
		complete(i)
	}
}

func (ex *Executor) completeExpired(j *job) {
	ex.completeRemoved(j, Rejected, &RejectedError{Group: j.g.key, ID: j.taskID(), Limit: LimitQueueTimeout,
		Weight: j.weight, Err: ErrQueueTimeout})
}

// completeRefused completes j, refused before admission (its group has no
// task of it; the refusal is counted), as st with err, telling the
// listener.
func (ex *Executor) completeRefused(j *job, st Status, err error) {
	if ex.listener != nil {
		e := ex.event(j)
		e.Status, e.Err = st, err
		if st == Rejected {
			ex.notify(onRejected, e)
		} else {
			ex.notify(onCompleted, e)
		}
	}
	j.complete(st, err, 0, 0)
}

// runInCaller runs j, refused with rej, in the calling goroutine, outside
// every limit, and completes it. The listener hears of the refusal first,
// as of every task run in its caller (CallerRuns or RunInCaller); a
// listener call that exits the goroutine completes j Failed, unrun.
func (ex *Executor) runInCaller(j *job, rej error) {
	j.flags |= flagDetached
	start := ex.since()
	queued := start - j.submitted
	st, err := Failed, error(ErrGoexit)
	var c *doCtx   // a Do call's context
	begun := false // the listener is told it started
	defer func() {
		ran := ex.since() - start
		// Deferred, so that j is counted and completes even if the end of
		// its run context panics: derived from Submit's context, its cancel
		// may call that context's own stop of an AfterFunc, user code. The
		// panic goes on up the caller; j's handle may be waited on by
		// another goroutine (RunInCaller's caller, the handler's).
		defer func() {
			j.settle(st)
			ex.countOutcome(j.g, st, true)
			// Deferred, so that j completes even if the listener exits the
			// goroutine (runtime.Goexit): with RunInCaller it may be another
			// than the submitter's, which holds j's handle.
			defer j.complete(st, err, queued, ran)
			if ex.listener != nil {
				e := ex.event(j)
				e.Status, e.Err, e.Queued, e.Duration = st, err, queued, ran
				e.Started = begun
				ex.notify(onCompleted, e)
			}
		}()
		if c != nil {
			c.end() // the task is not reused: it only ends fn's context
		}
		j.endRun()
	}()
	if ex.listener != nil {
		e := ex.event(j)
		e.Status, e.Err = Rejected, rej
		ex.notify(onRejected, e)
	}
	begun = true
	ctx, berr := ex.begin(j, queued)
	if berr != nil {
		st, err = Failed, berr
		return
	}
	c, _ = ctx.(*doCtx)
	st, err = callRecovered(j.body, ctx)
}

// callRecovered calls b with ctx, recovering a panic into a *PanicError.
func callRecovered(b body, ctx context.Context) (st Status, err error) {
	defer func() {
		if r := recover(); r != nil {
			st, err = Failed, newPanicError(r)
		}
	}()
	return b.call(ctx)
}

// cancel cancels j: a waiting j is removed and completes Cancelled with
// cause; a running j's context is cancelled with cause. It reports whether
// it did either (cancelContext says for a running j).
func (ex *Executor) cancel(j *job, cause error) bool {
	g := j.g
	ex.lockDrained(g) // a task in g's lane is waiting too
	switch j.state {
	case stateWaiting:
		ex.removeWaitingLocked(g, j, Cancelled)
		// Deferred: the unlock may dispatch, and complete another group's
		// head found past its queue timeout, telling the listener, whose
		// call may exit the goroutine (runtime.Goexit). j's handle is
		// another caller's, and its drain counts it until it completes.
		defer ex.completeRemoved(j, Cancelled, cause)
		var b batch
		ex.unlock(g, &b)
		return true
	case stateRunning:
		ex.unlockDrained(g)
		return j.cancelContext(cause)
	}
	ex.unlockDrained(g)
	return false
}

// stopWatcher stops a watcher armed by context.AfterFunc and reports
// whether it stopped it before it fired. A context with an AfterFunc method
// of its own makes stop call the function that method returned, user code:
// it is called with no lock held, and a panic in it is recovered and
// ignored, so that the task's permits and completion do not depend on it.
// context.AfterFunc calls that function only once it has made sure the
// watcher never fires: a panic means that stop stopped it.
func stopWatcher(stop func() bool) (stopped bool) {
	defer func() {
		if recover() != nil {
			stopped = true
		}
	}()
	return stop()
}
