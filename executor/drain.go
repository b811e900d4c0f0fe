package executor

// Draining. Shutdown and ShutdownGroup wait until their groups' tasks are
// done and every one of their handles has completed, Done channels closed:
// a caller that sees the shutdown return can read every result. A task
// that finishes without a listener completes in the locked section of its
// release, so a group whose tasks are done has completed them. Otherwise
// (a listener to tell first, a task removed from its queue) the task
// completes after the lock is released, and counts as unsettled from its
// release (unsettleLocked) until it has completed (settled). So the wait
// is for "no task admitted and none unsettled", per group, and whoever
// brings a group there wakes its waiters (endLocked). A group with
// unsettled tasks is not idle, so it is never reclaimed before they
// complete.

func (g *group) drained() bool { return g.tasks() == 0 && g.unsettled.Load() == 0 }

// unsettleLocked counts j, whose admission has ended, as unsettled until it
// has completed (settled).
func (ex *Executor) unsettleLocked(g *group, _ *job) {
	g.unsettled.Add(1)
}

// settled counts one task of g completed after its admission ended. The
// last one wakes g's drain waiters and lets g go idle.
func (ex *Executor) settled(g *group) {
	if g.unsettled.Add(-1) != 0 {
		return
	}
	var b batch
	g.mu.Lock()
	ex.unlock(g, &b)
}

// waitDrainLocked registers a wait for g to drain, and returns the channel
// closed when it has, or nil if it already has (g.mu held).
func (ex *Executor) waitDrainLocked(g *group) chan struct{} {
	if g.drained() {
		return nil
	}
	c := make(chan struct{})
	g.drainWaits = append(g.drainWaits, c)
	return c
}
