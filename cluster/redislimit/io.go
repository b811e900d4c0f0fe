package redislimit

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// The holder's I/O runs on two goroutines, never under an executor's lock
// (a third listens for contention: contention.go):
//
//   - the refiller leases blocks for keys whose tasks found no permit at
//     hand (one script call per block), polls Redis while refills are
//     refused for lack of room, gives back permits above the fair share
//     while other holders wait, and delivers the notifications and events
//     that TryAcquire and Release (called under an executor's lock) cannot;
//   - the renewer is the process's one renewal loop: every renew interval,
//     one pipelined round trip renews every lease of every key and returns
//     the permits no task needed since the last round.
//
// A lease is valid locally until 80% of the TTL after the request that
// last renewed it was sent: Redis's own expiry comes later in real time, so
// a holder that cannot renew (paused, partitioned, Redis down) cancels its
// tasks before another holder can be given the slot. A timer per lease
// enforces it even while a call to Redis hangs.

// localValidity is the share of the TTL a holder trusts a lease for.
func (h *Holder) localValidity() time.Duration { return h.cfg.ttl * 4 / 5 }

type lostLease struct {
	ev      *Event
	cancels []func()
}

func (h *Holder) refiller() {
	defer h.wg.Done()
	poll := time.NewTimer(time.Hour)
	poll.Stop()
	for {
		select {
		case <-h.stop:
			poll.Stop()
			return
		case <-h.work:
		case <-poll.C:
		}
		h.mu.Lock()
		q := h.queue
		h.queue = nil
		now := time.Now()
		for _, l := range h.scopes {
			for _, ks := range l.keys {
				if ks.retry && !ks.queued && !now.Before(ks.retryAt) {
					ks.retry = false
					q = append(q, ks)
				}
			}
		}
		for _, ks := range q {
			ks.queued = false
		}
		h.mu.Unlock()
		for _, ks := range q {
			h.serve(ks)
		}
		h.mu.Lock()
		var next time.Time // the earliest retry due
		for _, l := range h.scopes {
			for _, ks := range l.keys {
				if ks.retry && (next.IsZero() || ks.retryAt.Before(next)) {
					next = ks.retryAt
				}
			}
		}
		h.mu.Unlock()
		if !next.IsZero() {
			poll.Reset(max(time.Until(next), 0))
		}
	}
}

// retryLocked makes the refiller serve ks again after d (0: at its next
// round). A key is asked for at most once per d however often the refiller
// wakes for other reasons: a refusal wakes the other holders of the key
// (contention.go), and refusals must not answer each other at the speed of
// a round trip.
func (ks *keyState) retryLocked(d time.Duration) {
	ks.retry = true
	ks.retryAt = time.Now().Add(d)
}

// serve does what ks needs: report, give back, lease.
func (h *Holder) serve(ks *keyState) {
	var evs []*Event
	h.mu.Lock()
	if ks.fellBack > 0 {
		evs = append(evs, &Event{Kind: EventFallback, Time: time.Now(), Policy: h.cfg.policy, Key: ks.key, Count: ks.fellBack})
		ks.fellBack = 0
	}
	if ks.refused > 0 {
		evs = append(evs, &Event{Kind: EventRejected, Time: time.Now(), Policy: h.cfg.policy, Key: ks.key, Count: ks.refused})
		ks.refused = 0
	}
	var ret []shrink
	if ks.giveUp {
		ks.giveUp = false
		if ks.others > 0 {
			held, free := ks.held()
			k := held - ks.fairShare()
			if ks.contended {
				// Someone was just refused: what no task uses now goes back.
				k = max(k, free)
			}
			ret = h.shrinkLocked(ks, k)
		}
	}
	ks.contended = false
	h.mu.Unlock()
	h.emit(evs...)
	if len(ret) > 0 {
		h.giveBack(ret)
	}
	h.refill(ks)
}

