package redislimit

import (
	"context"
	"errors"
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
//     it renews every lease of every key and returns the permits no task
//     needed since the last round, in pipelined round trips of at most
//     maxPass calls (renew.go); keys still refused are then asked for
//     again.
//
// A lease is valid locally until 80% of the TTL after the request that
// last renewed it was sent: Redis's own expiry comes later in real time, so
// a live holder that cannot renew (partitioned, Redis down or stalled)
// cancels its tasks before another holder can be given the slot. A timer
// per lease enforces it even while a call to Redis hangs. A paused holder
// cannot: see fence.go.

// localValidity is the share of the TTL a holder trusts a lease for: 80%,
// reckoned so that no TTL overflows (ttl*4 would, above about 73 years).
func (h *Holder) localValidity() time.Duration { return h.cfg.ttl - h.cfg.ttl/5 }

type lostLease struct {
	ev      *Event
	cancels []func()
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

// releaseCall is the call of releaseScript for s.
func (h *Holder) releaseCall(s shrink) *scriptCall {
	k := s.le.ks.keys
	return &scriptCall{s: releaseScript, keys: []string{k[0], k[1], k[2], k[3], k[5], k[6], k[8]},
		args: []any{s.le.id, slotList(s.keep), s.le.ks.l.id, h.channel(), h.cfg.ttl.Milliseconds()}}
}

// orphan is a lease Redis may have granted to ks without the holder
// hearing of it: the acquire's reply was lost, or abandoned at the op
// timeout (the call may still reach Redis); or a block granted too late to
// use, or after Close began, whose give-back failed.
type orphan struct {
	id  string
	seq uint64 // the acquire's number
}

// dropCall gives o's lease of ks back, if Redis granted it, and makes its
// acquire, if it reaches Redis only later, lease nothing. Sent again, or
// after the lease expired, it frees nothing: the slots it frees are that
// lease's alone.
func (h *Holder) dropCall(ks *keyState, o orphan) *scriptCall {
	k := ks.keys
	return &scriptCall{s: releaseScript, keys: []string{k[0], k[1], k[2], k[3], k[5], k[6], k[8]},
		args: []any{o.id, "", ks.l.id, h.channel(), h.cfg.ttl.Milliseconds(), h.nonce, o.seq}}
}

// unwaitCall ends ks's waiting record of this holder: no task of it waits
// for ks's key any more, as of its last refill request. Redis ends no
// record of a later request (this call may reach it late).
func (h *Holder) unwaitCall(ks *keyState) *scriptCall {
	k := ks.keys
	return &scriptCall{s: unwaitScript, keys: []string{k[0], k[5], k[7], k[8], k[9]},
		args: []any{ks.l.id, h.channel(), h.nonce, ks.lastReq, h.cfg.ttl.Milliseconds()}}
}

// failed reports whether err, from a call to Redis, means that Redis could
// not be reached, did not answer in time, or answered that it cannot serve
// the call now (unavailableReplies: a replica after a failover, a server
// loading its data, out of memory, busy with a script, refusing the
// holder's credentials, too old for the scripts); any other error Redis
// replied with (a script's) does not: it is an answer for one key, whose
// tasks are refused with ErrKeyFailed (refilledLocked).
func failed(err error) bool {
	var re redis.Error
	if err == nil {
		return false
	}
	if !errors.As(err, &re) {
		return true
	}
	msg := re.Error()
	for _, p := range unavailableReplies {
		// Before Redis 7, the reply to a command a script runs comes
		// wrapped in the script's ERR, its own code after ": -"
		// ("ERR Error running script (...): @user_script:4:
		// @user_script: 4: -READONLY You can't write...").
		if redis.HasErrorPrefix(re, p+" ") || strings.Contains(msg, ": -"+p+" ") {
			return true
		}
	}
	// A plain ERR, but it refuses every script call alike, for good.
	return strings.Contains(msg, nondeterministicRefusal)
}

// nondeterministicRefusal is in the error reply of a Redis that runs a
// script by replicating the script itself (before 5.0, or a 5.x or 6.x run
// with lua-replicate-commands no) to a script that writes after reading
// TIME, as every script here does. Counted as a reply, it would keep the
// holder up and its tasks waiting for leases that never come.
const nondeterministicRefusal = "Write commands not allowed after non deterministic commands"

// unavailableReplies are the error replies of a Redis that cannot lease
// now, whatever is asked of it: each call fails the same way until it
// changes (a failover, a load, memory freed, the password or the ACL
// fixed), so they count as an outage. Counted as replies, a holder that
// may not run its scripts (NOPERM) or is no longer authenticated (NOAUTH,
// WRONGPASS) would stay up, its tasks waiting for leases that never come,
// under either failure policy.
var unavailableReplies = []string{"READONLY", "LOADING", "MASTERDOWN", "BUSY", "OOM", "MISCONF",
	"CLUSTERDOWN", "TRYAGAIN", "NOREPLICAS", "NOAUTH", "WRONGPASS", "NOPERM"}

// resultLocked records how a call to Redis went, and returns the event to
// emit if that changed the mode (failLocked, upLocked).
func (h *Holder) resultLocked(err error) *Event {
	if failed(err) {
		return h.failLocked(err)
	}
	return h.upLocked()
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
// a lowered lease comes back at the next renewal, which sends every lease's
// slots, and one given back whole is sent again by its id (orphanLocked).
func (h *Holder) giveBack(ret []shrink) {
	h.mu.Lock()
	hook := h.releaseHook
	h.mu.Unlock()
	var err error
	if hook != nil {
		err = hook()
	}
	calls := make([]*scriptCall, len(ret))
	ran := false // as in serve: each call's cmd holds its own outcome
	if err == nil {
		for i, s := range ret {
			calls[i] = h.releaseCall(s)
		}
		ran, err = call(h, func(ctx context.Context) (bool, error) { return true, h.runScripts(ctx, calls, nil) })
	}
	h.mu.Lock()
	ev := h.resultLocked(err)
	for i, s := range ret {
		if !ran || failed(calls[i].cmd.Err()) {
			h.orphanLocked(s)
		}
	}
	h.mu.Unlock()
	h.emit(ev)
}

// orphanLocked sends s again by its lease's id if it gave the lease back
// whole, once its give-back has failed: no renewal sends such a lease
// again (it is no longer the holder's), and Redis would keep its permits
// from every holder for the rest of its TTL. It goes on its key's orphans,
// as a grant whose reply was lost does: given back with the next call for
// the key, at the poll rate (once Redis answers, if the holder is down; by
// Close's own round trip, if Close has begun: Close waits for the
// holder's goroutines, and for an expired lease's give-back, before it
// collects the orphans). A lowered lease needs nothing: the next renewal
// sends its slots.
func (h *Holder) orphanLocked(s shrink) {
	if len(s.keep) > 0 {
		return
	}
	ks, o := s.le.ks, orphan{s.le.id, s.le.seq}
	// A renewal round forgets a key left with no lease, maybe while this
	// give-back was on its way: the key's state (another, if a task has
	// asked for the key since) keeps the orphan, and the refiller serves
	// it.
	if cur := ks.l.keys[ks.key]; cur != nil {
		ks = cur
	} else {
		ks.l.rememberLocked(ks)
	}
	if !slices.Contains(ks.orphans, o) {
		ks.orphans = append(ks.orphans, o)
	}
	if !h.down && !h.closed && !ks.retry {
		ks.retryLocked(h.cfg.poll)
		h.kick() // the refiller reckons its next wake-up with this retry
	}
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
	if closed {
		// Close gives it back with the others, in its own round trip.
		h.expired = append(h.expired, le)
	} else {
		// Close waits for this give-back: nothing of the holder talks to
		// Redis once Close has returned. Added under the lock before
		// closed is set, so before Close's Wait.
		h.wg.Add(1)
	}
	h.mu.Unlock()
	if !closed {
		// Deferred before the cancellations run: they call the executor
		// (and through it its callbacks) and the listener, and one that
		// ends this goroutine with runtime.Goexit must neither leave Close
		// waiting for this give-back for ever nor skip it.
		defer func() {
			defer h.wg.Done()
			// Redis may still hold it (a renewal's reply came too late,
			// or only this process is cut off): give it back, best
			// effort, so that it does not keep its permits from the
			// others for the rest of its TTL.
			h.giveBack([]shrink{{le, nil, 0}})
		}()
	}
	h.cancelAll([]lostLease{l})
}

// loseLocked marks le lost, removes it from its key, counts it lost, and
// returns the event and the cancellations to run once the lock is
// released.
func (h *Holder) loseLocked(le *lease, reason string, cause error) lostLease {
	l, first := h.endLocked(le, reason, cause)
	h.st.leasesLost.Add(1)
	h.st.tasksCancelled.Add(first)
	return l
}

// endLocked is loseLocked without the counting: it also returns how many
// of le's tasks were not cancelled before (by the loss of their other
// lease).
func (h *Holder) endLocked(le *lease, reason string, cause error) (lostLease, uint64) {
	ks := le.ks
	for i, x := range ks.leases {
		if x == le {
			ks.leases = append(ks.leases[:i], ks.leases[i+1:]...)
			break
		}
	}
	h.dropLocked(le)
	err := &LeaseLostError{Key: ks.key, Token: le.token, Reason: reason, Err: cause, name: ks.name}
	var cancels []func()
	var first uint64 // tasks not cancelled before by the loss of their other lease
	for p := range le.permits {
		p.lostErr = err
		if c := p.cancel; c != nil {
			cancels = append(cancels, func() { c(err) })
			if p.peer == nil || p.peer.lostErr == nil {
				first++
			}
		}
	}
	tasks := len(cancels)
	clear(le.permits)
	if notify := ks.l.notify; notify != nil && !h.closed {
		// A task of the key waiting for a release here (the whole limit
		// was here) must not wait for tasks that ignore their cancelled
		// context: the executor asks again, and the slot is free in Redis.
		key := ks.key
		cancels = append(cancels, func() { notify(key) })
	}
	return lostLease{&Event{Kind: EventLeaseLost, Time: time.Now(), Policy: h.cfg.policy, Key: ks.key,
		Token: le.token, Permits: len(le.slots), Tasks: tasks, Err: err}, cancels}, first
}

func (h *Holder) cancelAll(ls []lostLease) {
	for _, l := range ls {
		for _, c := range l.cancels {
			contain(c)
		}
		h.emit(l.ev)
	}
}
