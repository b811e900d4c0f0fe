package executor

import (
	"context"
	"time"

	"github.com/groupexec/groupexec/internal/taskvalue"
	"github.com/groupexec/groupexec/outcome"
)

// classify maps Fn's error to a status by outcome.Classify, the module's one
// rule.
func classify(err error) Status {
	if err == nil {
		return Success // inlined: the common case costs no call
	}
	return classifyErr(err)
}

// classifyErr is classify for a non-nil error. It is kept out of line so
// that classify stays small enough to inline.
//
//go:noinline
func classifyErr(err error) Status { return outcome.Classify(err) }

// runContext returns the context Fn runs with, or the *PanicError of a
// cluster permit's Bind that panicked (Fn does not run).
//
// A Do call's context is a doCtx, which serves as the job while the call
// runs, and a task's whose Submit context can never be cancelled (its Done
// is nil, as for context.Background) is the job itself, through runCtx, so
// that it costs no context allocation. Otherwise, and whenever a cluster
// permit is bound (it cancels with a cause of its own), the job derives a
// standard cancelable context, which keeps the parent's cancellation and
// cause, from the parent seen through the job (parentCtx), which answers
// GroupFromContext as the other run contexts do.
func (j *job) runContext() (context.Context, error) {
	x := j.x.Load()
	if x == nil && j.reusable() {
		return (*groupCtx)(j.g), nil
	}
	bind := x != nil && x.bound
	if !bind && j.kind == kindDo {
		return &doCtx{parent: j.parent, j: j}, nil
	}
	if !bind && j.parent.Done() == nil {
		return (*runCtx)(j), nil
	}
	// WithCancelCause may call the parent's methods, user code that can
	// panic or exit the goroutine: cancelRun is set only once there is a
	// cancel for endRun to call.
	ctx, cancel := context.WithCancelCause((*parentCtx)(j)) // answers GroupFromContext
	x = j.extra()
	x.mu.Lock()
	x.cancelRun = cancel
	err := x.cancelled
	if err == nil {
		err = j.watchGroupLocked(x)
	}
	x.mu.Unlock()
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
	// x is made by runContext if it made a standard context. Without it the
	// job itself was the context, and nothing asked for its Done: inlined,
	// no call.
	if x := j.x.Load(); x != nil {
		j.endRunWith(x)
	}
}

func (j *job) endRunWith(x *jobExtra) {
	x.mu.Lock()
	x.ended = true
	// A channel made before this is closed below; none is made after
	// (lockDone): the completion has none to close (complete).
	x.late.Store(false)
	cancel := x.cancelRun
	x.cancelRun = nil
	// The merge of the parent into cancelCh is stopped once x.mu is
	// released: a parent with an AfterFunc method of its own makes the
	// stop user code (stopWatcher). Its call meanwhile finds the context
	// cancelled below, and does nothing.
	stop := x.stopParent
	x.stopParent = nil
	if x.cancelCh != nil && x.cancelled == nil {
		// Nothing closes the channel once the parent is no longer
		// watched: it is cancelled now, as a standard run context is
		// (cancel below), so that a goroutine that outlives the run and
		// waits on it does not wait for ever while Err reports the
		// parent's end.
		x.cancelled = context.Canceled
		close(x.cancelCh)
	}
	if x.watched {
		x.watched = false
		j.g.unwatch(j)
	}
	x.mu.Unlock()
	if stop != nil {
		stopWatcher(stop)
	}
	if cancel != nil {
		cancel(context.Canceled)
	}
}

// closeLate closes the channel of Fn's context made as the run ended or
// after (late), which the end of the run did not see. The job's completion
// calls it once it has begun (claimed), before it marks the job
// completed: a Wait that returns finds the channel closed.
func (j *job) closeLate() {
	if x := j.x.Load(); x != nil && x.late.Load() {
		x.endLate()
	}
}

