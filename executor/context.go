package executor

import (
	"context"
	"time"

	"github.com/groupexec/groupexec/internal/outcome"
)

// classify maps Fn's error to a status; one rule for the whole project.
func classify(err error) Status {
	switch {
	case err == nil:
		return Success
	case outcome.IsCancellation(err):
		return Cancelled
	default:
		return Failed
	}
}

// runContext returns the context Fn runs with, or the *PanicError of a
// cluster permit's Bind that panicked (Fn does not run).
//
// When Submit's context can never be cancelled (its Done is nil, as for
// context.Background), the job itself serves as the context, through runCtx,
// so a task costs no context allocation. context.Cause on it returns its Err:
// such a parent carries no cause of its own. Otherwise the job derives a
// standard cancelable context, which keeps the parent's cancellation and
// cause.
func (j *job) runContext() (context.Context, error) {
	x := j.x.Load()
	bind := x != nil && x.bound
	if j.parent.Done() == nil && !bind {
		return (*runCtx)(j), nil
	}
	// WithCancelCause may call the parent's methods, user code that can
	// panic or exit the goroutine: stdCtx is set only once there is a
	// cancel for endRun to call.
	ctx, cancel := context.WithCancelCause(j.parent)
	x = j.extra()
	x.mu.Lock()
	x.cancelRun = cancel
	err := x.cancelled
	x.mu.Unlock()
	j.stdCtx = true
	if err != nil {
		cancel(err)
	}
	if bind {
		// A cluster permit can cancel the task with a cause (a lost
		// lease), hence the standard context above.
		return j.bindCluster(ctx)
	}
	return ctx, nil
}

// endRun releases the run context's resources once Fn has returned. It runs
// on the goroutine that called runContext.
func (j *job) endRun() {
	if !j.stdCtx {
		return // the job itself was the context: nothing to release
	}
	x := j.x.Load() // made by runContext before it set stdCtx
	x.mu.Lock()
	cancel := x.cancelRun
	x.cancelRun = nil
	x.mu.Unlock()
	if cancel != nil {
		cancel(context.Canceled)
	}
}

// cancelContext cancels the run context with cause, now or, if Fn has not
// started yet, as soon as it is created.
func (j *job) cancelContext(cause error) {
	x := j.extra()
	x.mu.Lock()
	if x.cancelled != nil {
		x.mu.Unlock()
		return
	}
	x.cancelled = cause
	cancel := x.cancelRun
	if x.cancelCh != nil {
		close(x.cancelCh)
	}
	x.mu.Unlock()
	if cancel != nil {
		cancel(cause)
	}
}

// runCtx is a job seen as the context of its Fn. It delegates values and the
// deadline to Submit's context, which is never cancelled.
type runCtx job

func (c *runCtx) Deadline() (time.Time, bool) { return c.parent.Deadline() }
func (c *runCtx) Value(key any) any           { return c.parent.Value(key) }

func (c *runCtx) Done() <-chan struct{} {
	x := (*job)(c).extra()
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.cancelCh == nil {
		if x.cancelled != nil {
			return closedChan
		}
		x.cancelCh = make(chan struct{})
	}
	return x.cancelCh
}

// Err takes no lock while the task has never been cancelled, so that a Fn
// polling it costs little.
func (c *runCtx) Err() error {
	x := c.x.Load()
	if x == nil {
		return nil
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.cancelled != nil {
		return context.Canceled
	}
	return nil
}

func (c *runCtx) String() string { return "executor.taskContext(" + (*job)(c).taskID() + ")" }
