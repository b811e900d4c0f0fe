package executor

import (
	"context"
	"fmt"
	"reflect"
	"runtime"
	"strings"
)

// EvictGroup drops group's state: its limits are resolved afresh on next use
// (limits given by SetGroupLimits are kept: they are configuration, not
// state; ResetGroupLimits drops them), and a ShutdownGroup on it is lifted.
// An idle group is dropped at once; a busy one when it goes idle (until then
// it keeps admitting under its current limits). Running tasks of an evicted
// group release their permits as usual. It reports whether the group was
// dropped at once.
func (ex *Executor) EvictGroup(group string) bool {
	g := ex.groups.load(group)
	if g == nil {
		return false
	}
	g.mu.Lock()
	if g.dead {
		g.mu.Unlock()
		return false
	}
	if g.idle() {
		ex.dropLocked(g)
		ex.unlistIdle(g)
		known := g.known
		g.mu.Unlock()
		if known {
			ex.forget(g)
		}
		return true
	}
	g.evict = true
	g.mu.Unlock()
	return false
}

// ShutdownGroup stops the group named key from taking new tasks (they are
// refused with ErrGroupShutdown) and waits for its waiting and running tasks
// to finish. If ctx ends first, it cancels the group's remaining tasks
// (waiting ones complete Cancelled, running ones have their context
// cancelled) and returns ctx's error without waiting for them. Their cause
// (a waiting task's Result.Err, context.Cause of a running one's context)
// matches context.Canceled and ErrGroupShutdown. The group stays shut down
// until evicted. Called from one of the group's tasks, or a callback run
// for one, it returns only once ctx ends: that task finishes after it.
// An empty key names no group (no task can have it): it returns an error
// matching policy.ErrInvalidOption, as SetGroupLimits does, and keeps no
// state for it.
func (ex *Executor) ShutdownGroup(ctx context.Context, key string) error {
	if err := validGroupKey(key); err != nil {
		// A marker for it would count among Stats' groups until evicted.
		return fmt.Errorf("executor: ShutdownGroup: %w", err)
	}
	g := ex.lockMarkedGroup(key)
	g.shutdown = true
	g.evict = false // a later shutdown wins over a pending eviction
	// Kept until evicted, g is never reclaimed: listed idle, it would
	// count toward maxIdle until trimmed off, and have an idle group
	// reclaimed in its place (idleLocked lists no shut-down group).
	ex.unlistIdle(g)
	ex.closeLaneLocked(g)
	drained := ex.waitDrainLocked(g)
	ex.unlockDrained(g)
	if drained == nil {
		return nil
	}
	select {
	case <-drained:
		return nil
	case <-ctx.Done():
		ex.cancelGroup(g, ErrGroupShutdown)
		return doneErr(ctx)
	}
}

// lockMarkedGroup returns the group named key, locked, making its state if
// the executor keeps none, whatever the executor's state: a group shut down
// before its first task keeps a marker, so that new tasks are refused. The
// marker has no room unless SetGroupLimits gave the group limits.
func (ex *Executor) lockMarkedGroup(key string) *group {
	for {
		g := ex.groups.load(key)
		if g == nil {
			// Marked shut down before it is put in the index: an
			// admission that finds it before it is locked here is refused
			// as shut down, not measured against a marker's limits.
			ex.overMu.RLock()
			m := newGroup(ex, key, ex.overrides[key])
			m.shutdown = true
			g, _ = ex.groups.loadOrStore(m)
			ex.overMu.RUnlock()
		}
		if testHookMarked != nil {
			testHookMarked()
		}
		g.mu.Lock()
		if !g.dead {
			return g
		}
		g.mu.Unlock()
	}
}

// testHookMarked, when set by a test, runs in lockMarkedGroup between
// finding or making the group and locking it.
var testHookMarked func()

