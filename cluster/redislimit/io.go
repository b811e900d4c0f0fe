package redislimit

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The holder's I/O runs on two goroutines, never under an executor's lock
// (a third listens for contention: contention.go):
//
//   - the refiller leases blocks for keys whose tasks found no permit at
//     hand (one script call per block), asks again for keys Redis refused
//     when it hears that permits were freed, gives back permits above the
//     cap while other holders wait, and delivers the notifications and
//     events that TryAcquire and Release (called under an executor's lock)
//     cannot;
//   - the renewer is the process's one renewal loop: every renew interval,
//     one pipelined round trip renews every lease of every key and returns
//     the permits no task needed since the last round; keys still refused
//     are then asked for again.
//
// A lease is valid locally until 80% of the TTL after the request that
// last renewed it was sent: Redis's own expiry comes later in real time, so
// a live holder that cannot renew (partitioned, Redis down or stalled)
// cancels its tasks before another holder can be given the slot. A timer
// per lease enforces it even while a call to Redis hangs. A paused holder
// cannot: see fence.go.

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
// round).
func (ks *keyState) retryLocked(d time.Duration) {
	ks.retry = true
	ks.retryAt = time.Now().Add(d)
}

// waitLocked records that Redis refused ks: it is asked for again when a
// holder frees permits of the key (a notice), or at the next renewal round,
// and not within a poll interval of this refusal however often notices
// come: refusals wake the other holders (contention.go), and must not
// answer each other at the speed of a round trip.
func (ks *keyState) waitLocked() {
	ks.waiting = true
	ks.retryAt = time.Now().Add(ks.l.h.cfg.poll)
}