// endLate closes the run context's channel, made by Done as the run ended
// or after (late), unless it was closed before. It takes x.mu only, under
// which no path takes a group's mutex: the completion calls it (closeLate),
// under its group's mutex for a Go task. Listed in its group's
// watched set, the job stays there until pruned (watchGroupLocked), as
// one listed as its run ended does.
func (x *jobExtra) endLate() {
	x.mu.Lock()
	x.ended = true
	if x.cancelCh != nil && x.cancelled == nil {
		x.cancelled = context.Canceled
		close(x.cancelCh)
	}
	x.mu.Unlock()
}

// A group's running tasks are not listed (group.running is a count), so a
// stop of the group (ShutdownGroup's or Shutdown's deadline, Close) reaches
// their contexts this way:
//
//   - The group's stop cause is set once, and a run context that is the job
//     itself (runCtx) reads it in Err while it has handed out no Done
//     channel. No task of the group starts after its stop: the group or the
//     executor refuses new tasks and its waiting ones were removed.
//   - A run context with something to signal, a Done channel made by runCtx
//     or a standard context's cancel, is listed in the group's watched set
//     while its task runs, and cancelled by the stop like a task cancelled
//     through its handle. Listing it and stopping the group take the
//     group's runMu, so it is either listed before the stop, or sees it.
//
// So a task pays nothing for this unless its Fn asks its context for Done,
// or Submit's context can be cancelled, which allocate already. A task run
// by CallerRuns (detached) belongs to its caller: a stop does not reach it.

// stopCause is why a group stopped: its tasks' contexts are cancelled with
// err. ctx is a standard context cancelled with err, through which a run
// context that is not a standard one reports err to context.Cause (Value).
type stopCause struct {
	err error
	ctx context.Context
}

func newStopCause(err error) *stopCause {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(err)
	return &stopCause{err: err, ctx: ctx}
}

// watchGroupLocked lists running j, whose run context has something to
// signal, in its group's watched set, or returns the group's stop cause if
// the group has stopped. x is j's extra, locked. A job that ended, or runs
// detached, is not listed.
func (j *job) watchGroupLocked(x *jobExtra) error {
	if j.detached() || x.ended || x.watched {
		return nil
	}
	g := j.g
	g.runMu.Lock()
	defer g.runMu.Unlock()
	if s := g.stop.Load(); s != nil {
		return s.err
	}
	if len(g.watched) >= g.pruneAt {
		// A Done asked for by a goroutine that outlived its task, in the
		// moment before its job was marked ended, lists a job that nothing
		// unlists: prune those whose handle completed, as the set doubles.
		for w := range g.watched {
			if w.done.v.Load() == completed {
				delete(g.watched, w)
			}
		}
		g.pruneAt = max(64, 2*len(g.watched))
	}
	if g.watched == nil {
		g.watched = make(map[*job]struct{})
	}
	g.watched[j] = struct{}{}
	x.watched = true
	return nil
}

// closeStopChLocked closes the Done channel of g's context (groupCtx), if
// one was made and is still open, g being stopped. g.runMu is held. The
// stop is set before the channel closes: groupCtx.Err, which may see the
// stop in between, closes it itself, so that it answers an error only once
// Done is closed.
func (g *group) closeStopChLocked() {
	if g.stopCh != nil {
		close(g.stopCh)
		g.stopCh = nil // groupCtx.Done answers closedChan once stopped
	}
}

func (g *group) unwatch(j *job) {
	g.runMu.Lock()
	delete(g.watched, j)
	g.runMu.Unlock()
}

// stopRuns stops g's running tasks with cause (the first cause stays) and
// returns those whose run context must be cancelled.
func (g *group) stopRuns(cause error) []*job {
	g.runMu.Lock()
	defer g.runMu.Unlock()
	if g.stop.CompareAndSwap(nil, newStopCause(cause)) {
		g.closeStopChLocked()
	}
	var js []*job
	for j := range g.watched {
		js = append(js, j)
	}
	return js
}

