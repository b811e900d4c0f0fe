package executor

import (
	"sync"
	"sync/atomic"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/internal/queue"
)

// Idle groups. A group with no task keeps its state (limits, counters,
// breaker) until more than maxIdle groups are idle; then the group idle the
// longest is reclaimed, but for one whose breaker is tripped, passed over
// for a few others (victim). Going idle and busy again is what most groups do
// with every task when tasks are short, so it must not take a shared lock:
// while the executor keeps no more groups than maxIdle, nothing can be
// reclaimed and no list is kept. Past that, a group going idle is listed
// (least recently idle first) under the idle list's mutex, taken inside the
// group's, and the list is trimmed to maxIdle: the groups trimmed off are
// reclaimed if they are still idle and were not listed again meanwhile.
//
// The first time the list is needed, every other group that may be idle
// is listed, in no particular order, ahead of the one going idle: a group
// seen busy lists itself when it goes idle. The list stays in use
// while the executor keeps more than half of maxIdle groups, so that a
// count hovering around maxIdle does not list them again and again.
//
// A listed group that becomes busy stays in the list until it is trimmed
// off: it is then not reclaimed. Until then it counts toward the list's
// length, so that fewer than maxIdle idle groups may be kept for a while,
// never more. An evicted group leaves the list as it is dropped, before
// the task whose finish drops it completes (unlistIdle): dropped for good,
// it would otherwise count so until trimmed off, and have a listed idle
// group reclaimed in its place.

type idleGroups struct {
	mu   sync.Mutex
	list queue.List[*group] // least recently idle first; a group's idleNode
	// complete: every group that went idle since the list came into use is
	// listed. Written under mu, read without it by a group going idle.
	complete atomic.Bool
}

// idleLocked handles g going idle (g.mu held): it stops g's timer, drops
// g if it is evicted or no idle group is kept, and otherwise lists it once
// listing is needed, putting the groups trimmed off in b.
func (ex *Executor) idleLocked(g *group, b *batch) {
	if g.timer != nil {
		stopTimer(g.timer)
		g.timer = nil
	}
	g.trimSparesLocked()
	// An idle group keeps no handle for refusals. Most groups have none:
	// the store, an exchange on amd64 on a line that Go, Do and Submit read
	// without the lock (refusing), is made only to drop one. Made always,
	// it was 7-8% of the samples of the grouped batch with Go at
	// GOMAXPROCS 2 (2-core machine), and the batch took 0.98x the time
	// without it, with ~200 ns of work 0.90x.
	if g.refusedTask.Load() != nil {
		g.refusedTask.Store(nil)
	}
	switch {
	case g.dead:
	case g.evict, ex.maxIdle == 0 && g.reclaimable():
		// An evicted g, listed before it went busy (maxIdle 0 lists
		// none), leaves the list before its task completes: a caller that
		// sees the task complete and sends another group idle must find
		// the list without g, or an idle group is reclaimed in its place.
		// And again once g has left the index, which a first listing
		// walks without the groups' mutexes (unlistIdle).
		if g.evict {
			ex.unlistIdle(g)
		}
		// The task whose finish left g idle completes before g leaves the
		// index: a Shutdown or ShutdownGroup that no longer finds g waits
		// for nothing of it. A caller that sees it complete and looks g up
		// waits for g's mutex, and finds g dropped.
		b.completeFinLocked(g)
		ex.dropLocked(g)
		if g.evict {
			ex.unlistIdle(g)
		}
		if g.known {
			b.victims.add(g) // reclaim finds it dropped, and forgets it
		}
	case !g.reclaimable():
	case ex.listingIdle():
		ex.listIdleLocked(g, b)
	}
}

// listingIdle reports whether groups going idle must be listed: the
// executor keeps more groups than maxIdle, or the list is in use. A list
// in use is forgotten by the first group going idle once the executor
// keeps half of maxIdle groups or fewer (trimIdle): until then, every
// group going idle is listed, so that the list stays complete.
func (ex *Executor) listingIdle() bool {
	return ex.groups.n.Load() > int64(ex.maxIdle) || ex.idle.complete.Load()
}