// Shutdown stops the executor from taking new tasks (they are refused with
// ErrShutdown) and waits for waiting and running tasks to finish. If ctx ends
// first, it cancels the remaining tasks, as Close does, and returns ctx's
// error without waiting for them; Close waits. Either way it releases the
// executor: its idle worker goroutines exit, as do the others once their
// tasks have ended.
//
// Called from a callback an executor runs (a listener, a rejection
// handler, a group breaker's OnStateChange), it could wait only for ever:
// the task it runs for finishes only once it has returned. There it stops
// taking new tasks and returns ErrCalledFromTask at once, waiting for
// nothing and cancelling nothing. Called from a task's Fn, it waits, as
// from anywhere else: a task must not shut its own executor down that way
// (it would wait for itself, as sync.WaitGroup's Wait called by a goroutine
// it waits for), but may another one.
func (ex *Executor) Shutdown(ctx context.Context) error {
	if calledInside() {
		ex.shutdown(ctx, false)
		return ErrCalledFromTask
	}
	return ex.shutdown(ctx, true)
}

// shutdown is Shutdown, which waits for the tasks only if wait is set.
func (ex *Executor) shutdown(ctx context.Context, wait bool) error {
	ex.state.CompareAndSwap(uint32(open), uint32(shuttingDown))
	// No task is admitted now, so none waits for a parked worker: a start
	// of an admitted task finds none and starts one (park).
	ex.releaseParkedNow()
	var waits []chan struct{}
	ex.groups.each(func(g *group) bool {
		g.mu.Lock()
		ex.closeLaneLocked(g) // after the state change: no task joins a lane now
		if wait {
			if c := ex.waitDrainLocked(g); c != nil {
				waits = append(waits, c)
			}
		}
		ex.unlockDrained(g)
		return true
	})
	for _, c := range waits {
		select {
		case <-c:
		case <-ctx.Done():
			ex.cancelAll(ErrShutdown)
			return doneErr(ctx)
		}
	}
	return nil
}

// Close cancels every task (waiting ones complete Cancelled, running ones
// have their context cancelled; the cause matches context.Canceled and
// ErrShutdown, as for ShutdownGroup), refuses new ones with ErrShutdown,
// and waits until every task's goroutine has returned, and every Do call's
// fn.
// Tasks run by CallerRuns belong to their callers and are not waited for.
// Close is idempotent.
//
// Called from a callback an executor runs (a listener, a rejection
// handler, a group breaker's OnStateChange), Close could wait only for
// ever: the task it runs for finishes only once Close has returned. There
// it closes the executor and cancels every task as above, and returns
// ErrCalledFromTask without waiting; the executor's goroutines still exit
// once the tasks have finished, and a Close called elsewhere waits for
// them. Any executor's callback counts: to wait from one, call Close on a
// goroutine of its own. Called from a task's Fn, Close waits, as from
// anywhere else: a task must not close its own executor that way (it
// would wait for itself), but may close another one, such as one it made
// for its own fan-out.
func (ex *Executor) Close() error {
	if calledInside() {
		ex.state.Store(uint32(closed))
		ex.cancelAll(ErrShutdown)
		go ex.close() // lets the parked workers go once the tasks have finished
		return ErrCalledFromTask
	}
	return ex.close()
}

func (ex *Executor) close() error {
	ex.state.Store(uint32(closed))
	ex.cancelAll(ErrShutdown)
	// Parked workers exit while the tasks finish: a parked worker holds
	// what its spawn function gave it (a pool's slot), which a task started
	// meanwhile may be waiting for.
	drained, released := make(chan struct{}), make(chan struct{})
	go func() { ex.releaseParked(drained); close(released) }()
	err := ex.shutdown(context.Background(), true)
	close(drained)
	<-released
	// Every task has finished, so no worker starts once the wait for the
	// workers begins: launchNow counts a worker as it starts one, for a
	// task that has started.
	exited := make(chan struct{})
	go func() { ex.workers.Wait(); close(exited) }()
	ex.releaseParked(exited)
	return err
}

