package executor

import (
	"context"
	"time"
)

// completeRejected completes a j that never ran as Rejected.
func (ex *Executor) completeRejected(j *job, rej *RejectedError, queued time.Duration) {
	ex.mu.Lock()
	ex.counts.add(Rejected)
	if ex.groups[j.g.key] == j.g {
		j.g.counts.add(Rejected)
	}
	ex.mu.Unlock()
	ex.publishRejected(j, rej, queued)
}

// publishRejected tells the listener and completes j Rejected; the caller
// has counted it.
func (ex *Executor) publishRejected(j *job, rej *RejectedError, queued time.Duration) {
	if ex.listener != nil {
		e := ex.event(j)
		e.Status, e.Err, e.Queued = Rejected, rej, queued
		ex.notify(onRejected, e)
	}
	j.complete(Rejected, rej, queued, 0)
}

func (ex *Executor) completeExpired(j *job) {
	rej := &RejectedError{Group: j.g.key, ID: j.taskID(), Limit: LimitQueueTimeout, Weight: j.weight,
		Used: 0, Max: 0, Err: ErrQueueTimeout}
	ex.publishRejected(j, rej, ex.since()-j.submitted)
}

// completeCancelled completes a j that never ran as Cancelled; the caller has
// counted it.
func (ex *Executor) completeCancelled(j *job, cause error, queued time.Duration) {
	if ex.listener != nil {
		e := ex.event(j)
		e.Status, e.Err, e.Queued = Cancelled, cause, queued
		ex.notify(onCompleted, e)
	}
	j.complete(Cancelled, cause, queued, 0)
}

// runInCaller runs j in the calling goroutine, outside every limit.
func (ex *Executor) runInCaller(j *job) {
	j.flags |= detached
	start := ex.since()
	queued := start - j.submitted
	st, err := Failed, ErrGoexit
	defer func() {
		ran := ex.since() - start
		j.endRun()
		j.settle(st)
		ex.mu.Lock()
		ex.counts.CallerRuns++
		ex.counts.add(st)
		if ex.groups[j.g.key] == j.g {
			j.g.counts.CallerRuns++
			j.g.counts.add(st)
		}
		ex.mu.Unlock()
		if ex.listener != nil {
			e := ex.event(j)
			e.Status, e.Err, e.Queued, e.Duration = st, err, queued, ran
			ex.notify(onCompleted, e)
		}
		j.complete(st, err, queued, ran)
	}()
	ctx, berr := ex.begin(j, queued)
	if berr != nil {
		st, err = Failed, berr
		return
	}
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
// cause; a running j's context is cancelled with cause.
func (ex *Executor) cancel(j *job, cause error) {
	ex.mu.Lock()
	switch j.state {
	case stateWaiting:
		ex.removeWaitingLocked(j, Cancelled)
		var b batch
		ex.dispatchLocked(&b)
		ex.launchLocked(&b)
		ex.mu.Unlock()
		ex.afterUnlock(&b)
		ex.completeCancelled(j, cause, ex.since()-j.submitted)
	case stateRunning:
		ex.mu.Unlock()
		j.cancelContext(cause)
	default:
		ex.mu.Unlock()
	}
}
