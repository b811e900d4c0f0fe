package executor

import (
	"context"
	"fmt"
)

// EvictGroup drops group's state: its limits are resolved afresh on next use
// (limits given by SetGroupLimits are kept: they are configuration, not
// state; ResetGroupLimits drops them), and a ShutdownGroup on it is lifted.
// An idle group is dropped at once; a busy one when it goes idle (until then
// it keeps admitting under its current limits). Running tasks of an evicted
// group release their permits as usual. It reports whether the group was
// dropped at once.
func (ex *Executor) EvictGroup(group string) bool {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	g := ex.groups[group]
	if g == nil {
		return false
	}
	if g.idle() {
		ex.dropLocked(g)
		return true
	}
	g.evict = true
	ex.closeLaneLocked(g)
	return false
}

// ShutdownGroup stops the group named key from taking new tasks (they are refused with
// ErrGroupShutdown) and waits for its waiting and running tasks to finish. If
// ctx ends first, it cancels the group's remaining tasks (waiting ones
// complete Cancelled, running ones have their context cancelled) and returns
// ctx's error without waiting for them. The group stays shut down until
// evicted.
func (ex *Executor) ShutdownGroup(ctx context.Context, key string) error {
	ex.mu.Lock()
	g := ex.groups[key]
	if g == nil {
		// Keep a marker so that new tasks are refused; it has no room
		// unless SetGroupLimits gave the group limits.
		g = newGroup(ex, key, ex.overrides[key])
		ex.groups[key] = g
		ex.indexLocked(g)
	}
	g.shutdown = true
	ex.closeLaneLocked(g)
	g.evict = false // a later shutdown wins over a pending eviction
	ex.idle.Remove(&g.idleNode)
	drained := ex.waitDrainLocked(g)
	ex.mu.Unlock()
	if drained == nil {
		return nil
	}
	select {
	case <-drained:
		return nil
	case <-ctx.Done():
		ex.cancelGroups(func(yield func(*group) bool) { yield(g) }, ErrGroupShutdown)
		return ctx.Err()
	}
}

// Shutdown stops the executor from taking new tasks (they are refused with
// ErrShutdown) and waits for waiting and running tasks to finish. If ctx ends
// first, it cancels the remaining tasks and returns ctx's error without
// waiting for them; Close waits.
func (ex *Executor) Shutdown(ctx context.Context) error {
	ex.mu.Lock()
	if ex.state == open {
		ex.state = shuttingDown
		ex.closeLanesLocked()
	}
	drained := ex.waitDrainLocked(nil)
	ex.mu.Unlock()
	if drained == nil {
		return nil
	}
	select {
	case <-drained:
		return nil
	case <-ctx.Done():
		ex.cancelGroups(ex.allGroups, ErrShutdown)
		return ctx.Err()
	}
}

// Close cancels every task (waiting ones complete Cancelled, running ones
// have their context cancelled), refuses new ones with ErrShutdown, and
// waits until every task's goroutine has returned. Tasks run by CallerRuns
// belong to their callers and are not waited for. Close is idempotent.
func (ex *Executor) Close() error {
	ex.mu.Lock()
	ex.state = closed
	ex.dropSparesLocked()
	ex.closeLanesLocked()
	ex.releaseParkedLocked()
	for _, g := range ex.groups {
		if g.timer != nil {
			g.timer.Stop()
			g.timer = nil
		}
	}
	ex.mu.Unlock()
	ex.dropSpareCache()
	ex.cancelGroups(ex.allGroups, ErrShutdown)
	ex.workers.Wait()
	return nil
}

func (ex *Executor) allGroups(yield func(*group) bool) {
	for _, g := range ex.groups {
		if !yield(g) {
			return
		}
	}
}

// cancelGroups cancels every task of the groups that each yields (called
// under the lock).
func (ex *Executor) cancelGroups(each func(yield func(*group) bool), reason error) {
	cause := fmt.Errorf("%w: %w", context.Canceled, reason)
	var waiting, running []*job
	var b batch
	ex.mu.Lock()
	for g := range each {
		for j := g.head(); j != nil; j = g.head() {
			ex.removeWaitingLocked(j, Cancelled)
			waiting = append(waiting, j)
		}
		running = append(running, g.stopRuns(cause)...)
	}
	ex.dispatchLocked(&b)
	ex.launchLocked(&b)
	ex.mu.Unlock()
	ex.afterUnlock(&b)
	for _, j := range running {
		j.cancelContext(cause)
	}
	for _, j := range waiting {
		ex.completeCancelled(j, cause, ex.since()-j.submitted)
	}
}