// calledInside reports whether the calling goroutine runs a callback that
// an Executor called: the innermost frame of this package's code (its
// tests apart) on the stack below the exported method that asks (Close,
// Shutdown) is not one that calls a task's function (runsFn). A listener,
// a rejection handler, a breaker's OnStateChange, a timer's or a context's
// callback that completes a task: all run below such a frame, often for a
// task whose finish waits for them, and there a wait for the executor's
// tasks could include the caller's own.
//
// A task's own function is not a callback: Close or Shutdown called there
// waits, since the executor the task belongs to cannot be told from
// another (a handler admitted by Do that closes an executor it made for
// its own fan-out must wait for that executor's tasks). Go gives no
// goroutine an identity to record as a task starts, and recording one
// would cost every task; reading the stack costs only these rare calls.
func calledInside() bool {
	pcs := make([]uintptr, 64)
	var n int
	for {
		// 3: runtime.Callers, calledInside and the method that asks.
		if n = runtime.Callers(3, pcs); n < len(pcs) {
			break
		}
		pcs = make([]uintptr, 2*len(pcs))
	}
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		if strings.HasPrefix(f.Function, pkgPrefix) && !strings.HasSuffix(f.File, "_test.go") {
			return !runsFn(f.Function[len(pkgPrefix):])
		}
		if !more {
			return false
		}
	}
}

// runsFn reports whether the function of this package named name (without
// the package path) is one that calls a task's function: the body calls
// of Submit's, Go's and Do's tasks, and Do's own runs (TestCloseFromATasksFn
// covers each).
func runsFn(name string) bool {
	switch name {
	case "(*goTask).call", "(*doTask).call", "(*Executor).runDo", "(*Executor).doInCaller":
		return true
	}
	return strings.HasPrefix(name, "(*Handle[") && strings.HasSuffix(name, "]).call")
}

// pkgPrefix begins the name of every function of this package.
var pkgPrefix = reflect.TypeFor[Executor]().PkgPath() + "."

// cancelAll cancels every group's tasks. A listener call that exits the
// goroutine (runtime.Goexit) while one group's removed tasks complete ends
// it only after the later groups are cancelled too (completeEach): their
// handles are other callers', and Close starts none of their waiting tasks.
func (ex *Executor) cancelAll(reason error) {
	var groups []*group
	ex.groups.each(func(g *group) bool {
		groups = append(groups, g)
		return true
	})
	completeEach(len(groups), func(i int) { ex.cancelGroup(groups[i], reason) })
}

// cancelGroup cancels every task of g: the waiting ones are removed and
// complete Cancelled, the running ones have their context cancelled, with
// a cause matching context.Canceled and reason. No task of g starts after
// it: new ones are refused (the executor or the group is shut down), and
// a closed executor starts none of its waiting ones.
func (ex *Executor) cancelGroup(g *group, reason error) {
	cause := fmt.Errorf("%w: %w", context.Canceled, reason)
	var removed []*job
	var b batch
	g.mu.Lock()
	ex.closeLaneLocked(g)
	ex.dropLightLocked(g, g.light.n, Cancelled)
	for j := g.waiting.front; j != nil; j = g.waiting.front {
		ex.removeWaitingLocked(g, j, Cancelled)
		removed = append(removed, j)
	}
	if ex.stateNow() == closed && g.timer != nil {
		stopTimer(g.timer)
		g.timer = nil
	}
	running := g.stopRuns(cause)
	// A running task's cancel may call the stop of its Submit context's
	// own AfterFunc method, user code: one that exits the goroutine
	// (runtime.Goexit) ends it only once the other running tasks are
	// cancelled and the removed ones complete (deferred), whose handles
	// are other callers'. Both are deferred before the unlock, which may
	// dispatch and tell the listener of another group's head past its
	// queue timeout: a listener call that exits the goroutine there must
	// not leave them undone either.
	defer completeEach(len(removed), func(i int) { ex.completeRemoved(removed[i], Cancelled, cause) })
	defer completeEach(len(running), func(i int) { running[i].cancelContext(cause) })
	ex.unlock(g, &b)
}