// listIdleLocked lists g as the most recently idle group, and reclaims the
// groups trimmed off the list's front (g.mu held). A trimmed group whose
// mutex is free is reclaimed at once (TryLock: with mayBeIdle, the one
// place where two group mutexes are held, and it never waits); the others go in b, to be
// reclaimed after g's mutex is released.
func (ex *Executor) listIdleLocked(g *group, b *batch) {
	var victims few[*group]
	ex.trimIdle(g, &victims)
	for i := range victims.n {
		v := victims.at(i)
		if v == g {
			// g itself, trimmed for the tripped breakers idle longer
			// (victim): dropped now, its finished task completing first,
			// as with maxIdle 0 (idleLocked). Left to reclaim, the task
			// would wait for it unsettled, which keeps g busy: reclaim
			// would pass g over, and the task complete with g kept.
			b.completeFinLocked(g)
			ex.dropLocked(g)
			if g.known {
				b.victims.add(g) // reclaim finds it dropped, and forgets it
			}
			continue
		}
		if !v.mu.TryLock() {
			b.victims.add(v)
			continue
		}
		ex.reclaimLocked(v)
		if v.dead && v.known {
			b.victims.add(v) // reclaim forgets it
		}
		v.mu.Unlock()
	}
}

// trimIdle lists g as the most recently idle group and puts the groups
// trimmed off the front in victims.
func (ex *Executor) trimIdle(g *group, victims *few[*group]) {
	l := &ex.idle
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.complete.Load() {
		// Complete from here on: a group that goes idle after this lists
		// itself (idleLocked), behind the groups listed here.
		l.complete.Store(true)
		ex.groups.each(func(o *group) bool {
			if o != g && !o.idleNode.InList() && mayBeIdle(o) {
				l.list.PushBack(&o.idleNode)
			}
			return true
		})
	}
	if g.idleNode.InList() {
		l.list.Remove(&g.idleNode) // now the most recent
	}
	l.list.PushBack(&g.idleNode)
	for l.list.Len() > ex.maxIdle {
		v := l.victim()
		l.list.Remove(v)
		victims.add(v.Value)
	}
	if ex.groups.n.Load() <= int64(ex.maxIdle/2) {
		// Too few groups to need it: stop listing, and forget the list.
		for n := l.list.Front(); n != nil; n = l.list.Front() {
			l.list.Remove(n)
		}
		l.complete.Store(false)
	}
}

// mayBeIdle reports whether o, found by the first listing (trimIdle), is
// to be listed: unless it is seen busy, dropped or kept whatever its
// idleness (a group shut down), as a group going idle is listed only if
// reclaimable (idleLocked). A listed group counts toward the list's
// length: listed busy, it would have an idle group reclaimed in its place
// while no more than maxIdle are idle. Its mutex is only tried (g's and
// the list's are held): a group whose mutex is taken is listed, as it may
// be going idle, having found the list not in use yet; one that goes idle
// once the list is complete lists itself.
func mayBeIdle(o *group) bool {
	if !o.mu.TryLock() {
		return true
	}
	defer o.mu.Unlock()
	return !o.dead && o.idle() && o.reclaimable()
}

// victim returns the listed group to trim (l.mu held): the one idle the
// longest, but for groups whose breakers are open or half-open, passed
// over for the first group after them whose breaker is closed, up to
// sparedTripped of them: the group after that many is looked at too.
// Reclaimed, a group's breaker is made afresh,
// closed: any client sending work for maxIdle new groups would otherwise
// reset the open breaker of a group gone idle, and have its dependency
// sent the calls the breaker was shedding.
func (l *idleGroups) victim() *queue.Node[*group] {
	front := l.list.Front()
	n := front
	for range sparedTripped + 1 {
		if n == nil {
			break
		}
		if br := n.Value.br; br == nil || br.State() == breaker.StateClosed {
			return n
		}
		n = n.Next()
	}
	return front
}

// sparedTripped bounds the groups with tripped breakers that one trim
// passes over: a trim stays constant work, and past that many at the
// front, the group idle the longest is reclaimed whatever its breaker, so
// that groups with tripped breakers are bounded as the others are.
const sparedTripped = 8

// unlistIdle takes g, dropped by an eviction or shut down, off the idle
// list if it is listed (g.mu held). It takes the list's mutex even if the
// list is not in use: a group going idle that lists every group (trimIdle)
// may have found g in the index before g left it. Evictions and shutdowns
// are rare.
func (ex *Executor) unlistIdle(g *group) {
	l := &ex.idle
	l.mu.Lock()
	if g.idleNode.InList() {
		l.list.Remove(&g.idleNode)
	}
	l.mu.Unlock()
}

// reclaim drops v, trimmed off the idle list, if it is still idle and
// reclaimable and was not listed again since. A dropped v leaves the
// dispatcher's known list.
func (ex *Executor) reclaim(v *group) {
	v.mu.Lock()
	ex.reclaimLocked(v)
	known := v.dead && v.known
	v.mu.Unlock()
	if known {
		ex.forget(v)
	}
}

func (ex *Executor) reclaimLocked(v *group) {
	if v.dead || !v.idle() || !v.reclaimable() {
		return
	}
	ex.idle.mu.Lock()
	listed := v.idleNode.InList()
	ex.idle.mu.Unlock()
	if !listed {
		ex.dropLocked(v)
	}
}
