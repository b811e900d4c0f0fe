package executor

import (
	"context"
	"time"
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
// channel. With ctx context.Background, nothing of the task outlives it, so
// the executor reuses it for a later call and Go allocates nothing once
// warm; fn's context is then its group's, shared by those tasks and
// cancelled only when the group stops (ShutdownGroup's or Shutdown's
// deadline, Close), which is all that can cancel them. It carries no value
// and no deadline, as context.Background, and a fn may keep it.
func (ex *Executor) Go(ctx context.Context, group string, fn func(ctx context.Context) error) error {
	t := ex.newGoTask(ctx, fn)
	if ctx == nil || group == "" || fn == nil { // what validate can refuse of a Go call, tested inline
		return ex.refuseInvalid(&t.job, group, 1, validate(ctx, group, 1, fn == nil))
	}
	return ex.submit(&t.job, group)
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

// timed reports whether j's wait and run times are wanted: by its handle's
// Result, by the listener's events, or by the queue timeout. Only a task
// started with Go, with neither a listener nor a timeout, goes untimed.
func (ex *Executor) timed(j *job) bool {
	if !ex.untimedGo {
		return true
	}
	_, isGo := j.body.(*goTask)
	return !isGo
}
