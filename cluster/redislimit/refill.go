package redislimit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// The refiller serves the keys queued for it in passes: every key's events,
// give-backs and refills of one pass go to Redis in one pipelined round
// trip, so that keys that need Redis at the same time (many tenants, each
// with a block to lease or give back) share it.

// maxPass is the most keys one pass serves.
const maxPass = 128

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
		select {
		case <-h.stop:
			// Close has begun (the select above picks at random among
			// what is ready): it reports and gives back what is left.
			poll.Stop()
			return
		default:
		}
		h.mu.Lock()
		q := h.queue
		h.queue = nil
		now := time.Now()
		for _, l := range h.scopes {
			for _, ks := range l.keys {
				retry := ks.retry && !now.Before(ks.retryAt)
				give := !ks.giveAt.IsZero() && !now.Before(ks.giveAt)
				if (retry || give) && !ks.queued {
					if retry {
						ks.retry = false
					}
					if give {
						ks.giveAt = time.Time{}
					}
					ks.queued = true
					q = append(q, ks)
				}
			}
		}
		if len(q) > maxPass {
			// The rest in the next pass: one pass's calls are one round
			// trip, bounded by the op timeout.
			h.queue = append(h.queue, q[maxPass:]...)
			q = q[:maxPass]
			h.kick()
		}
		for _, ks := range q {
			ks.queued = false
		}
		h.mu.Unlock()
		if len(q) > 0 {
			h.serve(q)
		}
		h.mu.Lock()
		var next time.Time // the earliest retry or give-back due
		for _, l := range h.scopes {
			for _, ks := range l.keys {
				if ks.retry && (next.IsZero() || ks.retryAt.Before(next)) {
					next = ks.retryAt
				}
				if !ks.giveAt.IsZero() && (next.IsZero() || ks.giveAt.Before(next)) {
					next = ks.giveAt
				}
			}
		}
		h.mu.Unlock()
		if !next.IsZero() {
			poll.Reset(max(time.Until(next), 0))
		}
	}
}

// reportLocked appends to evs the events of the fallbacks and refusals of
// ks not yet reported (ErrKeyFailed's too), and returns it.
func (h *Holder) reportLocked(ks *keyState, now time.Time, evs []*Event) []*Event {
	if ks.fellBack > 0 {
		evs = append(evs, &Event{Kind: EventFallback, Time: now, Policy: h.cfg.policy, Key: ks.key, Count: ks.fellBack})
		ks.fellBack = 0
	}
	if ks.refused > 0 {
		evs = append(evs, &Event{Kind: EventRejected, Time: now, Policy: h.cfg.policy, Key: ks.key, Count: ks.refused})
		ks.refused = 0
	}
	if ks.keyRefused > 0 {
		evs = append(evs, &Event{Kind: EventKeyFailed, Time: now, Policy: h.cfg.policy, Key: ks.key, Count: ks.keyRefused,
			Err: ks.keyRefusedErr})
		ks.keyRefused, ks.keyRefusedErr = 0, nil
	}
	return evs
}

// retryLocked makes the refiller serve ks again after d (0: at its next
// pass).
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

// refillReq is one key's request for a block.
type refillReq struct {
	ks         *keyState
	need, want int
	limit      int // the key's limit as the request was made (refreshLimitsLocked changes ks.limit under the lock)
	id         string
	seq        uint64 // the request's number (Holder.leaseSeq)
	call       *scriptCall
	res        []int64
	err        error
}

// after is what a pass does once the holder's lock is released.
type after struct {
	evs     []*Event
	ret     []shrink
	notify  []*keyState
	dropped []*lease // leases to give back whole: granted too late, or after Close
}

func (a *after) run(h *Holder) {
	h.emit(a.evs...)
	for _, le := range a.dropped {
		a.ret = append(a.ret, shrink{le, nil, 0})
	}
	if len(a.ret) > 0 {
		// A block given back whole whose give-back fails is sent again
		// by its id (orphanLocked); by Close's own round trip, if Close
		// has begun: it waits for this goroutine.
		h.giveBack(a.ret)
	}
	for _, ks := range a.notify {
		contain(func() { ks.l.notify(ks.key) })
	}
}