// refill leases a block for ks if a task asked for one.
func (h *Holder) refill(ks *keyState) {
	h.mu.Lock()
	need := ks.demand
	if need == 0 || h.closed {
		h.mu.Unlock()
		return
	}
	if ks.pickLocked(need) != nil || h.down {
		// Permits at hand serve it now (a give-back brought this holder
		// down to its share, or a task finished): no call to Redis. Or the
		// holder is down: the executor asks again and meets the failure
		// policy, with no call either (the renewal loop probes Redis).
		ks.demand = 0
		h.mu.Unlock()
		ks.l.notify(ks.key)
		return
	}
	if time.Now().Before(ks.retryAt) {
		// Refused or failed a moment ago: ask at the poll rate, not each
		// time the refiller wakes for this key (a task's new demand, a
		// contention notice, a give-back).
		ks.retry = true
		h.mu.Unlock()
		return
	}
	want := max(ks.block, need)
	if ks.others > 0 {
		held, _ := ks.held()
		want = max(need, min(want, ks.fairShare()-held))
	}
	want = min(want, ks.limit)
	h.leaseSeq++
	id := ks.l.id + ":" + h.nonce + strconv.FormatUint(h.leaseSeq, 10)
	keys := ks.keys
	hook := h.replyHook
	h.mu.Unlock()

	sent := time.Now()
	res, err := call(h, func(ctx context.Context) ([]int64, error) {
		return acquireScript.Run(ctx, h.rdb, keys[:], ks.limit, want, need, h.cfg.ttl.Milliseconds(), id, ks.l.id, h.channel()).Int64Slice()
	})
	h.st.roundTrips.Add(1)
	if hook != nil {
		if herr := hook(); herr != nil && err == nil {
			err = herr
		}
	}

	h.mu.Lock()
	if err != nil || len(res) != 4 {
		if err == nil {
			err = redis.Nil
		}
		ev := h.failLocked(err)
		if !h.down {
			// One failure is not an outage: ask again at the poll rate.
			ks.retryLocked(h.cfg.poll)
			h.mu.Unlock()
			return
		}
		// The executor asks again and now meets the failure policy; the
		// demand is set again if it still waits.
		ks.demand = 0
		h.mu.Unlock()
		h.emit(ev)
		ks.l.notify(ks.key)
		return
	}
	ev := h.upLocked()
	ks.others = int(res[3])
	if res[0] == 0 {
		h.st.refillsDenied.Add(1)
		held, free := ks.held()
		stale := time.Since(ks.since) > h.cfg.ttl
		notify := false
		var ret []shrink
		// A waiter's demand is dropped only with a notify, or when a task
		// of this key runs here: its Release makes the executor ask again.
		switch {
		case ks.pickLocked(need) != nil:
			// A task finished meanwhile: its permits serve the waiter.
			ks.demand, notify = 0, true
		case free >= need:
			// Free permits here would cover it, but they are split over
			// leases or above the fair share: give them back and lease
			// anew (a block of at least need, within the share).
			ret = h.shrinkLocked(ks, free)
			ks.retryLocked(0)
		case held >= ks.limit:
			// The whole limit is here and tasks of this key run on it
			// (free < need <= limit): the first to finish makes the
			// executor ask again.
			ks.demand = 0
		case stale:
			// Nobody asked for a while: let the executor ask again if it
			// still waits, rather than poll for nothing.
			ks.demand, notify = 0, true
		default:
			ks.retryLocked(h.cfg.poll)
		}
		h.mu.Unlock()
		h.emit(ev)
		if len(ret) > 0 {
			h.giveBack(ret)
		}
		if notify {
			ks.l.notify(ks.key)
		}
		return
	}
	h.st.refills.Add(1)
	le := &lease{ks: ks, id: id, token: res[1], size: int(res[0]), valid: sent.Add(h.localValidity()),
		permits: make(map[*permit]struct{})}
	if h.closed {
		// Close is giving every lease back; this one too.
		h.mu.Unlock()
		h.giveBack([]shrink{{le, 0, 0}})
		return
	}
	// The validity counts from when the request was sent, as for a
	// renewal: a slow reply leaves less of it.
	left := time.Until(le.valid)
	if left <= 0 {
		// The reply came too late to trust the lease: give it back and
		// ask again.
		ks.retryLocked(0)
		h.mu.Unlock()
		h.emit(ev)
		h.giveBack([]shrink{{le, 0, 0}})
		return
	}
	le.timer = time.AfterFunc(left, func() { h.expire(le) })
	ks.leases = append(ks.leases, le)
	h.leases++
	if !ks.granted.IsZero() && sent.Sub(ks.granted) < h.cfg.renew {
		ks.block = min(ks.block*2, h.cfg.maxBlock) // refills in quick succession: lease more at once
	}
	ks.granted = sent
	ks.demand = 0
	h.mu.Unlock()
	h.emit(ev)
	ks.l.notify(ks.key)
}