// stopped returns the cause of g's stop if it reaches j, a job whose run
// context is itself and has handed out no channel, or nil.
func (j *job) stopped() error {
	if j.detached() {
		return nil
	}
	if s := j.g.stop.Load(); s != nil {
		return s.err
	}
	return nil
}

// cancelContext cancels the run context with cause, now or, if Fn has not
// started yet, as soon as it is created. It reports whether this call
// cancelled a context that Fn may still be using: false if the context was
// cancelled before, or if Fn is known to have returned (endRun ran).
func (j *job) cancelContext(cause error) bool {
	x := j.extra()
	x.mu.Lock()
	if x.cancelled != nil {
		x.mu.Unlock()
		return false
	}
	if stop := j.stopped(); stop != nil {
		// The stop came first: its cause stays, as a standard context
		// keeps its first cause (runCtx.Value reports it).
		cause = stop
	}
	x.cancelled = cause
	cancel := x.cancelRun
	if x.cancelCh != nil {
		close(x.cancelCh)
	}
	// A stop of its group has cancelled the context already: a context
	// without a channel reads the stop in Err, and one with a channel or
	// a cancel was cancelled by the stop, or is about to be (stopRuns).
	live := !x.ended && j.stopped() == nil
	x.mu.Unlock()
	if cancel != nil {
		cancelRecovered(cancel, cause)
	}
	return live
}

// cancelRecovered cancels a standard run context with cause. Its parent,
// Submit's context, with an AfterFunc method of its own makes the call
// user code: the cancel stops the watch that method armed, through the
// stop it returned. A panic there is recovered and ignored: the context is
// cancelled by then (a standard context stops watching its parent last),
// and the caller (Handle.Cancel, a shutdown, the watcher on Submit's
// context) is not the task's goroutine, which a panic of its run context
// goes on up (runContext, endRunWith).
func cancelRecovered(cancel context.CancelCauseFunc, cause error) {
	defer func() { _ = recover() }()
	cancel(cause)
}

// runCtx is a job seen as the context of its Fn. It delegates values and
// the deadline to Submit's (or Do's) context, and is done when that context
// is, when the task is cancelled, or when its group stops; a Done channel,
// once the run has ended, is closed as a standard run context's is. Nothing
// is made until Fn asks for Done: Err reads the three without a channel.
type runCtx job

func (c *runCtx) Deadline() (time.Time, bool) { return c.parent.Deadline() }

// Value is the parent's, except for a key of a value that belongs to one
// task (taskvalue), which it does not ask the parent for (parentCtx.Value),
// and once its group's stop has cancelled the context: context.Cause finds a standard context's cause through Value,
// with a key of its own, so it then asks the stop's cancelled context
// first, which answers that key only. context.Cause then reports the
// stop's cause, as for a context derived with context.WithCancelCause.
func (c *runCtx) Value(key any) any {
	j := (*job)(c)
	if isGroupKey(key) {
		return j.g
	}
	if taskvalue.Is(key) {
		return nil // the parent's would be another task's (parentCtx.Value)
	}
	if s := j.stopOf(); s != nil {
		if v := s.ctx.Value(key); v != nil {
			return v
		}
	}
	return j.parent.Value(key)
}

// stopOf returns the stop of j's group if it is what cancelled the run
// context, or nil. As in Err, the parent's end comes first; a cancel
// through the handle before the stop keeps its own cause; a channel the
// stop has not closed yet is not cancelled.
func (j *job) stopOf() *stopCause {
	if j.g.stop.Load() == nil || j.detached() || j.parent.Err() != nil {
		return nil
	}
	return j.stoppedBy()
}

// stoppedBy is stopOf without the parent: the stop of j's group if the run
// context's own cancel (not its parent's end) was the stop's, or nil.
func (j *job) stoppedBy() *stopCause {
	s := j.g.stop.Load()
	if s == nil || j.detached() {
		return nil
	}
	if x := j.x.Load(); x != nil {
		x.mu.Lock()
		cancelled, hasCh := x.cancelled, x.cancelCh != nil
		x.mu.Unlock()
		if cancelled != s.err && (cancelled != nil || hasCh) {
			return nil
		}
	}
	return s
}

