package executor

import (
	"context"
	"errors"
	"fmt"

	"github.com/groupexec/groupexec/internal/typednil"
)

// Cluster limits. A Limiter supplies permits for a limit shared with other
// executors, usually in other processes (package cluster/redislimit keeps
// them in Redis). It adds a condition to starting a task; it changes nothing
// else in the admission model: a task that gets local room but no cluster
// permit waits in its group's queue as it would for any limit, holding only
// its place in its group's bulkhead, and queue timeouts, cancellation and
// fair dispatch apply as usual.
//
// TryAcquire and Release are called under a group's mutex (and, for
// TryAcquire, possibly the dispatcher's): they must answer from the
// limiter's local state, never wait, never do I/O, and never call the
// executor (Close, say, would wait for that mutex). They must also
// return: a panic is recovered, but a runtime.Goexit cannot be, and would
// end the goroutine (a submitter's, a worker's, a notifier's) with those
// locks held and the admission or release half done, stopping the group,
// or every group, for good. Undoing that under the locks would cost every
// start a deferred call; a limiter has no reason to exit the goroutine. A limiter that has
// no permit at hand asks for more in the background and calls the notify
// function Attach gave it once it may have some: the executor then
// dispatches that key again.
//
// With no limiter configured the cost is one nil check per start.

// Limiter is what WithGlobalLimiter and WithGroupLimiter take.
type Limiter interface {
	// Attach is called once, by New, before any other method. notify must
	// be called, never from TryAcquire or Release and never under a lock
	// that TryAcquire or Release take, when key may have gained permits
	// after a TryAcquire asked it to wait; notify takes the executor's
	// locks. An error makes New fail with it. New attaches the global
	// limiter first: if the group limiter's Attach then fails, the global
	// one stays attached to an executor that never runs (its notify does
	// nothing); do not reuse it, make a new one.
	Attach(notify func(key string)) error
	// TryAcquire takes n permits for key without blocking. It returns the
	// permit, or (nil, nil) to make the task wait for notify(key), or
	// (nil, err) to refuse the task: it completes Rejected with an error
	// matching ErrRejected and err, whatever the rejection policy (a permit
	// returned together with an error is released at once). A panic in
	// TryAcquire is recovered and refuses the task the same way, err being
	// a *PanicError; it must not call runtime.Goexit (it runs under the
	// executor's locks). The global limiter is called with key "".
	TryAcquire(key string, n int) (LimiterPermit, error)
}

// LimiterPermit is a permit a Limiter supplied for one task.
type LimiterPermit interface {
	// Bind is called once, on the task's goroutine, before Fn runs, with
	// the task's context and a function that cancels it with a cause (for
	// example when the permit's lease was lost). It returns the context Fn
	// runs with: ctx, or one derived from it that carries values only. If
	// Bind panics, the task completes Failed with a *PanicError without
	// running Fn, and its permits are released. The run contexts do not
	// pass a lookup of a key of the module's internal/taskvalue on to the
	// context the task was submitted with: a value bound under one is seen
	// by its task alone, not by a task given the task's context.
	Bind(ctx context.Context, cancel context.CancelCauseFunc) context.Context
	// Release gives the permit back. It is called once, under an
	// executor lock, after Fn has returned: it must not block, nor call
	// runtime.Goexit. A panic in it is recovered and ignored: the permit
	// counts as given back.
	Release()
}

// WithGlobalLimiter adds l's permits as a condition on the global in-flight
// limit: a task starts only when it also gets its weight in permits from l
// (key ""). The policy's GlobalMaxInFlight still applies in this process.
// l must not be nil, nor hold a nil pointer, function, map, slice or
// channel: New calls its Attach.
func WithGlobalLimiter(l Limiter) Option {
	return optionFunc(func(ex *Executor) error {
		if l == nil {
			return errors.New("executor: WithGlobalLimiter(nil): the limiter must not be nil")
		}
		if typednil.Is(l) {
			return fmt.Errorf("executor: WithGlobalLimiter((%T)(nil)): the limiter must not be a nil pointer, function, map, slice or channel", l)
		}
		if ex.cluster == nil {
			ex.cluster = &clusterLimits{}
		}
		ex.cluster.global = l
		return nil
	})
}

// WithGroupLimiter adds l's permits as a condition on every group's
// concurrency limit: a task starts only when it also gets its weight in
// permits from l under its group's key. The group's own limits still apply
// in this process.
// l must not be nil, nor hold a nil pointer, function, map, slice or
// channel, as for WithGlobalLimiter.
func WithGroupLimiter(l Limiter) Option {
	return optionFunc(func(ex *Executor) error {
		if l == nil {
			return errors.New("executor: WithGroupLimiter(nil): the limiter must not be nil")
		}
		if typednil.Is(l) {
			return fmt.Errorf("executor: WithGroupLimiter((%T)(nil)): the limiter must not be a nil pointer, function, map, slice or channel", l)
		}
		if ex.cluster == nil {
			ex.cluster = &clusterLimits{}
		}
		ex.cluster.group = l
		return nil
	})
}