// shrink is a return of permits of a lease to Redis: it is lowered to left
// permits (all of it given back if left is 0).
type shrink struct {
	le   *lease
	left int
	n    int // permits returned
}

// shrinkLocked takes up to k free permits of ks out of local use, emptied
// leases first, and returns what to tell Redis.
func (h *Holder) shrinkLocked(ks *keyState, k int) []shrink {
	var out []shrink
	kept := ks.leases[:0]
	for _, le := range ks.leases {
		switch free := le.size - le.used; {
		case k <= 0 || free == 0:
			kept = append(kept, le)
		case le.used == 0 && free <= k:
			k -= free
			h.dropLocked(le)
			out = append(out, shrink{le, 0, free})
		default:
			n := min(free, k)
			k -= n
			le.size -= n
			out = append(out, shrink{le, le.size, n})
			kept = append(kept, le)
		}
	}
	clear(ks.leases[len(kept):])
	ks.leases = kept
	for _, s := range out {
		h.st.returned.Add(uint64(s.n))
	}
	return out
}

// dropLocked forgets a lease locally (the caller removes it from ks.leases).
func (h *Holder) dropLocked(le *lease) {
	le.lost = true
	if le.timer != nil {
		le.timer.Stop()
	}
	h.leases--
}

// giveBack tells Redis of returned permits, in one round trip. If it fails,
// an emptied lease comes back when it expires (it is no longer renewed), and
// a lowered one at the next renewal, which sends every lease's size.
func (h *Holder) giveBack(ret []shrink) {
	h.mu.Lock()
	hook := h.releaseHook
	h.mu.Unlock()
	var err error
	if hook != nil {
		err = hook()
	}
	if err == nil {
		_, err = call(h, func(ctx context.Context) ([]redis.Cmder, error) {
			return h.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
				for _, s := range ret {
					releaseScript.Eval(ctx, p, s.le.ks.keys[:2], s.le.id, s.left)
				}
				return nil
			})
		})
		h.st.roundTrips.Add(1)
	}
	h.mu.Lock()
	var ev *Event
	if err != nil {
		ev = h.failLocked(err)
	} else {
		ev = h.upLocked()
	}
	h.mu.Unlock()
	h.emit(ev)
}

// expire runs when a lease's local validity ends: unless it was renewed
// meanwhile, the lease is lost and its tasks are cancelled.
func (h *Holder) expire(le *lease) {
	h.mu.Lock()
	if le.lost || time.Now().Before(le.valid) {
		h.mu.Unlock()
		return
	}
	l := h.loseLocked(le, "not renewed within 80% of its TTL", nil)
	closed := h.closed
	h.mu.Unlock()
	h.cancelAll([]lostLease{l})
	if !closed {
		// Redis may still hold it (a renewal's reply came too late, or
		// only this process is cut off): give it back, best effort, so
		// that it does not keep its permits from the others for the rest
		// of its TTL.
		h.giveBack([]shrink{{le, 0, 0}})
	}
}

// loseLocked marks le lost, removes it from its key, and returns the event
// and the cancellations to run once the lock is released.
func (h *Holder) loseLocked(le *lease, reason string, cause error) lostLease {
	ks := le.ks
	for i, x := range ks.leases {
		if x == le {
			ks.leases = append(ks.leases[:i], ks.leases[i+1:]...)
			break
		}
	}
	h.dropLocked(le)
	h.st.leasesLost.Add(1)
	err := &LeaseLostError{Key: ks.key, Token: le.token, Reason: reason, Err: cause}
	var cancels []func()
	for p := range le.permits {
		p.lostErr = err
		if c := p.cancel; c != nil {
			cancels = append(cancels, func() { c(err) })
		}
	}
	tasks := len(cancels)
	h.st.tasksCancelled.Add(uint64(tasks))
	clear(le.permits)
	if notify := ks.l.notify; notify != nil && !h.closed {
		// A task of the key waiting for a release here (the whole limit
		// was here) must not wait for tasks that ignore their cancelled
		// context: the executor asks again, and the slot is free in Redis.
		key := ks.key
		cancels = append(cancels, func() { notify(key) })
	}
	return lostLease{&Event{Kind: EventLeaseLost, Time: time.Now(), Policy: h.cfg.policy, Key: ks.key,
		Token: le.token, Permits: le.size, Tasks: tasks, Err: err}, cancels}
}

