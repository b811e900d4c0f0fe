package redislimit

import "time"

// A holder's share of a contended key: what Redis said of it, and what the
// holder does with it (scripts.go explains how Redis splits a limit).

// held returns the permits this holder has leased for the key, and how
// many of them no task holds.
func (ks *keyState) held() (held, free int) {
	for _, le := range ks.leases {
		held += len(le.slots)
		free += len(le.free)
	}
	return held, free
}

// excessLocked is how many permits this holder should give back: what it
// holds above its cap while others wait, once it has held it for a quantum
// (the renew interval) since its last grant. A block just leased is kept
// that long, so that the tasks waiting for it get to run on it (a task may
// also wait for another limit, the global one, before it can start), and a
// contended key's permits change hands once a quantum, not at the rate of
// round trips.
//
// After the key's limit was lowered (GroupsFunc), until Redis has said that
// no more than the new limit is leased (ks.lowered), it is every permit
// held here, with no quantum: the holders together may hold more than the
// new limit though this one does not, so every free permit goes back, and
// a task that starts asks Redis for one.
func (ks *keyState) excessLocked(now time.Time) int {
	if ks.others == 0 && !ks.lowered {
		return 0 // TryAcquire's path: no loop over the leases
	}
	held, _ := ks.held()
	over := 0
	if ks.lowered {
		over = held
	}
	if ks.others > 0 && held > ks.cap && now.Sub(ks.granted) >= ks.l.h.cfg.renew {
		over = max(over, held-ks.cap)
	}
	return max(over, 0)
}

// wholeHere reports whether the whole limit of a key is leased here and a
// task of weight n cannot run on the permits free here: Redis has nothing
// to grant, and the task waits for a task of the key to end here. The
// tasks running here hold more than limit-n permits; more than the limit
// is leased here only after the limit was lowered (GroupsFunc).
func wholeHere(held, free, n, limit int) bool {
	return held >= limit && held-free+n > limit
}

// idleLocked is how many permits that no task holds this holder should
// give back while others wait, and when. While another holder waits for
// room below an even split (deprived), all of them; otherwise those above
// its cap. They go once no task of the key has taken or released one here
// for a poll interval (a permit free for a moment, because the executor
// started another group's task first or this key's next task is on its
// way, stays); but a block no task has run on yet is kept a quantum (the
// renew interval) from its grant, since its task may be waiting for
// another limit (the global one) before it can take it. None while a task
// of the key waits here for more: the refill gives them back if they do
// not fit it.
func (ks *keyState) idleLocked(now time.Time) (n int, at time.Time) {
	held, free := ks.held()
	if ks.others == 0 || ks.demand > 0 || free == 0 {
		return 0, time.Time{}
	}
	switch {
	case ks.deprived > 0:
		n = free
	case held > ks.cap:
		n = min(free, held-ks.cap)
	default:
		return 0, time.Time{}
	}
	h := ks.l.h
	at = ks.used.Add(h.cfg.poll)
	if ks.used.Before(ks.granted) {
		at = ks.granted.Add(h.cfg.renew)
	}
	if now.Before(at) {
		return 0, at
	}
	return n, time.Time{}
}

// wantedLocked records that a task of the key wants the free permits here
// now (its executor is told to ask for them): they are not idle before a
// poll interval, and what is idle then is looked at again.
func (ks *keyState) wantedLocked(now time.Time) {
	ks.used = now
	ks.giveUp = true
}

// pickLocked returns the lease TryAcquire takes n permits from, or nil: a
// lease with n free permits within its local validity (its timer may not
// have run yet), unless they are due back (excessLocked).
func (ks *keyState) pickLocked(n int, now time.Time) *lease {
	if ex := ks.excessLocked(now); ex > 0 {
		if _, free := ks.held(); free-ex < n {
			return nil
		}
	}
	for _, le := range ks.leases {
		if len(le.free) >= n && now.Before(le.valid) {
			return le
		}
	}
	return nil
}

// capFits reports whether a cap c lets Redis grant need permits (need > 0)
// to a holder that holds held permits of the key.
func capFits(held, need, c int) bool { return need > 0 && held+need <= c }

// setShareLocked records what Redis said of the key as of version ver: how
// many other holders wait, the most this one may keep meanwhile (-1: no
// cap), and how many of them wait below their cap. What is not newer than
// what the holder heard last is ignored: replies and notices cross (a
// notice published before a reply may be heard after it, and the reverse).
func (ks *keyState) setShareLocked(ver int64, others, capacity, deprived int) {
	if ver <= ks.ver {
		return
	}
	ks.ver = ver
	ks.others, ks.deprived = others, deprived
	if others == 0 || capacity < 0 {
		ks.cap = ks.limit
	} else {
		ks.cap = capacity
	}
}
