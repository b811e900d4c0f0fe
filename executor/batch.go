package executor

import "time"

// A locked section of a group decides; what it decided that must not run
// under the group's mutex (the dispatcher, new goroutines, completions that
// tell the listener, idle listing) is collected in a batch and acted on by
// unlock, after the mutex is released.

// batch is what a locked section decided, acted on after unlocking.
type batch struct {
	gave      bool // global permits were given back: dispatch if groups wait for them
	start     few[*job]
	expired   few[*job]
	displaced few[displacement]
	victims   few[*group] // groups trimmed off the idle list, to reclaim (idle.go)
	// take: the section's goroutine is a worker that will run, as its
	// next task, the first that the section starts on a worker (taken,
	// launchLocked).
	take  bool
	taken *job
	// fin is a finished task to complete at the end of the locked section,
	// or, if groups are to be reclaimed, after them (finish).
	fin finished
}

type finished struct {
	j           *job
	st          Status
	err         error
	queued, ran time.Duration
	deferred    bool // counted unsettled, to complete after the unlock
}

type displacement struct {
	j   *job
	rej *RejectedError
}

// endLocked ends a locked section of g that may have changed its tasks:
// it handles g going idle, completes the task the section finished (b.fin),
// and wakes drain waiters if g has drained.
func (ex *Executor) endLocked(g *group, b *batch) {
	if g.idle() {
		ex.idleLocked(g, b)
	}
	if f := &b.fin; f.j != nil && f.j.g == g && !f.deferred {
		if b.victims.n == 0 {
			b.completeFinLocked(g)
		} else {
			f.deferred = true
			// Completed after the groups trimmed off the idle list are
			// reclaimed: a caller that sees the task complete sees them
			// gone.
			ex.unsettleLocked(g, f.j)
		}
	}
	if len(g.drainWaits) > 0 && g.drained() {
		for _, c := range g.drainWaits {
			close(c)
		}
		g.drainWaits = nil
	}
}

// completeFinLocked completes the task that b's section finished in g
// (b.fin), unless it has completed or is to complete after the unlock.
func (b *batch) completeFinLocked(g *group) {
	if f := &b.fin; f.j != nil && f.j.g == g && !f.deferred {
		f.j.complete(f.st, f.err, f.queued, f.ran)
		f.j = nil
	}
}

// unlock ends a locked section of g (endLocked), releases g.mu, and acts on
// b: g's place among the groups waiting for global room, a dispatch of
// the global room given back, then b's starts and completions.
func (ex *Executor) unlock(g *group, b *batch) {
	locked := false // the dispatcher's mutex, taken here
	if f := &b.fin; g.transit > 0 && f.j != nil && f.j.g == g && !f.deferred {
		// The finished task's global permits are in transit to the
		// dispatcher: its handle completes once they are back, as for any
		// task (doc.go). Given back now if the dispatcher's mutex is free,
		// as resyncLocked does; else the handle completes after the
		// resync, unsettled until then.
		if locked = ex.disp.mu.TryLock(); locked {
			ex.global.give(g.transit)
			g.transit = 0
		} else {
			f.deferred = true
			ex.unsettleLocked(g, f.j)
		}
	}
	ex.endLocked(g, b)
	if ex.wantsGlobalLocked(g) != g.inReady {
		g.resync = true // read by CheckInvariants until resync runs
	}
	switch {
	case locked:
		ex.resyncLocked(g, b)
	case g.resync || g.transit > 0:
		if ex.disp.mu.TryLock() {
			// The dispatcher's mutex is free: resync without letting go of
			// g first (the lock order is the dispatcher's, then a group's,
			// but a TryLock never waits). It saves a lock of g per finish
			// while groups wait for global room.
			ex.resyncLocked(g, b)
		} else {
			g.mu.Unlock()
			ex.resync(g, b)
		}
	case b.gave && ex.global.waiters.Load() > 0:
		g.mu.Unlock()
		ex.dispatch(b)
	default:
		g.mu.Unlock()
	}
	ex.afterUnlock(b)
}

// afterUnlock starts b's started tasks (a new goroutine, or a wake-up for a
// Do call) and completes its removed ones. No lock is held.
func (ex *Executor) afterUnlock(b *batch) {
	for i := range b.victims.n {
		ex.reclaim(b.victims.at(i))
	}
	if f := &b.fin; f.j != nil {
		f.j.complete(f.st, f.err, f.queued, f.ran)
		ex.settled(f.j.g)
	}
	for i := range b.start.n {
		ex.launch(b.start.at(i))
	}
	if n := b.expired.n + b.displaced.n; n > 0 {
		completeEach(n, func(i int) {
			if i < b.expired.n {
				ex.completeExpired(b.expired.at(i))
				return
			}
			d := b.displaced.at(i - b.expired.n)
			ex.completeRemoved(d.j, Rejected, d.rej)
		})
	}
}

// few is a list that allocates only past its first element.
type few[T any] struct {
	n    int
	one  T
	more []T
}

func (l *few[T]) add(v T) {
	if l.n == 0 {
		l.one = v
	} else {
		l.more = append(l.more, v)
	}
	l.n++
}

func (l *few[T]) at(i int) T {
	if i == 0 {
		return l.one
	}
	return l.more[i-1]
}