// serve does what the keys in q need: report, give back, lease, in one
// round trip for all of them.
func (h *Holder) serve(q []*keyState) {
	var a after
	var ret []shrink
	var reqs []*refillReq
	var unwaits []*keyState
	var drops []drop
	h.mu.Lock()
	now := time.Now()
	for _, ks := range q {
		a.evs = h.reportLocked(ks, now, a.evs)
		if ks.served {
			ks.served = false
			a.notify = append(a.notify, ks)
		}
		r := h.refillLocked(ks, now, &a)
		if r != nil {
			reqs = append(reqs, r)
		}
		switch {
		case !ks.unwait:
		case r != nil:
			// The refill records the holder as waiting again, or its
			// grant ends the record.
			ks.unwait = false
		case ks.demand == 0 && !h.down:
			// ks.unwait stays set until Redis has answered: a renewal
			// round must not drop the key meanwhile, or the record's
			// end, if this call fails, is never sent again.
			unwaits = append(unwaits, ks)
		}
		// Else the record is ended later: while the holder is down no call
		// is made for the key (upLocked serves it again when Redis
		// answers), and a task that waits again (asked a moment ago) is
		// asked for by the refill that comes.
		if !h.down {
			// Sent before the key's refill, so that it may be granted
			// what they free.
			for _, o := range ks.orphans {
				drops = append(drops, drop{ks: ks, o: o})
			}
		}
		if ks.giveUp && !h.down {
			// Not while down: the call would wait for a Redis the holder
			// cannot reach, holding up the notices of this pass (the
			// executors of the keys whose tasks wait meet the failure
			// policy at once). giveUp stays set, and upLocked serves the
			// key again once Redis answers.
			ks.giveUp = false
			idle, at := ks.idleLocked(now)
			if k := max(ks.excessLocked(now), idle); k > 0 {
				ret = append(ret, h.shrinkLocked(ks, k)...)
			}
			// Idle permits, not for long enough yet: look again then.
			ks.giveUp, ks.giveAt = !at.IsZero(), at
		}
	}
	relHook, replyHook, unwaitHook, refillHook := h.releaseHook, h.replyHook, h.unwaitHook, h.refillHook
	h.mu.Unlock()
	h.emit(a.evs...)
	a.evs = nil
	if len(ret) == 0 && len(reqs) == 0 && len(unwaits) == 0 && len(drops) == 0 {
		a.run(h)
		return
	}

	var relErr error
	if len(ret) > 0 && relHook != nil {
		relErr = relHook()
	}
	var calls []*scriptCall
	if relErr == nil {
		for _, s := range ret {
			calls = append(calls, h.releaseCall(s))
		}
	}
	relCalls := calls
	for i := range drops {
		drops[i].call = h.dropCall(drops[i].ks, drops[i].o)
		calls = append(calls, drops[i].call)
	}
	unwaitCalls := make([]*scriptCall, len(unwaits))
	for i, ks := range unwaits {
		unwaitCalls[i] = h.unwaitCall(ks)
		calls = append(calls, unwaitCalls[i])
	}
	for _, r := range reqs {
		ks := r.ks
		r.call = &scriptCall{s: acquireScript, keys: ks.keys[:], afterKey: true,
			args: []any{r.limit, r.want, r.need, h.cfg.ttl.Milliseconds(), r.id, ks.l.id, h.channel(), 2 * h.cfg.renew.Milliseconds(),
				h.nonce, r.seq}}
		calls = append(calls, r.call)
	}
	sent := time.Now()
	// ran: the calls went to Redis and the holder waited for them, so each
	// call's cmd holds its own outcome (read only then: the cmds of a call
	// the op timeout abandoned are still being written).
	ran, err := call(h, func(ctx context.Context) (bool, error) {
		for _, hk := range [...]struct {
			f    func() error
			used bool
		}{{unwaitHook, len(unwaits) > 0}, {refillHook, len(reqs) > 0}} {
			if hk.f != nil && hk.used {
				if err := hk.f(); err != nil {
					return false, err
				}
				// Held up on its way: a call already on the wire reaches
				// Redis whatever the op timeout.
				ctx = context.WithoutCancel(ctx)
			}
		}
		return true, h.runScripts(ctx, calls, nil)
	})
	var replyErr error
	if replyHook != nil && len(reqs) > 0 {
		if replyErr = replyHook(); replyErr != nil && err == nil {
			err = replyErr
		}
	}
	for _, r := range reqs {
		switch {
		case replyErr != nil:
			r.err = replyErr
		case !ran:
			r.err = err
		default:
			// Each call's own reply, whatever happened to the others: a
			// grant Redis made in the first round trip counts even when
			// the second (the calls re-sent after NOSCRIPT) failed, or
			// its lease would stay in Redis, unused, for a TTL.
			r.res, r.err = r.call.cmd.Int64Slice()
		}
	}

	h.mu.Lock()
	if err == nil {
		err = relErr
	}
	a.evs = append(a.evs, h.resultLocked(err))
	for i, ks := range unwaits {
		// A record not ended keeps the others' caps split with this
		// holder for up to two renew intervals: end it again, at the
		// poll rate as a failed refill is asked again, or once Redis
		// answers if the holder is now down.
		if !ran || failed(unwaitCalls[i].cmd.Err()) {
			if !h.down {
				ks.retryLocked(h.cfg.poll)
			}
			continue
		}
		ks.unwait = false
	}
	for i, s := range ret {
		if relErr != nil || !ran || failed(relCalls[i].cmd.Err()) {
			h.orphanLocked(s)
		}
	}
	for _, d := range drops {
		// Given back, or there was nothing to give: forget it. Else send
		// it again, as an unwait is.
		if ran && !failed(d.call.cmd.Err()) {
			d.ks.orphans = slices.DeleteFunc(d.ks.orphans, func(o orphan) bool { return o == d.o })
		} else if !h.down {
			d.ks.retryLocked(h.cfg.poll)
		}
	}
	for _, r := range reqs {
		h.refilledLocked(r, sent, &a)
	}
	h.mu.Unlock()
	a.run(h)
}