func (h *Holder) cancelAll(ls []lostLease) {
	for _, l := range ls {
		for _, c := range l.cancels {
			c()
		}
		h.emit(l.ev)
	}
}

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
	leases []*lease
	sizes  []int // the leases' sizes when the round began
}

// renewOnce is one round of the renewal loop.
func (h *Holder) renewOnce() {
	h.mu.Lock()
	var rs []renewal
	var ret []shrink
	for _, l := range h.scopes {
		for key, ks := range l.keys {
			// Permits free throughout the round were not needed: give
			// them back, and lease smaller blocks.
			_, free := ks.held()
			if k := min(ks.minFree, free); k > 0 {
				ret = append(ret, h.shrinkLocked(ks, k)...)
				ks.block = max(1, ks.block/2)
			}
			_, ks.minFree = ks.held()
			if len(ks.leases) == 0 {
				if ks.demand == 0 && !ks.queued && !ks.retry && ks.fellBack == 0 && ks.refused == 0 {
					delete(l.keys, key) // an idle key costs nothing
				}
				continue
			}
			r := renewal{ks, append([]*lease(nil), ks.leases...), make([]int, len(ks.leases))}
			for i, le := range ks.leases {
				r.sizes[i] = le.size
			}
			rs = append(rs, r)
		}
	}
	probe := h.down && len(rs) == 0
	hook := h.renewHook
	h.mu.Unlock()
	if len(rs) == 0 && len(ret) == 0 && !probe {
		return
	}

	sent := time.Now()
	var err error
	var cmds []redis.Cmder
	if hook != nil {
		err = hook()
	}
	if err == nil {
		cmds, err = call(h, func(ctx context.Context) ([]redis.Cmder, error) {
			return h.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
				for _, r := range rs {
					args := make([]any, 0, 2+2*len(r.leases))
					args = append(args, h.cfg.ttl.Milliseconds(), r.ks.l.id)
					for i, le := range r.leases {
						args = append(args, le.id, r.sizes[i])
					}
					renewScript.Eval(ctx, p, []string{r.ks.keys[0], r.ks.keys[1], r.ks.keys[3]}, args...)
				}
				for _, s := range ret {
					releaseScript.Eval(ctx, p, s.le.ks.keys[:2], s.le.id, s.left)
				}
				if probe {
					p.Ping(ctx)
				}
				return nil
			})
		})
		h.st.roundTrips.Add(1)
	}

	var lost []lostLease
	var stale []shrink
	h.mu.Lock()
	var ev *Event
	if err != nil {
		ev = h.failLocked(err)
	} else {
		ev = h.upLocked()
		h.st.renewals.Add(1)
		for i, r := range rs {
			res, cerr := cmds[i].(*redis.Cmd).Int64Slice()
			if cerr != nil || len(res) != 1+len(r.leases) {
				continue // the local deadline decides
			}
			r.ks.others = int(res[0])
			for j, le := range r.leases {
				switch {
				case res[1+j] == 0 && !le.lost:
					lost = append(lost, h.loseLocked(le, "gone from Redis (expired, or Redis lost its data)", nil))
				case res[1+j] == 1 && le.lost:
					stale = append(stale, shrink{le, 0, 0}) // lost here meanwhile: free it there
				case res[1+j] == 1:
					le.valid = sent.Add(h.localValidity())
					le.timer.Reset(time.Until(le.valid))
				}
			}
		}
	}
	h.mu.Unlock()
	h.emit(ev)
	h.cancelAll(lost)
	if len(stale) > 0 {
		h.giveBack(stale)
	}
}
