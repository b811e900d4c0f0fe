package executor

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// The group index: group keys to their state.
//
// Every admission looks its group up, on every core at once, and groups
// are made and dropped far less often than they are looked up. So a lookup
// takes no lock and writes nothing: a string hash, slot loads and a string
// compare, in an open-addressing table of group pointers with linear
// probing. Writers (a group made, a group dropped) take the index's mutex.
// A dropped group's slot gets a tombstone, which no key matches and which
// probes go past; an insert reuses the first tombstone on its key's chain.
//
// The table is rebuilt, with at least four slots per live group, once live
// groups and tombstones fill half of it, or once live groups fill less than
// a sixteenth of it (so that a burst of groups, dropped, does not leave its
// table behind). So probe chains stay short, and a rebuild's cost, one
// insert per live group, is paid for by at least as many inserts or drops
// since the last one. A reader that loaded the previous table may find a
// group dropped since: it is marked dead, and whoever locks it looks the
// key up again (lockFound); an insert made after its load it does not see,
// and makeGroup, under the mutex, finds it.
//
// It replaced a sync.Map, whose lookup hashed the key through an interface
// and compared it through another: on the grouped batch at GOMAXPROCS 1
// (1,000 groups) the lookup was 20% of the profile, ~37 ns of a ~185 ns
// task.
type groupIndex struct {
	table atomic.Pointer[indexTable]
	mu    sync.Mutex   // serializes writers
	n     atomic.Int64 // live groups
	// hint is the group whose backlog of light tasks last grew to
	// hintDepth (queueLightLocked), which findGroup tries before the table:
	// the flat batch's one group then costs a pointer load and a key
	// compare, no hash. It is written once per backlog, not per call, and
	// lives on a cache line of its own, so that callers on many cores read
	// it without contending.
	_    [64]byte
	hint atomic.Pointer[group]
	_    [56]byte
}

// hintDepth is the backlog of light tasks that makes a group the index's
// hint: a fan-out, not a task or two queued behind a busy group.
const hintDepth = 32

// indexTable is one generation of the index; a rebuild replaces it.
type indexTable struct {
	slots []atomic.Pointer[group] // length a power of two
	used  int                     // slots not nil: groups and tombstones (under the index's mutex)
}

// tombstone fills a dropped group's slot. No lookup returns it, not even
// one for its key, empty: GroupStats, EvictGroup and ShutdownGroup take
// any key.
var tombstone = &group{}

// indexSeed hashes keys for every executor's index.
var indexSeed = maphash.MakeSeed()

const minIndexSlots = 16

// load returns the group named key, or nil.
func (x *groupIndex) load(key string) *group {
	t := x.table.Load()
	if t == nil {
		return nil
	}
	mask := uint64(len(t.slots) - 1)
	for i := maphash.String(indexSeed, key) & mask; ; i = (i + 1) & mask {
		g := t.slots[i].Load()
		if g == nil {
			return nil
		}
		if g.key == key && g != tombstone {
			return g
		}
	}
}

// loadOrStore returns the group named g.key if the index has one, and
// reports true; otherwise it adds g and returns it.
func (x *groupIndex) loadOrStore(g *group) (*group, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if cur := x.load(g.key); cur != nil {
		return cur, true
	}
	t := x.table.Load()
	if t == nil || 2*(t.used+1) > len(t.slots) {
		t = x.rebuildLocked(int(x.n.Load()) + 1)
	}
	mask := uint64(len(t.slots) - 1)
	for i := maphash.String(indexSeed, g.key) & mask; ; i = (i + 1) & mask {
		switch t.slots[i].Load() {
		case nil:
			t.used++
			fallthrough
		case tombstone:
			t.slots[i].Store(g)
			x.n.Add(1)
			return g, false
		}
	}
}

// remove takes g out of the index, if it is there.
func (x *groupIndex) remove(g *group) {
	x.mu.Lock()
	defer x.mu.Unlock()
	t := x.table.Load()
	if t == nil {
		return
	}
	mask := uint64(len(t.slots) - 1)
	for i := maphash.String(indexSeed, g.key) & mask; ; i = (i + 1) & mask {
		switch t.slots[i].Load() {
		case nil:
			return
		case g:
			t.slots[i].Store(tombstone)
			if n := x.n.Add(-1); len(t.slots) > minIndexSlots && 16*n < int64(len(t.slots)) {
				x.rebuildLocked(int(n))
			}
			return
		}
	}
}

// rebuildLocked replaces the table with one of at least four slots per
// group for live groups, holding the current table's groups.
func (x *groupIndex) rebuildLocked(live int) *indexTable {
	size := minIndexSlots
	for size < 4*live {
		size *= 2
	}
	t := &indexTable{slots: make([]atomic.Pointer[group], size)}
	mask := uint64(size - 1)
	if old := x.table.Load(); old != nil {
		for s := range old.slots {
			g := old.slots[s].Load()
			if g == nil || g == tombstone {
				continue
			}
			i := maphash.String(indexSeed, g.key) & mask
			for t.slots[i].Load() != nil {
				i = (i + 1) & mask
			}
			t.slots[i].Store(g)
			t.used++
		}
	}
	x.table.Store(t)
	return t
}

// each calls f for every group in the index, in no particular order, until
// f returns false. A group added or dropped meanwhile may or may not be
// seen.
func (x *groupIndex) each(f func(*group) bool) {
	t := x.table.Load()
	if t == nil {
		return
	}
	for s := range t.slots {
		if g := t.slots[s].Load(); g != nil && g != tombstone && !f(g) {
			return
		}
	}
}
