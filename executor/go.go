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
// and no deadline, as context.Background, and a fn may keep it. Such a task
// that has to wait behind its group's waiting tasks costs the queue only
// fn, one word, until it reaches the head.
func (ex *Executor) Go(ctx context.Context, group string, fn func(ctx context.Context) error) error {
	if ctx == background && ex.light && fn != nil {
		// A light task: behind a waiting one, into the lane as fn alone.
		if g := ex.laneGroup(group); g != nil && g.lane.admitLight(fn) {
			return nil
		}
	}
	t := ex.newGoTask(ctx, fn)
	if ctx == nil || group == "" || fn == nil { // what validate can refuse of a Go call, tested inline
		return ex.refuseInvalid(&t.job, group, 1, validate(ctx, group, 1, fn == nil))
	}
	return ex.submit(&t.job, group)
}

// Light tasks.
//
// A Go task with context.Background is its function and its group, and
// nothing else: weight 1, no ID, no handle, no watcher, no clock reading
// (a lane opens only without a queue timeout, and light tasks only without
// a listener either). So when it must wait behind its group's waiting
// tasks, Go leaves only fn in the group's lane (admitLight), under the
// lane's mutex. It stays a function in the group's queue (group.light,
// behind the jobs in group.waiting) until it reaches the head, and only
// then, under the executor's lock, becomes a job (group.head): a reused Go
// task, usually the one the finishing worker has just completed.
//
// That is what a queued task cost on two cores: the submitting goroutine
// wrote a task that a worker on the other core had last written (reuse),
// and the worker then read it back, two cache misses per task, and the
// spare cache's lock besides. A function is one word: eight to a cache
// line. On the flat benchmark, the submitting loop went from ~42 to ~16 ns
// a task (benchmarks/README.md, session 19).
//
// A light task at the head of a group whose task has just finished starts
// without being queued as a job: as the task that finished, reused, when
// that one was a reusable Go task too (handOffLocked: its running permits
// pass to the head as they are), or else as a job made for it
// (startLightLocked).
//
// Order within the group stays FIFO: light tasks always come after the
// jobs queued before them. A lane holding light tasks takes no job behind
// them (lane.admit), so such a Submit takes the locked path, which moves
// the lane to the queue first; and a job queued behind light tasks in the
// queue makes them jobs first (flushLightLocked), as does any walk of the
// queue (DiscardOldest). A waiting light task is counted, and limited, as
// any waiting task; Close cancels it after making it a job.
//
// The buffers (a lane's and the queue's, swapped at each move) keep the
// capacity of the longest run of light tasks moved at once, 8 bytes a
// task, until the group's state is dropped (idle reclamation, EvictGroup).

// goFn is a Go task's function.
type goFn = func(ctx context.Context) error

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
