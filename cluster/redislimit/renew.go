package redislimit

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

func (h *Holder) renewer() {
	defer h.wg.Done()
	t := time.NewTicker(h.cfg.renew)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
		}
		h.renewOnce()
	}
}

type renewal struct {
	ks     *keyState
	limit  int // the key's limit when the round began
	leases []*lease
	slots  []string // the leases' slots when the round began
}

// renewOnce is one round of the renewal loop.
func (h *Holder) renewOnce() {
	h.mu.Lock()
	notify := h.refreshLimitsLocked()
	now := time.Now()
	var rs []renewal
	var ret []shrink
	for _, l := range h.scopes {
		for _, ks := range l.keys {
			// Permits free throughout the round were not needed: give
			// them back, and lease smaller blocks. Then what is held above
			// the cap, once its quantum is over.
			_, free := ks.held()
			if k := min(ks.minFree, free); k > 0 {
				ret = append(ret, h.shrinkLocked(ks, k)...)
				ks.block = max(1, ks.block/2)
			}
			if ex := ks.excessLocked(now); ex > 0 {
				ret = append(ret, h.shrinkLocked(ks, ex)...)
			}
			_, ks.minFree = ks.held()
			if ks.demand > 0 && !ks.probing {
				// The round asks whether a task still waits: only one
				// that asks from now on says so (or one that answered
				// a probe, which asked the same). A task that asked
				// before may have given up since, and a refill for it
				// that is due, or on its way, would otherwise refresh
				// its waiting record until the next round: one due
				// probes the executor first (refillLocked), and the
				// refusal of one on its way asks again, as after a
				// notice of permits freed heard meanwhile.
				ks.asked = 0
				if !ks.waiting {
					ks.freed = true
				}
			}
			h.askAgainLocked(ks)
			if len(ks.leases) == 0 {
				// Not while a refill of the key is on its way (its demand
				// may have been dropped meanwhile: a lowered limit made its
				// task too heavy): its grant is this state's, and landed in
				// a forgotten one it would be renewed, used and given back
				// by no one until its local validity ends. Nor while an
				// error reply refuses the key's tasks (ErrKeyFailed): a
				// fresh state would ask Redis again before its renew
				// interval is over.
				keyFailed := ks.keyErr != nil && now.Before(ks.keyErrUntil)
				if ks.demand == 0 && ks.inFlight == 0 && !ks.queued && !ks.retry && ks.fellBack == 0 && ks.refused == 0 && ks.keyRefused == 0 &&
					!ks.unwait && len(ks.orphans) == 0 && !keyFailed {
					l.forgetLocked(ks) // an idle key costs nothing
				}
				continue
			}
			r := renewal{ks, ks.limit, append([]*lease(nil), ks.leases...), make([]string, len(ks.leases))}
			for i, le := range ks.leases {
				r.slots[i] = slotList(le.slots)
			}
			rs = append(rs, r)
		}
	}
	probe := h.down && len(rs) == 0
	hook := h.renewHook
	h.mu.Unlock()
	for _, ks := range notify {
		contain(func() { ks.l.notify(ks.key) })
	}
	if len(rs) == 0 && len(ret) == 0 && !probe {
		return
	}

	// The first pass's leases are valid from before the hook: a round held
	// up on its way to Redis counts as slow.
	sent := time.Now()
	var err error
	if hook != nil {
		err = hook()
	}
	if err != nil {
		// Nothing goes to Redis: the round failed as a whole.
		h.renewPass(rs, ret, false, err, sent)
		return
	}
	// The round goes to Redis in passes of at most maxPass calls, each a
	// round trip of its own bounded by the op timeout, as the refiller's
	// passes are: one round trip for every key would take longer the more
	// keys the holder holds (a group limiter's tenants), until it ran past
	// the op timeout and every lease of the process were lost at once.
	renewed, down := false, false
	for first := true; first || len(rs) > 0 || len(ret) > 0; first = false {
		stopped := false
		select {
		case <-h.stop:
			// Close gives every lease back: renewing the rest is no use.
			stopped = true
		default:
		}
		if down || stopped {
			// Not sent: a renewal left is judged by its local deadline,
			// and a lease given back whole is sent again by its id.
			h.mu.Lock()
			for _, s := range ret {
				h.orphanLocked(s)
			}
			h.mu.Unlock()
			break
		}
		n := min(len(rs), maxPass)
		m := min(len(ret), maxPass-n)
		if !first {
			sent = time.Now()
		}
		r, perr := h.renewPass(rs[:n], ret[:m], probe && first, nil, sent)
		rs, ret = rs[n:], ret[m:]
		renewed = renewed || r
		// After a pass Redis did not answer, the next would wait its op
		// timeout for nothing, and hold Close that long.
		down = failed(perr)
	}
	if renewed && !down {
		h.st.renewals.Add(1)
	}
}