// errRunBefore is the outcome of a refill request that Redis had already
// run when it came (sent again by the client): as a lost reply, it counts
// as a failed call for its key (failed), and its lease, if the first run
// granted one, is given back by its id.
var errRunBefore = errors.New("redislimit: the request was sent again after its reply was lost")

// drop is the give-back of an orphan lease of ks.
type drop struct {
	ks   *keyState
	o    orphan
	call *scriptCall
}

// refillLocked returns the request for a block that ks needs, if it needs
// one from Redis now.
func (h *Holder) refillLocked(ks *keyState, now time.Time, a *after) *refillReq {
	need := ks.demand
	if need == 0 || h.closed {
		return nil
	}
	if ks.asked > 0 {
		// The tasks that asked since the last request are those that
		// wait now: a heavier one that asked before may be gone (its
		// task was cancelled, or timed out in its queue), and its weight
		// must not keep the others waiting. One that still waits and
		// has not asked again keeps demand as it is.
		need = ks.asked
		ks.demand = need
	}
	if ks.pickLocked(need, now) != nil || h.down {
		// Permits at hand serve it now (a give-back brought this holder
		// down to its cap, or a task finished): no call to Redis. Or the
		// holder is down: the executor asks again and meets the failure
		// policy, with no call either (the renewal loop probes Redis).
		ks.waiting = false
		h.dropDemandLocked(ks)
		ks.wantedLocked(now)
		a.notify = append(a.notify, ks)
		return nil
	}
	switch {
	case ks.probing && ks.asked == 0:
		if now.Before(ks.retryAt) {
			ks.retry = true // the executor has until then to ask
			return nil
		}
		// No task asked within a poll interval of the probe: the one
		// that waited gave up (its context ended, or its queue timeout
		// fired), and the executor does not tell a limiter so. Its
		// waiting record ends now, rather than be refreshed by requests
		// for no one until the demand is a TTL old.
		ks.waiting = false
		h.dropDemandLocked(ks)
		return nil
	case ks.probing:
		// A task asked since the probe: ask Redis for it now (the probe
		// began once the refusal's poll interval was over).
	case now.Before(ks.retryAt):
		// Refused or failed a moment ago: ask at most once per poll
		// interval, however often the refiller wakes for this key (a
		// task's new demand, a notice, a give-back).
		ks.retry = true
		return nil
	case ks.asked == 0 && ks.waiting:
		// Refused, and asked for again (a notice, a renewal round) with
		// no task asking since the last request: the task that waited
		// may have given up. Probe: tell the executor to ask again, as
		// for permits freed; a task that still waits asks (its executor
		// dispatches in notify), and the request goes for it. The
		// request is not sent before that, so that a record no task
		// needs is not refreshed.
		ks.probing = true
		ks.retryLocked(h.cfg.poll)
		a.notify = append(a.notify, ks)
		return nil
	}
	// The request serves whatever retry is pending (a probe's, above, when
	// the executor answered before it was due): left set, it would ask
	// again when due, for a task that waits for a notice, so that a
	// refused key would be asked for at the poll rate.
	ks.probing, ks.retry = false, false
	ks.waiting, ks.freed = false, false
	ks.asked = 0
	h.leaseSeq++
	ks.lastReq = h.leaseSeq
	ks.inFlight++
	return &refillReq{ks: ks, need: need, want: min(max(ks.block, need), ks.limit), limit: ks.limit, // Redis lowers it to the cap
		id: ks.l.id + ":" + h.nonce + strconv.FormatUint(h.leaseSeq, 10), seq: h.leaseSeq}
}

