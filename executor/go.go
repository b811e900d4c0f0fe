package executor

import (
	"context"
	"time"

	"github.com/groupexec/groupexec/policy"
)

// Go admits fn as a task of the named group, with weight 1, under the same
// limits, order and rejection policy as Submit, but returns no handle: it
// is for work whose outcome the caller does not wait on, as with
// errgroup.Group.Go or a worker pool's submit. Its error is Submit's: a
// refusal under Abort (ErrRejected) or the rejection handler's error,
// invalid input (ErrInvalidTask), a shut-down executor or group, a
// breaker's refusal, a resolver's invalid answer, or ctx's error if ctx is
// already done. Fn's outcome is counted in Stats and GroupStats and told
// to the listener, if any; a panic in fn is recovered as for Submit.
// Shutdown waits for tasks started with Go like any other; cancelling ctx
// cancels the task.
//
// Without a handle a task needs less: with no listener and no queue
// timeout, a task that is admitted and runs never reads the clock (no
// Result reports its wait or run time), and the caller never waits on a
// channel. An admitted task allocates itself (and, when no worker is free
// to take it, the start of a goroutine), unless ctx is context.Background:
// then it reuses a task its group or another has finished, and, with no
// listener, queue timeout, breaker or cluster limiter, it waits as its
// function alone, a word in its group's queue. A refused task allocates
// nothing once its group has refused the same way before (its error is
// shared, and must not be modified).
func (ex *Executor) Go(ctx context.Context, group string, fn func(ctx context.Context) error) error {
	if ctx == nil || group == "" || fn == nil { // what validate can refuse of a Go call, tested inline
		t := &goTask{fn: fn}
		t.kind, t.parent, t.body, t.weight = kindGo, ctx, t, 1
		if ctx == nil {
			t.parent = context.Background()
		}
		return ex.refuseInvalid(&t.job, group, 1, validate(ctx, group, 1, fn == nil))
	}
	if ex.listener != nil {
		ex.notify(onSubmitted, Event{Group: group, Weight: 1})
	}
	bg := ctx == background // compared once: an interface comparison is a call
	// A context whose Done is nil never ends: its Err is not asked (Submit).
	cancellable := !bg && ctx.Done() != nil
	if cancellable {
		if err := ctx.Err(); err != nil {
			ex.refuseCancelled(&newGoTask(ctx, fn, false).job, group, context.Cause(ctx))
			return err
		}
	}
	g, r := ex.findGroup(group)
	light := bg && ex.light // queued, it is fn alone (light.go)
	if light && g != nil && g.laneOpen.Load() && ex.pushLaneLight(g, fn) {
		return nil // joins g's backlog (lane.go)
	}
	var t *goTask
	if likelyAdmitted(g) && !light && (!bg || g.spares.n.Load() == 0) {
		t = newGoTask(ctx, fn, bg)
		if cancellable {
			t.extra() // made outside the lock, as Submit's
		}
	}
	var a admission
	var b *batch // only for a task that fits its group's bulkhead
	if ex.admit(g, r, group, 1, &a); a.v == admitRoom {
		if light && ex.queuesBehindLocked(a.g) {
			ex.queueLightLocked(a.g, fn)
			ex.openLaneLocked(a.g)
			a.g.mu.Unlock()
			return nil
		}
		b = new(batch)
		ex.admitRoomLocked(a.g, 1, &a, b)
		a.noteRefusing()
	}
	switch a.v {
	case admitStart:
		if t == nil {
			t = ex.spareOrNewLocked(a.g, ctx, fn, bg)
		}
		if ex.timed(&t.job) {
			t.submitted = ex.since()
		}
		ex.startNewLocked(&a, &t.job, b)
		ex.unlock(a.g, b)
		return nil
	case admitQueue:
		if light {
			ex.queueLightLocked(a.g, fn)
			ex.openLaneLocked(a.g)
			ex.unlock(a.g, b)
			return nil
		}
		if t == nil {
			t = ex.spareOrNewLocked(a.g, ctx, fn, bg)
		}
		if ex.timed(&t.job) && ex.timeout == 0 {
			t.submitted = ex.since() // with a timeout, queueNewLocked reads it
		}
		if cancellable {
			t.extra().unwatched = true
		}
		ex.queueNewLocked(&a, &t.job)
		ex.unlock(a.g, b)
		if cancellable {
			if testHookQueued != nil {
				testHookQueued()
			}
			ex.watchParent(&t.job)
		}
		return nil
	}
	decided, rej := ex.endRefusal(&a, b, group, 1, true, nil)
	if decided {
		if t != nil {
			putSpare(t) // allocated or pooled before the lock, and never shared
		}
		if ex.listener != nil {
			ex.notify(onRejected, Event{Group: group, Weight: 1, Status: Rejected, Err: rej})
		}
		if a.r.forced || ex.pol.RejectionPolicy() == policy.Abort {
			return rej
		}
		return nil
	}
	if t == nil {
		t = newGoTask(ctx, fn, bg)
	}
	t.g = a.refusedGroup(ex, group)
	return ex.decideRefusal(&t.job, rej)
}

// spareOrNewLocked returns a task of g kept for reuse (ctx is
// context.Background: bg), or a new one.
func (ex *Executor) spareOrNewLocked(g *group, ctx context.Context, fn func(context.Context) error, bg bool) *goTask {
	if bg {
		if t := g.takeSpareLocked(fn); t != nil {
			return t
		}
	}
	return newGoTask(ctx, fn, bg)
}

// newGoTask returns a task to run fn with ctx, which is
// context.Background if bg.
func newGoTask(ctx context.Context, fn func(context.Context) error, bg bool) *goTask {
	var t *goTask
	if bg {
		t, _ = goTaskPool.Get().(*goTask)
	}
	if t == nil {
		t = new(goTask)
	}
	t.fn = fn
	t.kind, t.parent, t.body, t.weight = kindGo, ctx, t, 1
	if bg {
		t.flags = flagBackground
	}
	return t
}

// goTask is a task submitted with Go: a job with no handle.
type goTask struct {
	job
	fn func(ctx context.Context) error
}

// A Go task has no ID, and no Result to record its outcome or channel to
// close: its outcome goes to the statistics and the listener only.
func (t *goTask) taskID() string              { return "" }
func (t *goTask) record(error, time.Duration) {}
func (t *goTask) doneChan() chan struct{}     { return nil }

func (t *goTask) call(ctx context.Context) (Status, error) {
	err := t.fn(ctx)
	return classify(err), err
}
