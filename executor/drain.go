package executor

// Draining. Shutdown and ShutdownGroup wait until their tasks are done and
// every one of their handles has completed, Done channels closed: a caller
// that sees the shutdown return can read every result. A task's admission
// ends under the lock, but its handle usually completes after the lock is
// released (after the listener, or to close a channel Done handed out); such
// a task counts as unsettled from the release (releaseLocked,
// unsettleLocked) until its handle has completed. So the wait is for "no task
// admitted and none unsettled", and the goroutine that completes the last
// unsettled handle wakes the waiters. A task that finishes with no listener
// and no Done channel out completes in the locked section of its release
// (worker.go finish) and is never unsettled; that section wakes the waiters.
//
// Waking costs nothing on the hot path while nobody waits: settled touches
// the lock only when drainWanted is set. A waiter sets drainWanted before it
// reads the counts, so a handle that settles after that read sees the flag
// (atomics are sequentially consistent) and wakes it.

// settled counts one handle of g completed after its admission ended.
func (ex *Executor) settled(g *group) {
	gz := g.unsettled.Add(-1) == 0
	ez := ex.unsettled.Add(-1) == 0
	if (gz || ez) && ex.drainWanted.Load() {
		ex.mu.Lock()
		ex.wakeDrainedLocked()
		ex.mu.Unlock()
	}
}

func (g *group) drained() bool { return g.tasks() == 0 && g.unsettled.Load() == 0 }

func (ex *Executor) drained() bool { return ex.tasks == 0 && ex.unsettled.Load() == 0 }

// waitDrainLocked registers a wait for the executor (g nil) or for g to
// drain, and returns the channel closed when it has, or nil if it already
// has. The caller holds the lock.
func (ex *Executor) waitDrainLocked(g *group) chan struct{} {
	ex.drainWanted.Store(true)
	if (g == nil && ex.drained()) || (g != nil && g.drained()) {
		ex.wakeDrainedLocked() // also resets drainWanted if nobody waits
		return nil
	}
	c := make(chan struct{})
	if g == nil {
		ex.drainWaits = append(ex.drainWaits, c)
		return c
	}
	g.drainWaits = append(g.drainWaits, c)
	if ex.drainGroups == nil {
		ex.drainGroups = make(map[*group]struct{})
	}
	ex.drainGroups[g] = struct{}{}
	return c
}

// wakeDrainedLocked closes the drain channels whose executor or group has
// drained.
func (ex *Executor) wakeDrainedLocked() {
	if len(ex.drainWaits) > 0 && ex.drained() {
		for _, c := range ex.drainWaits {
			close(c)
		}
		ex.drainWaits = nil
	}
	for g := range ex.drainGroups {
		if g.drained() {
			for _, c := range g.drainWaits {
				close(c)
			}
			g.drainWaits = nil
			delete(ex.drainGroups, g)
		}
	}
	if len(ex.drainWaits) == 0 && len(ex.drainGroups) == 0 {
		ex.drainWanted.Store(false)
	}
}