// askAgainLocked serves a refused key again: now, or when its poll interval
// is over.
func (h *Holder) askAgainLocked(ks *keyState) {
	if !ks.waiting || ks.demand == 0 || ks.queued || ks.retry {
		return
	}
	if time.Now().Before(ks.retryAt) {
		ks.retry = true
		h.kick()
		return
	}
	h.enqueueLocked(ks)
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
		if ex := ks.excessLocked(time.Now()); ex > 0 {
			ret = h.shrinkLocked(ks, ex)
		}
	}
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
	if ks.pickLocked(need, time.Now()) != nil || h.down {
		// Permits at hand serve it now (a give-back brought this holder
		// down to its cap, or a task finished): no call to Redis. Or the
		// holder is down: the executor asks again and meets the failure
		// policy, with no call either (the renewal loop probes Redis).
		ks.demand, ks.waiting = 0, false
		h.mu.Unlock()
		ks.l.notify(ks.key)
		return
	}
	if time.Now().Before(ks.retryAt) {
		// Refused or failed a moment ago: ask at most once per poll
		// interval, however often the refiller wakes for this key (a
		// task's new demand, a notice, a give-back).
		ks.retry = true
		h.mu.Unlock()
		return
	}
	ks.waiting = false
	want := min(max(ks.block, need), ks.limit) // Redis lowers it to the cap
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
	if err != nil || len(res) < 5 || (res[0] > 0 && len(res) != 5+int(res[0])) {
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
	ks.setShareLocked(int(res[3]), int(res[4]))
	if res[0] == 0 {
		h.st.refillsDenied.Add(1)
		held, free := ks.held()
		stale := time.Since(ks.since) > h.cfg.ttl
		notify := false
		var ret []shrink
		// A waiter's demand is dropped only with a notify, or when a task
		// of this key runs here: its Release makes the executor ask again.
		switch {
		case ks.pickLocked(need, time.Now()) != nil:
			// A task finished meanwhile: its permits serve the waiter.
			ks.demand, notify = 0, true
		case free >= need:
			// Free permits here would cover it, but they are split over
			// leases or due back: give them back and lease anew (a block
			// of at least need, within the cap).
			ret = h.shrinkLocked(ks, free)
			ks.retryLocked(0)
		case held >= ks.limit:
			// The whole limit is here and tasks of this key run on it
			// (free < need <= limit): the first to finish makes the
			// executor ask again.
			ks.demand = 0
		case stale:
			// Nobody asked for a while: let the executor ask again if it
			// still waits, rather than ask Redis for nothing.
			ks.demand, notify = 0, true
		default:
			ks.waitLocked()
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
	slots := make([]int, len(res)-5)
	for i, s := range res[5:] {
		slots[i] = int(s)
	}
	le := &lease{ks: ks, id: id, token: res[1], slots: slots, free: append([]int(nil), slots...),
		permits: make(map[*permit]struct{})}
	le.setValid(sent.Add(h.localValidity()))
	if h.closed {
		// Close is giving every lease back; this one too.
		h.mu.Unlock()
		h.giveBack([]shrink{{le, nil, 0}})
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
		h.giveBack([]shrink{{le, nil, 0}})
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

// setShareLocked records what Redis said of the key: how many other holders
// wait, and the most this one may keep meanwhile (-1: no cap).
func (ks *keyState) setShareLocked(others, capacity int) {
	ks.others = others
	if others == 0 || capacity < 0 {
		ks.cap = ks.limit
	} else {
		ks.cap = capacity
	}
}

// shrink is a return of permits of a lease to Redis: it is lowered to the
// slots in keep (given back whole when keep is empty).
type shrink struct {
	le   *lease
	keep []int
	n    int // permits returned
}

// shrinkLocked takes up to k free permits of ks out of local use, emptied
// leases first, and returns what to tell Redis.
func (h *Holder) shrinkLocked(ks *keyState, k int) []shrink {
	var out []shrink
	kept := ks.leases[:0]
	for _, le := range ks.leases {
		switch free := len(le.free); {
		case k <= 0 || free == 0:
			kept = append(kept, le)
		case free == len(le.slots) && free <= k:
			k -= free
			h.dropLocked(le)
			out = append(out, shrink{le, nil, free})
		default:
			n := min(free, k)
			k -= n
			gone := le.free[free-n:]
			le.free = le.free[:free-n]
			le.slots = slices.DeleteFunc(le.slots, func(s int) bool { return slices.Contains(gone, s) })
			out = append(out, shrink{le, slices.Clone(le.slots), n})
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

// slotList is slots as the scripts take them: "3,7,8".
func slotList(slots []int) string {
	var b strings.Builder
	for i, s := range slots {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(s))
	}
	return b.String()
}

// releaseEval queues releaseScript for s on p.
func (h *Holder) releaseEval(ctx context.Context, p redis.Pipeliner, s shrink) {
	ks := s.le.ks
	releaseScript.Eval(ctx, p, []string{ks.keys[0], ks.keys[1], ks.keys[2], ks.keys[3], ks.keys[5], ks.keys[6]},
		s.le.id, slotList(s.keep), ks.l.id, h.channel(), h.cfg.ttl.Milliseconds())
}

// dropLocked forgets a lease locally (the caller removes it from ks.leases).
func (h *Holder) dropLocked(le *lease) {
	le.lost = true
	le.gone.Store(true)
	if le.timer != nil {
		le.timer.Stop()
	}
	h.leases--
}

// giveBack tells Redis of returned permits, in one round trip. If it fails,
// an emptied lease comes back when it expires (it is no longer renewed), and
// a lowered one at the next renewal, which sends every lease's slots.
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
					h.releaseEval(ctx, p, s)
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
		h.giveBack([]shrink{{le, nil, 0}})
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
		Token: le.token, Permits: len(le.slots), Tasks: tasks, Err: err}, cancels}
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
	slots  []string // the leases' slots when the round began
}

// renewOnce is one round of the renewal loop.
func (h *Holder) renewOnce() {
	h.mu.Lock()
	now := time.Now()
	var rs []renewal
	var ret []shrink
	for _, l := range h.scopes {
		for key, ks := range l.keys {
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
			h.askAgainLocked(ks)
			if len(ks.leases) == 0 {
				if ks.demand == 0 && !ks.queued && !ks.retry && ks.fellBack == 0 && ks.refused == 0 {
					delete(l.keys, key) // an idle key costs nothing
				}
				continue
			}
			r := renewal{ks, append([]*lease(nil), ks.leases...), make([]string, len(ks.leases))}
			for i, le := range ks.leases {
				r.slots[i] = slotList(le.slots)
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
					args := make([]any, 0, 3+2*len(r.leases))
					args = append(args, h.cfg.ttl.Milliseconds(), r.ks.l.id, r.ks.limit)
					for i, le := range r.leases {
						args = append(args, le.id, r.slots[i])
					}
					k := r.ks.keys
					renewScript.Eval(ctx, p, []string{k[0], k[1], k[2], k[3], k[5], k[6], k[7]}, args...)
				}
				for _, s := range ret {
					h.releaseEval(ctx, p, s)
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
			if cerr != nil || len(res) != 2+len(r.leases) {
				continue // the local deadline decides
			}
			r.ks.setShareLocked(int(res[0]), int(res[1]))
			for j, le := range r.leases {
				switch {
				case res[2+j] == 0 && !le.lost:
					lost = append(lost, h.loseLocked(le, "gone from Redis (expired, or Redis lost its data)", nil))
				case res[2+j] == 1 && le.lost:
					stale = append(stale, shrink{le, nil, 0}) // lost here meanwhile: free it there
				case res[2+j] == 1:
					le.setValid(sent.Add(h.localValidity()))
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