// clusterLimits are the configured limiters; nil on the Executor when none is.
type clusterLimits struct {
	global, group Limiter
}

// attach is called by New once every option is applied.
func (c *clusterLimits) attach(ex *Executor) error {
	if c.global != nil {
		if err := c.global.Attach(func(string) { ex.clusterNotify(nil, "") }); err != nil {
			return fmt.Errorf("executor: WithGlobalLimiter: %w", err)
		}
	}
	if c.group != nil {
		if err := c.group.Attach(func(key string) { ex.clusterNotify(c, key) }); err != nil {
			return fmt.Errorf("executor: WithGroupLimiter: %w", err)
		}
	}
	return nil
}

// clusterOutcome is what acquireLocked decided for a task.
type clusterOutcome uint8

const (
	clusterGranted    clusterOutcome = iota
	clusterWaitGlobal                // the global limiter has no permit: nothing else can start
	clusterWaitGroup                 // the group's limiter has no permit: the group waits for notify
	clusterRefused                   // a limiter refused the task: rej says why
)

// acquire takes the cluster permits of a task of weight w in the group
// named key, global then group, all or none. A permit returned together
// with an error is released: the task does not start on it. It is called
// under the group's mutex.
func (c *clusterLimits) acquire(key string, w int) (clusterOutcome, *refusal, [2]LimiterPermit) {
	var ps [2]LimiterPermit
	if c.global != nil {
		p, err := tryAcquire(c.global, "", w)
		if err != nil && p != nil {
			release(p)
		}
		switch {
		case err != nil:
			return clusterRefused, &refusal{limit: LimitClusterGlobal, err: err, forced: true}, ps
		case p == nil:
			return clusterWaitGlobal, nil, ps
		}
		ps[0] = p
	}
	if c.group != nil {
		p, err := tryAcquire(c.group, key, w)
		if err != nil && p != nil {
			release(p)
			p = nil
		}
		if p == nil && ps[0] != nil {
			release(ps[0])
			ps[0] = nil
		}
		switch {
		case err != nil:
			return clusterRefused, &refusal{limit: LimitClusterGroup, err: err, forced: true}, ps
		case p == nil:
			return clusterWaitGroup, nil, ps
		}
		ps[1] = p
	}
	return clusterGranted, nil, ps
}

// releaseClusterLocked gives back j's cluster permits, group then global
// (g.mu held). A permit given back to the group's limiter may serve its
// next task at once, so the group no longer waits for a notify.
func (ex *Executor) releaseClusterLocked(g *group, j *job) {
	x := j.x.Load()
	if x == nil || !x.bound {
		return
	}
	ps := x.cluster
	x.cluster, x.bound = [2]LimiterPermit{}, false
	if p := ps[1]; p != nil {
		release(p)
		g.clusterWait = false
	}
	if p := ps[0]; p != nil {
		release(p)
	}
}

// tryAcquire asks l for n permits for key. TryAcquire runs under a group's
// mutex, and the dispatcher's: a panic in it is recovered, and refuses the
// task with a *PanicError, instead of going on up with those locks held,
// which would stop the group, or every group, for good.
func tryAcquire(l Limiter, key string, n int) (p LimiterPermit, err error) {
	defer func() {
		if r := recover(); r != nil {
			p, err = nil, newPanicError(r)
		}
	}()
	return l.TryAcquire(key, n)
}

// release gives p back. Release runs under a group's mutex: a panic in it
// is recovered and ignored, the permit counting as given back.
func release(p LimiterPermit) {
	defer func() { _ = recover() }()
	p.Release()
}

// bindCluster lets j's cluster permits see its run context. A panic in Bind
// is returned as a *PanicError: the task fails without running Fn, and its
// permits are released as for any finished task.
func (j *job) bindCluster(ctx context.Context) (_ context.Context, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = newPanicError(r)
		}
	}()
	cancel := func(cause error) { j.cancelContext(cause) }
	for _, p := range j.x.Load().cluster {
		if p != nil {
			ctx = p.Bind(ctx, cancel)
		}
	}
	return ctx, nil
}

// clusterNotify dispatches again after a limiter gained permits: for the
// group named key (c non-nil), or for every group (the global limiter).
func (ex *Executor) clusterNotify(c *clusterLimits, key string) {
	var b batch
	if c != nil {
		if g := ex.groups.load(key); g != nil {
			g.mu.Lock()
			if g.clusterWait {
				g.clusterWait = false
				g.resync = true
			}
			ex.unlock(g, &b) // back in the ready list, and dispatched
			return
		}
	}
	ex.dispatch(&b)
	ex.afterUnlock(&b)
}
