package executor

import (
	"hash/maphash"
	"sync/atomic"
)

// The group index: Submit's way to its group's lane without the
// executor's lock (lane.go).
//
// It is only a cache of ex.groups, which stays the truth: a group it does
// not find sends Submit to the locked path, which looks in ex.groups, and a
// group it finds that is no longer there has its lane closed, which sends
// Submit there too. So it may lag behind ex.groups, and readers need no
// more than atomic loads.
//
// It replaced a sync.Map, whose lookup hashed the key through an interface
// and compared it through another: ~20 ns of a ~140 ns grouped task. Here a
// lookup is a string hash, a slot load and a string compare.
//
// An open-addressing table of group pointers with linear probing, written
// only under the executor's lock. A dropped group's slot gets a tombstone,
// which no key matches. The table is rebuilt from ex.groups, with at least
// four slots per live group, once live groups and tombstones fill half of
// it, or once live groups fill less than a sixteenth of it (so that a
// burst of groups, dropped, does not leave its table behind). So probe
// chains stay short, and a rebuild's cost, one insert per live group, is
// paid for by at least as many inserts or drops since the last one.

// groupIndex is one generation of the table; a rebuild replaces it.
type groupIndex struct {
	slots []atomic.Pointer[group] // length a power of two
	used  int                     // slots not nil: groups and tombstones (the executor's lock)
}

// tombstone fills a dropped group's slot: probes go past it, and its key,
// empty, matches no group's.
var tombstone = &group{}

// indexSeed hashes keys for every executor's index.
var indexSeed = maphash.MakeSeed()

const minIndexSlots = 16

// find returns the group the index holds for key, or nil.
func (ix *groupIndex) find(key string) *group {
	mask := uint64(len(ix.slots) - 1)
	for i := maphash.String(indexSeed, key) & mask; ; i = (i + 1) & mask {
		g := ix.slots[i].Load()
		if g == nil {
			return nil
		}
		// The key is read from the lane's cache lines (lane.go), which
		// the caller is about to use, not from the group's first ones,
		// which workers write.
		if g.lane.key == key {
			return g
		}
	}
}

// findGroup returns the group the index holds for key, or nil.
func (ex *Executor) findGroup(key string) *group {
	return ex.index.Load().find(key)
}

// laneGroup returns the group named key for Submit's lane path, without
// the executor's lock: the hint if it is that group, else the index's. Nil
// or a stale group sends Submit to the locked path.
func (ex *Executor) laneGroup(key string) *group {
	if g := ex.hint.Load(); g != nil && g.lane.key == key {
		return g
	}
	return ex.findGroup(key)
}

// indexLocked adds g, just put in ex.groups, to the index.
func (ex *Executor) indexLocked(g *group) {
	ix := ex.index.Load()
	if 2*(ix.used+1) > len(ix.slots) {
		ex.reindexLocked()
		return // ex.groups has g
	}
	ix.put(g)
}

// unindexLocked removes g, just dropped from ex.groups, from the index.
func (ex *Executor) unindexLocked(g *group) {
	ix := ex.index.Load()
	mask := uint64(len(ix.slots) - 1)
	for i := maphash.String(indexSeed, g.key) & mask; ; i = (i + 1) & mask {
		switch ix.slots[i].Load() {
		case nil:
			return // not there: indexLocked follows every insert into ex.groups
		case g:
			ix.slots[i].Store(tombstone)
			if len(ix.slots) > minIndexSlots && 16*len(ex.groups) < len(ix.slots) {
				ex.reindexLocked()
			}
			return
		}
	}
}

// reindexLocked replaces the index with a fresh one holding ex.groups.
func (ex *Executor) reindexLocked() {
	n := minIndexSlots
	for n < 4*len(ex.groups) {
		n *= 2
	}
	ix := &groupIndex{slots: make([]atomic.Pointer[group], n)}
	for _, g := range ex.groups {
		ix.put(g)
	}
	ex.index.Store(ix)
}

// put adds g to ix, which has room, in the first free slot of its probe
// chain. Tombstones are not reused: the table is rebuilt before they fill
// it, which keeps used a count that only grows.
func (ix *groupIndex) put(g *group) {
	mask := uint64(len(ix.slots) - 1)
	for i := maphash.String(indexSeed, g.key) & mask; ; i = (i + 1) & mask {
		if ix.slots[i].Load() == nil {
			ix.slots[i].Store(g)
			ix.used++
			return
		}
	}
}