// renewPass sends one round trip of a renewal round: the renewals rs, the
// give-backs ret and, with probe, a PING; and uses the replies. The leases
// it renews are valid from sent. sendErr, if not nil, fails the pass
// without sending it. It reports whether it renewed leases and the pass's
// error.
func (h *Holder) renewPass(rs []renewal, ret []shrink, probe bool, sendErr error, sent time.Time) (renewed bool, err error) {
	err = sendErr
	calls := make([]*scriptCall, len(rs))
	var relCalls []*scriptCall // ret's
	// ran: the calls went to Redis and the pass waited for them, so each
	// call's cmd holds its own outcome (read only then: the cmds of a call
	// the op timeout abandoned are still being written).
	ran := false
	if err == nil {
		for i, r := range rs {
			args := make([]any, 0, 4+2*len(r.leases))
			args = append(args, h.cfg.ttl.Milliseconds(), r.ks.l.id, r.limit, h.channel())
			for j, le := range r.leases {
				args = append(args, le.id, r.slots[j])
			}
			k := r.ks.keys
			calls[i] = &scriptCall{s: renewScript, keys: []string{k[0], k[1], k[2], k[3], k[5], k[6], k[7], k[9]}, args: args}
		}
		for _, s := range ret {
			calls = append(calls, h.releaseCall(s))
		}
		relCalls = calls[len(rs):]
		ran, err = call(h, func(ctx context.Context) (bool, error) {
			return true, h.runScripts(ctx, calls, func(p redis.Pipeliner) {
				if probe {
					p.Ping(ctx)
				}
			})
		})
	}

	var lost []lostLease
	var stale []shrink
	h.mu.Lock()
	ev := h.resultLocked(err)
	// A pass with no lease to renew (it gives permits back, or probes
	// Redis while down) renews nothing; nor does one whose every renewal
	// Redis refused with an error reply (WRONGTYPE on the key's data).
	if ran {
		// Each call's own reply, whatever happened to the others: a
		// renewal Redis made in the first round trip counts even when the
		// second (the calls re-sent after NOSCRIPT) failed, or its tasks
		// would be cancelled, the lease counted lost, though Redis has
		// renewed it.
		now := time.Now()
		for i, r := range rs {
			res, cerr := calls[i].cmd.Int64Slice()
			if cerr != nil || len(res) != 4+len(r.leases) {
				continue // the local deadline decides
			}
			renewed = true
			r.ks.setShareLocked(res[3], int(res[0]), int(res[1]), int(res[2]))
			if r.ks.others > 0 {
				// What to give back may have changed with the caps.
				r.ks.giveUp = true
				h.enqueueLocked(r.ks)
			}
			for j, le := range r.leases {
				switch alive := res[4+j]; {
				case alive == 0 && !le.lost:
					lost = append(lost, h.loseLocked(le, "gone from Redis (expired, or Redis lost its data)", nil))
				case alive == 1 && le.lost:
					stale = append(stale, shrink{le, nil, 0}) // lost here meanwhile: free it there
				case alive == 1 && !now.Before(le.valid):
					// Its local validity ended before this reply could be
					// used (the holder was held up): Valid has said so,
					// and its timer is due. Lost, as the timer makes it,
					// whichever of the two runs first; and freed there.
					lost = append(lost, h.loseLocked(le, "not renewed within 80% of its TTL", nil))
					stale = append(stale, shrink{le, nil, 0})
				case alive == 1:
					le.setValid(sent.Add(h.localValidity()))
					le.timer.Reset(time.Until(le.valid))
				}
			}
		}
	}
	for i, s := range ret {
		if !ran || failed(relCalls[i].cmd.Err()) {
			h.orphanLocked(s)
		}
	}
	h.mu.Unlock()
	h.emit(ev)
	h.cancelAll(lost)
	if len(stale) > 0 {
		h.giveBack(stale)
	}
	return renewed, err
}

// refreshLimitsLocked reads again the limit of every key of the GroupsFunc
// limiters, whose function may return another one now, and applies the
// ones that changed (see GroupsFunc). It returns the keys whose executors
// must ask again: a raised limit may grant a task that waits for a task
// of the key to end here (the whole limit was leased here and in use), or
// whose refill Redis refused; a lowered one refuses a waiting task that it
// makes too heavy.
func (h *Holder) refreshLimitsLocked() []*keyState {
	var notify []*keyState
	for _, l := range h.scopes {
		if !l.perGroup || len(l.keys) == 0 || l.notify == nil {
			continue
		}
		got := make(map[*keyState]int, len(l.keys))
		// Contained, as the other code the holder calls but does not own:
		// a panic ends the reading (the keys not read yet keep their
		// limit), and a runtime.Goexit does not end the renewal loop.
		contain(func() {
			for _, ks := range l.keys {
				got[ks] = l.limit(ks.key)
			}
		})
		for ks, n := range got {
			if n == ks.limit {
				continue
			}
			raised := n > ks.limit
			ks.limit = n
			if ks.others == 0 || ks.cap > n {
				ks.cap = n
			}
			ks.block = max(1, min(ks.block, n))
			switch {
			case raised:
				if ks.demand > 0 || len(ks.leases) > 0 {
					notify = append(notify, ks)
				}
			default:
				// The holders together may hold more than n, this one
				// not: its permits serve no task until Redis says that
				// no more than n are leased (refilledLocked).
				ks.lowered = true
				if ks.demand > n {
					h.dropDemandLocked(ks)
					notify = append(notify, ks)
				}
			}
		}
	}
	return notify
}
