package executor

import "sync/atomic"

// globalRoom is the global in-flight limit: the permits running across all
// groups. A start that fits takes its permits with one compare-and-swap and
// a finish gives them back with one add, so a start and a finish take no
// shared lock. Only while groups wait for global room (waiters > 0) do
// starts go through the dispatcher (dispatch.go), which hands freed room to
// them in turn; until then a start may take room directly.
//
// used changes only under the mutex of the group whose permits they are,
// so that with every group locked, used is the sum of the groups' running
// permits and of those in transit to the dispatcher (group.transit;
// CheckInvariants).
type globalRoom struct {
	_ [64]byte // its own cache lines: written on every start and finish
	// used is the permits running; limit the limit in force.
	used, limit atomic.Int64
	// waiters, read by every start and finish, lives apart from used,
	// written by each: next to it, its read was a cache miss each time
	// (a separate line took Do in the server workload on two cores from
	// 240 to 232 ns).
	_ [128 - 16]byte
	// waiters is the number of groups in the dispatcher's ready list: a
	// start that finds it above zero leaves the room to them.
	waiters atomic.Int64
	_       [128 - 8]byte
}

// take takes w permits if they fit under the limit, and reports whether it
// did.
func (r *globalRoom) take(w int) bool {
	for {
		u := r.used.Load()
		// Compared as room left, not as the sum, which wraps around past
		// math.MaxInt64 under a limit close to it.
		if int64(w) > r.limit.Load()-u {
			return false
		}
		if r.used.CompareAndSwap(u, u+int64(w)) {
			return true
		}
	}
}

// give gives w permits back.
func (r *globalRoom) give(w int) { r.used.Add(-int64(w)) }

// fitsAlone reports whether a start of w permits may take global room
// directly: no group waits for it, and there is room.
func (r *globalRoom) fitsAlone(w int) bool {
	return r.waiters.Load() == 0 && r.take(w)
}

func (r *globalRoom) max() int { return int(r.limit.Load()) }