// Done makes its channel at the first call. The parent is user code, which
// may use the executor on this task (cancel it through its handle, ask its
// context's Err): it is asked whether it ended, and armed to close the
// channel when it does, with x.mu released. A parent that ends in between
// fires what is armed at once; a run that ends in between stops it.
func (c *runCtx) Done() <-chan struct{} {
	j := (*job)(c)
	x := j.extra()
	if ch := x.lockDone(j); ch != nil {
		return ch
	}
	x.mu.Unlock()
	parent := j.parent
	err := parent.Err()
	watch := parent.Done() != nil
	if ch := x.lockDone(j); ch != nil { // made by a Done beside this one, or done
		return ch
	}
	// Until now Err read the group's stop: a channel made now must be
	// closed if the group has stopped, or hear of its stop.
	if err == nil {
		err = j.stopped()
	}
	if err == nil {
		err = j.watchGroupLocked(x)
	}
	if err != nil {
		x.cancelled = err
		x.mu.Unlock()
		return closedChan
	}
	ch := make(chan struct{})
	x.cancelCh = ch
	x.late.Store(true)
	x.mu.Unlock()
	if j.done.begun() {
		// The run ended and its job's completion began before the
		// channel was made (endRun found no x to end): nothing else
		// closes it. A completion that begins after the store above
		// sees late (closeLate).
		x.endLate()
		return ch
	}
	if watch {
		stop := context.AfterFunc(parent, func() { j.cancelContext(context.Cause(parent)) })
		x.mu.Lock()
		ended := x.ended
		if !ended {
			x.stopParent = stop // endRun stops it
		}
		x.mu.Unlock()
		if ended {
			stopWatcher(stop)
		}
	}
	return ch
}

// lockDone locks x.mu and returns what the run context of j (whose extra
// x is) answers without asking its parent, with x.mu released: its
// channel, or closedChan if it is done without one. Otherwise it returns
// nil, with x.mu held.
func (x *jobExtra) lockDone(j *job) <-chan struct{} {
	x.mu.Lock()
	if x.cancelCh != nil {
		ch := x.cancelCh
		x.mu.Unlock()
		return ch
	}
	if x.cancelled == nil && (x.ended || j.done.begun()) {
		// Asked for after the run ended (by a goroutine that outlived
		// it): done, as a standard run context is once its run ends. A
		// run that ended with no x to mark (endRun) is known ended by
		// its job's completion.
		x.cancelled = context.Canceled
	}
	if x.cancelled != nil {
		x.mu.Unlock()
		return closedChan
	}
	return nil
}

// Err takes no lock while the task has never been cancelled through its
// handle and has not asked for Done, so that a Fn polling it costs little.
// The parent's error comes first, as for a derived context; then a cancel
// through the handle; without a Done channel, its group's stop (stopped);
// with one, the stop closes the channel and sets cancelled
// (watchGroupLocked), and Err follows the channel.
func (c *runCtx) Err() error {
	if err := c.parent.Err(); err != nil {
		return err
	}
	return c.errOwn()
}

// errOwn is Err without the parent's.
func (c *runCtx) errOwn() error {
	j := (*job)(c)
	if j.done.begun() {
		// Completing, so the run has ended (a run context ends with its
		// run, as a standard one does), even if nothing marked it
		// (endRun with no x).
		return context.Canceled
	}
	if x := j.x.Load(); x != nil {
		x.mu.Lock()
		cancelled, hasCh, ended := x.cancelled, x.cancelCh != nil, x.ended
		x.mu.Unlock()
		if cancelled != nil || ended {
			// Ended: done, as Done's channel is (endRun, or Done itself).
			return context.Canceled
		}
		if hasCh {
			return nil
		}
	}
	if j.stopped() != nil {
		return context.Canceled
	}
	return nil
}

func (c *runCtx) String() string { return "executor.taskContext(" + (*job)(c).taskID() + ")" }
