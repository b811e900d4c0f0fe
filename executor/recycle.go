package executor

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Reusing Go tasks.
//
// A task started with Go and context.Background leaves nothing behind when
// it completes: it has no handle and no watcher on its context, and its run
// context is its group's (groupCtx), not the task itself. So once finish
// has completed it, under its group's lock, nothing refers to it, and the
// group keeps it for its next Go call instead of leaving it to the
// collector: a busy group whose tasks finish as new ones come allocates
// none in steady state. Those its group has no room for go to a pool that
// every Go call with context.Background draws from (goTaskPool).
//
// A group keeps at most its concurrency limit's worth (and never more
// than maxSpares) while it is busy, and one when it goes idle, so that an
// idle group costs at most a task (idle reclamation bounds the idle
// groups). A group whose tasks come one at a time, as a round-robin
// submitter's do, goes idle between them: dropping every spare then cost
// an allocation per task (the grouped batch with Go, 12 to 8 bytes a task
// at GOMAXPROCS 2; the time within the noise). On one core, the batch
// workloads with Go took 0.78-0.89x the time per task with reuse
// (grouped, the submitters' shape, flat; minimum of five alternating
// runs).

// maxSpares bounds the tasks a group keeps for reuse.
const maxSpares = 64

// background is the context a Go task must be given to be reused: any
// other may carry values or a deadline that its group's context could not
// serve, or be cancelled, which needs a watcher.
var background = context.Background()

// reusable reports whether j is a Go or Do task reused once it completes:
// its context is context.Background and it runs under the executor's
// limits (not by CallerRuns, whose task belongs to its caller). keepLocked
// and runDo also leave a task that took anything extra (a cluster permit,
// a breaker ticket).
func (j *job) reusable() bool {
	return j.flags == flagBackground // and not detached
}

// spares are a group's Go tasks kept for reuse, guarded by its mutex; n
// mirrors len(tasks) for Go to read without the lock.
type spares struct {
	tasks []*goTask
	n     atomic.Int32
}

// takeSpareLocked returns a task of g kept for reuse, set up to run fn, or
// nil.
func (g *group) takeSpareLocked(fn func(context.Context) error) *goTask {
	s := &g.spares
	k := len(s.tasks)
	if k == 0 {
		return nil
	}
	t := s.tasks[k-1]
	s.tasks[k-1] = nil
	s.tasks = s.tasks[:k-1]
	s.n.Store(int32(k - 1))
	t.fn = fn
	return t
}

// goTaskPool holds the reusable Go tasks that their group has no room to
// keep. A task queued behind its group's concurrency limit needs one of
// its own, so a fan-out larger than the limit would otherwise allocate one
// per task however many complete meanwhile. On the batch workloads with Go
// (median of five alternating runs on the 2-core machine) it took the time
// per task at GOMAXPROCS 1 from 210 to 130 ns (flat), 315 to 205
// (grouped), 320 to 200 (submitters), 325 to 220 and 400 to 300 (flat and
// grouped with work); at GOMAXPROCS 2, flat 230 to 205 and flat with work
// 330 to 290, the grouped ones within the noise. An idle group's spares
// are left to the collector, not pooled: pooling them made the grouped
// batch at 2 ~20% slower (puts under the group's lock, and gets that
// steal from the other P's pool).
var goTaskPool sync.Pool

// keepLocked keeps t, a reusable Go task that has just completed, for g's
// next Go call, if g keeps fewer than its concurrency limit's worth. It
// returns t if the pool should have it instead (putSpare), once nothing
// refers to it any more.
func (g *group) keepLocked(t *goTask) *goTask {
	s := &g.spares
	if t.x.Load() != nil {
		return nil
	}
	if len(s.tasks) >= min(g.limits.MaxConcurrency, maxSpares) {
		return t
	}
	t.renew(nil)
	s.tasks = append(s.tasks, t)
	s.n.Store(int32(len(s.tasks)))
	return nil
}

// renew makes t, a reusable Go task that has completed, a fresh task of
// its group for fn. It writes only what a task's admission and run change:
// the rest (its group, weight, context, body, kind and flags) is what
// reusable says it is. A whole-struct assignment was built on the stack and
// copied, and the copy stalled on the stack's stores: 3% of the flat
// batch with Go at GOMAXPROCS 1.
func (t *goTask) renew(fn goFn) {
	// next and prev are nil: t is in no list.
	t.submitted = 0
	t.state, t.status = 0, 0
	t.done = completion{}
	t.fn = fn
}

// putSpare gives t, which keepLocked returned, to the pool.
func putSpare(t *goTask) {
	*t = goTask{}
	goTaskPool.Put(t)
}

// trimSparesLocked lets the collector have all of g's spares but one: g
// is idle.
func (g *group) trimSparesLocked() {
	if s := &g.spares; len(s.tasks) > 1 {
		clear(s.tasks[1:])
		s.tasks = s.tasks[:1]
		s.n.Store(1)
	}
}

// groupCtx is a group seen as the run context of its reusable tasks (Go's
// and Do's), which are reused once they complete, so that no context may be
// the task itself. Such a task has no handle to cancel it and a parent that
// never ends: only its group's stop cancels it, so one context per group
// serves all of them, and a fn that keeps its context after returning keeps
// its group's, not a task since reused. Asking it for Done makes one channel
// per group, not one per task. It carries no value and no deadline, as
// context.Background, but its group (GroupFromContext); once stopped, it answers context.Cause's lookup as
// runCtx.Value does.
type groupCtx group

func (c *groupCtx) Deadline() (time.Time, bool) { return time.Time{}, false }

func (c *groupCtx) Value(key any) any {
	if isGroupKey(key) {
		return (*group)(c)
	}
	if s := (*group)(c).stop.Load(); s != nil {
		return s.ctx.Value(key)
	}
	return nil
}

func (c *groupCtx) Done() <-chan struct{} {
	g := (*group)(c)
	g.runMu.Lock()
	defer g.runMu.Unlock()
	if g.stop.Load() != nil {
		return closedChan
	}
	if g.stopCh == nil {
		g.stopCh = make(chan struct{}) // closed by stopRuns
	}
	return g.stopCh
}

// Err is nil until g's stop. The stop is set a moment before the Done
// channel handed out closes (stopRuns, endKeptContexts): Err closes it
// first if it is still open, so that Done is closed once Err answers an
// error, as the context contract wants.
func (c *groupCtx) Err() error {
	g := (*group)(c)
	if g.stop.Load() == nil {
		return nil
	}
	g.runMu.Lock()
	g.closeStopChLocked()
	g.runMu.Unlock()
	return context.Canceled
}

func (c *groupCtx) String() string { return "executor.groupContext(" + (*group)(c).key + ")" }