// refilledLocked uses Redis's reply to r, sent at sent.
func (h *Holder) refilledLocked(r *refillReq, sent time.Time, a *after) {
	ks, res, need := r.ks, r.res, r.need
	ks.inFlight--
	if r.err == nil && (len(res) < 7 || (res[0] > 0 && len(res) != 7+int(res[0]))) {
		r.err = redis.Nil
	}
	if r.err == nil && res[0] == 0 && res[6] == 0 {
		// Redis had run this request before (acquireScript's refusal of
		// version 0): the client sent it again after its first reply was
		// lost (a client with retries), and that reply may have been a
		// grant. Not a refusal: a lost reply, whose lease is given back
		// by its id and whose key is asked for again.
		r.err = errRunBefore
	}
	if r.err != nil {
		// The call may have run, and only its reply been lost: Redis may
		// count this holder as waiting (refused), and a drop of the
		// demand must end that record; or it may have leased a block that
		// no one here knows of, which would keep its permits from every
		// holder for a TTL: it is given back by its id with the next call
		// for the key (once Redis answers, if the holder is now down).
		ks.recorded = true
		ks.orphans = append(ks.orphans, orphan{r.id, r.seq})
		if !failed(r.err) {
			// Redis answered, with an error its script met on the key's
			// data (WRONGTYPE): asked again at the poll rate it answers
			// the same, and the key's tasks would wait for ever. Refuse
			// them, naming the key and the reply, and ask Redis for the
			// key again no sooner than a renew interval from now.
			ks.keyErr = fmt.Errorf("%w: %s limit %q: %w", ErrKeyFailed, ks.l.scope, ks.name, r.err)
			ks.keyErrUntil = time.Now().Add(h.cfg.renew)
			ks.waiting = false
			h.dropDemandLocked(ks)
			a.notify = append(a.notify, ks)
			return
		}
		if !h.down {
			if ks.demand == 0 {
				// No task waits for it any more: its demand was dropped
				// while the request was on its way (a lowered limit made
				// its task too heavy: refreshLimitsLocked), when no record
				// was known here to end. The record the call may have
				// made is ended now, with the give-back of its lease.
				h.dropDemandLocked(ks)
				return
			}
			// One failure is not an outage: ask again at the poll rate.
			ks.retryLocked(h.cfg.poll)
			return
		}
		// The executor asks again and now meets the failure policy; the
		// demand is set again if it still waits.
		h.dropDemandLocked(ks)
		a.notify = append(a.notify, ks)
		return
	}
	newer := res[6] < ks.ver // what the holder heard since is newer than this reply
	ks.setShareLocked(res[6], int(res[3]), int(res[4]), int(res[5]))
	if ks.lowered && r.limit == ks.limit && res[2] >= 0 {
		// Redis leases no more than the lowered limit (res[2] is the limit
		// less the permits leased, after a grant): the permits leased here
		// serve tasks again.
		ks.lowered = false
	}
	now := time.Now()
	if res[0] == 0 {
		h.st.refillsDenied.Add(1)
		ks.recorded = true
		if ks.demand == 0 {
			// No task waits for it any more: its demand was dropped
			// while the request was on its way (a lowered limit made its
			// task too heavy: refreshLimitsLocked), when no record was
			// known here to end. The record this refusal made is ended
			// now, as for any dropped demand.
			h.dropDemandLocked(ks)
			return
		}
		held, free := ks.held()
		// A waiter's demand is dropped only with a notify, or when a task
		// of this key runs here: its Release makes the executor ask again.
		switch {
		case ks.pickLocked(need, now) != nil:
			// A task finished meanwhile: its permits serve the waiter.
			h.dropDemandLocked(ks)
			ks.wantedLocked(now)
			h.enqueueLocked(ks)
			a.notify = append(a.notify, ks)
		case (free >= need || (free > 0 && int(res[2])+free >= need)) && held-free+need <= ks.cap:
			// Free permits here would cover it, but they are split over
			// leases or due back; or, with those free in Redis, they
			// would: give them back and lease anew (a block of at least
			// need, within the cap). Not when what tasks hold here and
			// need are above the cap: Redis would refuse that too.
			a.ret = append(a.ret, h.shrinkLocked(ks, free)...)
			ks.retryLocked(0)
		case wholeHere(held, free, need, ks.limit):
			// The whole limit is here and tasks of this key run on it
			// (free < need <= limit): the first to finish makes the
			// executor ask again. (With free >= need, refused for the
			// share, no task may run here to do that: it waits.)
			h.dropDemandLocked(ks)
		case now.Sub(ks.since) > h.cfg.ttl:
			// Nobody asked for a while: let the executor ask again if it
			// still waits, rather than ask Redis for nothing.
			h.dropDemandLocked(ks)
			a.notify = append(a.notify, ks)
		default:
			ks.waitLocked()
			if ks.freed || newer && !capFits(held, need, int(res[4])) && capFits(held, need, ks.cap) {
				// Permits were freed while the request was on its way,
				// maybe after Redis refused it, or a cap too small for
				// it then fits it since: the notice that told so came
				// before this reply, and will not come again. Or a
				// renewal round came meanwhile (renewOnce), which asks
				// again for a refused key.
				h.askAgainLocked(ks)
			}
		}
		return
	}
	h.st.refills.Add(1)
	slots := make([]int, len(res)-7)
	for i, s := range res[7:] {
		slots[i] = int(s)
	}
	le := &lease{ks: ks, id: r.id, seq: r.seq, token: res[1], slots: slots, free: append([]int(nil), slots...),
		permits: make(map[*permit]struct{})}
	le.setValid(sent.Add(h.localValidity()))
	if h.closed {
		// Close is giving every lease back; this one too, and its permits
		// go back unused, as the free permits of those Close gives back
		// itself: counted as those are.
		h.st.returned.Add(uint64(len(slots)))
		a.dropped = append(a.dropped, le)
		return
	}
	// The validity counts from when the request was sent, as for a
	// renewal: a slow reply leaves less of it.
	left := le.valid.Sub(now)
	if left <= 0 {
		// The reply came too late to trust the lease: give it back (its
		// permits unused, counted as Close's late grants are) and ask
		// again.
		h.st.returned.Add(uint64(len(slots)))
		ks.retryLocked(0)
		a.dropped = append(a.dropped, le)
		return
	}
	le.timer = time.AfterFunc(left, func() { h.expire(le) })
	ks.leases = append(ks.leases, le)
	h.leases++
	if !ks.granted.IsZero() && sent.Sub(ks.granted) < h.cfg.renew {
		ks.block = min(ks.block*2, h.cfg.maxBlock) // refills in quick succession: lease more at once
	}
	ks.granted = sent
	ks.demand, ks.asked, ks.recorded = 0, 0, false
	a.notify = append(a.notify, ks)
}

// dropDemandLocked forgets that a task of ks waits here. If Redis still
// counts this holder as waiting for the key, the refiller tells it that it
// no longer is (once Redis answers, while the holder is down; again, if
// that call fails): a stale record would keep the others' caps low (they
// would be refused for a share no one wants) for up to two renew
// intervals.
func (h *Holder) dropDemandLocked(ks *keyState) {
	ks.demand, ks.asked, ks.probing = 0, 0, false
	if ks.recorded {
		ks.recorded, ks.unwait = false, true
		h.enqueueLocked(ks)
	}
}
