package redislimit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/groupexec/groupexec/executor"
)

// Limiter is one limit kept in Redis, seen by one executor: the global
// limit (Holder.Global) or a limit per group (Holder.Groups). It implements
// executor.Limiter: pass it to executor.WithGlobalLimiter or
// executor.WithGroupLimiter. A Limiter serves one executor; make one per
// executor (they share the holder's renewal loop). In Redis each Limiter is
// a holder of its own (its id is the Holder's plus a number): two executors
// limited through one Holder wait for, share fairly and give back to each
// other as two processes would.
type Limiter struct {
	h     *Holder
	id    string // in Redis: lease ids, waiting records, contention notices; set by Attach
	scope string // "global" or "group"
	limit func(key string) int
	// perGroup: limit may change (GroupsFunc); the renewal loop reads it
	// again for every key (refreshLimitsLocked).
	perGroup bool
	err      error // an invalid limit, returned by Attach
	notify   func(key string)
	keys     map[string]*keyState
	// hashed finds the state of a key over maxKeyName bytes by its name
	// in Redis (keyName), which is what a contention notice tells.
	hashed map[string]*keyState
}

// Global returns a Limiter for a limit of n permits running across every
// holder sharing the prefix. n must be >= 1 (else executor.New fails with an
// *OptionError naming it).
func (h *Holder) Global(n int) *Limiter {
	l := h.newLimiter("global", func(string) int { return n })
	if n < 1 {
		l.err = &OptionError{"Global", n, "the limit must be >= 1"}
	}
	return l
}

// Groups returns a Limiter for a limit of n permits running per group,
// across every holder sharing the prefix. n must be >= 1.
func (h *Holder) Groups(n int) *Limiter {
	l := h.newLimiter("group", func(string) int { return n })
	if n < 1 {
		l.err = &OptionError{"Groups", n, "the limit must be >= 1"}
	}
	return l
}

// GroupsFunc is Groups with a limit per group: f is called when a group is
// first seen, under the holder's lock and the executor's, and again for
// every group the holder keeps at every renewal round, under the holder's
// lock, so it must be fast and must call neither. A value below 1 refuses
// the group's tasks. Every holder must give a group the same limit.
//
// A limit f changes reaches a busy group at the next renewal round: raised,
// the group's waiting tasks ask again, and are granted the permits it adds;
// lowered, the permits free here go back to Redis, and so do those of the
// group's tasks as they end, until a reply of Redis says that no more than
// the new limit is leased across the holders: meanwhile every task of the
// group that starts here asks Redis for its permits, which grants them
// within the new limit. A waiting task heavier than the new limit is
// refused (executor.ErrTooHeavy) when it asks again. Tasks already running
// keep their permits. Until every holder has read the new limit, holders
// that disagree are granted against the limit each of them asks with: the
// larger, at worst.
func (h *Holder) GroupsFunc(f func(group string) int) *Limiter {
	l := h.newLimiter("group", f)
	l.perGroup = true
	if f == nil {
		l.err = &OptionError{"GroupsFunc", "nil", "the function must not be nil"}
	}
	return l
}

func (h *Holder) newLimiter(scope string, f func(string) int) *Limiter {
	return &Limiter{h: h, scope: scope, limit: f, keys: make(map[string]*keyState)}
}

// Attach implements executor.Limiter; executor.New calls it.
func (l *Limiter) Attach(notify func(key string)) error {
	if l.err != nil {
		return l.err
	}
	h := l.h
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.closed:
		return ErrClosed
	case l.notify != nil:
		return errors.New("redislimit: this Limiter already serves an executor: make one per executor")
	}
	l.notify = notify
	h.scopes = append(h.scopes, l)
	l.id = h.id + "/" + strconv.Itoa(len(h.scopes))
	return nil
}

// keyState is a holder's state for one limit key. Guarded by Holder.mu.
type keyState struct {
	l        *Limiter
	key      string     // the executor's key
	name     string     // key's name in Redis (keyName), computed once
	keys     [10]string // the Redis keys: l n s b f w g q r v
	limit    int
	leases   []*lease
	block    int       // permits to lease next time
	lowered  bool      // the limit was lowered and Redis has not said since that no more is leased: every free permit goes back (excessLocked)
	granted  time.Time // when the last block was leased
	used     time.Time // when a task last took or released a permit here
	demand   int       // the heaviest task refused since the last refill; 0: none
	asked    int       // the heaviest task refused since the last request to Redis was sent; 0: none
	since    time.Time // when demand was last asked for
	queued   bool      // in Holder.queue
	retry    bool      // serve again at retryAt (a failed call; or at once)
	retryAt  time.Time // no call for this key before then
	waiting  bool      // Redis refused the last refill: ask again on a notice that permits were freed, or at the next renewal round
	freed    bool      // a notice that permits were freed, or a renewal round, came since the last refill request was sent
	recorded bool      // Redis counts this holder as waiting for the key
	probing  bool      // the executor was told to ask again, to learn whether a task still waits (refillLocked)
	served   bool      // TryAcquire served the task that waited, and dropped the demand: the refiller tells the executor, so that one still waiting asks again
	unwait   bool      // tell Redis it no longer is; set until Redis has answered that it ended the record
	lastReq  uint64    // the number of the last refill request sent for the key (Holder.leaseSeq): an unwait ends no record of a later one
	inFlight int       // refill requests sent whose reply has not been used yet: a renewal round keeps the key's state for them (renewOnce)
	orphans  []orphan  // leases Redis may have granted whose reply never came, or whose give-back failed (after.run): given back by id once Redis answers
	ver      int64     // the version of what Redis last told of the share (others, cap, deprived): older news is ignored
	minFree  int       // the fewest free permits since the last renewal round
	others   int       // other holders waiting for this key, as Redis last said
	deprived int       // how many of them wait for room below an even split
	cap      int       // the most this holder keeps while others wait, as Redis last said
	giveUp   bool      // give back what is held above the cap, and what is idle while others wait
	giveAt   time.Time // serve again then, for idle permits; zero: not due

	fellBack, refused int   // fallbacks and refusals not yet reported
	keyRefused        int   // ErrKeyFailed refusals not yet reported
	keyRefusedErr     error // the last of them's error, for its event

	// keyErr refuses the key's tasks that no lease here serves until
	// keyErrUntil: Redis answered the key's last refill with an error
	// reply (ErrKeyFailed).
	keyErr      error
	keyErrUntil time.Time
}

// lease is a block of permits leased from Redis: one slot each.
type lease struct {
	ks    *keyState
	id    string
	seq   uint64 // its acquire's number (Holder.leaseSeq): given back by id with it (orphan)
	token int64
	slots []int     // the slots it holds in Redis
	free  []int     // those no task holds
	valid time.Time // when this holder considers it lost if not renewed
	timer interface {
		Stop() bool
		Reset(time.Duration) bool
	}
	lost    bool
	permits map[*permit]struct{}

	// Read without the lock by Valid, so that tasks that check before
	// every write do not contend with the executor for it.
	validNs atomic.Int64 // valid, in nanoseconds after epoch (monotonic)
	gone    atomic.Bool  // lost
}

// epoch is the origin of lease.validNs.
var epoch = time.Now()

// setValid sets the lease's local validity. Under the holder's lock.
func (le *lease) setValid(t time.Time) {
	le.valid = t
	le.validNs.Store(int64(t.Sub(epoch)))
}

// permit is one task's permits; p.l is nil for a fallback permit.
type permit struct {
	h        *Holder
	l        *lease
	n        int
	slots    []int // its slots in the lease
	one      [1]int
	token    int64
	key      string
	cancel   context.CancelCauseFunc
	lostErr  error
	peer     *permit // the task's other permit from this holder, linked by Bind
	released bool
	done     atomic.Bool // released, for Valid
}

// keyLocked returns key's state, made with name, key's name in Redis
// (keyName), when it has none; or nil when it has none and name is "" for
// a key over maxKeyName bytes, which its caller then names without the
// lock (nameOf).
func (l *Limiter) keyLocked(key, name string) *keyState {
	ks := l.keys[key]
	if ks == nil {
		if name == "" {
			if len(key) > maxKeyName {
				return nil
			}
			name = key
		}
		base := l.h.cfg.prefix + ":{" + l.scope + ":" + name + "}:"
		ks = &keyState{l: l, key: key, name: name, limit: l.limit(key), block: 1}
		for i, k := range [...]string{"l", "n", "s", "b", "f", "w", "g", "q", "r", "v"} {
			ks.keys[i] = base + k
		}
		ks.cap = ks.limit
		l.rememberLocked(ks)
	}
	return ks
}

// rememberLocked keeps ks as its key's state.
func (l *Limiter) rememberLocked(ks *keyState) {
	l.keys[ks.key] = ks
	if len(ks.key) > maxKeyName {
		if l.hashed == nil {
			l.hashed = make(map[string]*keyState)
		}
		l.hashed[ks.name] = ks
	}
}

// forgetLocked drops ks, its key's state.
func (l *Limiter) forgetLocked(ks *keyState) {
	delete(l.keys, ks.key)
	if len(ks.key) > maxKeyName {
		delete(l.hashed, ks.name)
	}
}

// byNameLocked returns the state of the key named name in Redis (keyName),
// or nil.
func (l *Limiter) byNameLocked(name string) *keyState {
	if len(name) > maxKeyName {
		return l.hashed[name]
	}
	return l.keys[name]
}

// nameOf returns key's name in Redis (keyName). It hashes a key over
// maxKeyName bytes: called without the holder's lock.
func (l *Limiter) nameOf(key string) string {
	if hook := l.h.nameHook; hook != nil && len(key) > maxKeyName {
		hook()
	}
	return keyName(key)
}

// TryAcquire implements executor.Limiter: it hands out n permits from a
// leased block, without I/O. Without enough at hand it asks the refiller
// for a block and returns (nil, nil); the executor is notified when the
// block comes. While Redis is unreachable it applies the failure policy.
//
// n must be >= 1: the executor asks for a task's weight, at least one
// permit (a Task.Weight of 0 reads 1). A direct call with n < 1 is its
// caller's bug: it is refused at once, with an error matching
// executor.ErrInvalidTask that names n, before anything else (a closed
// holder included), and leaves no state for the key. A permit of no slots
// would fence nothing, and waiting for one would wait for ever: no refill
// is asked for nothing.
func (l *Limiter) TryAcquire(key string, n int) (executor.LimiterPermit, error) {
	if n < 1 {
		return nil, fmt.Errorf("%w: redislimit: TryAcquire weight %d: must be >= 1", executor.ErrInvalidTask, n)
	}
	p, unnamed, err := l.tryAcquire(key, n, "")
	if unnamed {
		// A key over maxKeyName bytes that has no state yet: its name
		// hashes the whole key (a client may send a megabyte), which is
		// done without the holder's lock, shared by every key's tasks,
		// the refiller and the renewal loop. Asked again with it.
		p, _, err = l.tryAcquire(key, n, l.nameOf(key))
	}
	return p, err
}

// tryAcquire is TryAcquire given key's name in Redis, or "": it reports
// unnamed, having done nothing, when key needs a name it was not given
// (keyLocked).
func (l *Limiter) tryAcquire(key string, n int, name string) (_ executor.LimiterPermit, unnamed bool, _ error) {
	h := l.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, false, ErrClosed
	}
	ks := l.keyLocked(key, name)
	if ks == nil {
		return nil, true, nil
	}
	p, err := l.acquireLocked(ks, n)
	return p, false, err
}

// acquireLocked is TryAcquire for ks, the state of its key.
func (l *Limiter) acquireLocked(ks *keyState, n int) (executor.LimiterPermit, error) {
	h, key := l.h, ks.key
	switch {
	case ks.limit < 1:
		return nil, fmt.Errorf("redislimit: %s limit for %q is %d: nothing can run", l.scope, ks.name, ks.limit)
	case n > ks.limit:
		return nil, fmt.Errorf("%w: weight %d over the cluster %s limit %d", executor.ErrTooHeavy, n, l.scope, ks.limit)
	}
	now := time.Now()
	if ks.excessLocked(now) > 0 {
		if _, free := ks.held(); free > 0 {
			// Above its cap while others wait: what is free goes back
			// rather than to this holder's next task.
			ks.giveUp = true
			h.enqueueLocked(ks)
		}
	}
	if le := ks.pickLocked(n, now); le != nil {
		p := &permit{h: h, l: le, n: n, token: le.token, key: key}
		p.slots = p.one[:0]
		if n > 1 {
			p.slots = make([]int, 0, n)
		}
		p.slots = append(p.slots, le.free[len(le.free)-n:]...)
		le.free = le.free[:len(le.free)-n]
		le.permits[p] = struct{}{}
		ks.used = now
		_, free := ks.held()
		ks.minFree = min(ks.minFree, free)
		h.st.acquired.Add(uint64(n))
		if ks.demand > 0 && n >= ks.demand {
			// The task that waited for the key is served here: its
			// executor asked again as a task of the key ended here,
			// before the refiller looked at the key. Nothing waits any
			// more, and the waiting record in Redis ends now (the
			// refiller sends its end), as when the refiller finds the
			// permits first (refillLocked), rather than once a probe
			// finds no task asking, while Redis splits the key's limit
			// with a holder that waits for nothing. The executor is told
			// too, as there: a task of the key that still waits asks
			// again, and is asked for.
			ks.waiting = false
			h.dropDemandLocked(ks)
			ks.served = true
			h.enqueueLocked(ks)
		}
		return p, nil
	}
	// The whole limit is here and in use: Redis has nothing to grant. A
	// task of the key that ends here makes the executor ask again (so
	// does the loss of a lease).
	held, free := ks.held()
	whole := wholeHere(held, free, n, ks.limit)
	if h.down && (h.cfg.policy == FailOpen || !whole) {
		// The renewal loop probes Redis and ends the outage; the
		// refiller reports these to the listener. Under FailClosed, a
		// task that the leases here will serve waits for them, as one
		// queued before the outage does: the policy refuses a task that
		// needs a permit the holder has no lease for.
		h.enqueueLocked(ks)
		if h.cfg.policy == FailOpen {
			h.st.fallbacks.Add(1)
			ks.fellBack++
			return &permit{h: h, n: n, key: key}, nil
		}
		h.st.rejected.Add(1)
		ks.refused++
		return nil, h.unavailableLocked()
	}
	if whole {
		return nil, nil
	}
	if ks.keyErr != nil {
		if now.Before(ks.keyErrUntil) {
			// Counted, and reported by the refiller (no call to Redis),
			// as the other refusals are.
			h.st.keyFailed.Add(1)
			ks.keyRefused++
			ks.keyRefusedErr = ks.keyErr
			h.enqueueLocked(ks)
			return nil, ks.keyErr
		}
		// Asked again once a renew interval is over: the key's data may
		// have been fixed since.
		ks.keyErr = nil
	}
	ks.demand, ks.asked, ks.since = max(ks.demand, n), max(ks.asked, n), now
	h.enqueueLocked(ks)
	return nil, nil
}

// Bind implements executor.LimiterPermit: the task's context carries the permit
// (for FencingToken, Fencing, Valid and ValidUntil), and the lease's loss
// cancels it.
func (p *permit) Bind(ctx context.Context, cancel context.CancelCauseFunc) context.Context {
	// The task's other permit is the one bound on the context Bind gets:
	// the executor binds a task's permits each on the context the one
	// before returned. A permit found deeper in it is another task's: the
	// parent's, whose context this task was submitted with (detached from
	// its cancellation, say). It is neither this task's peer nor of its
	// validity: the parent's permits are given back when it ends.
	var outer *bound
	if c, ok := ctx.(*boundCtx); ok {
		outer = &c.b
	}
	p.h.mu.Lock()
	lost := p.lostErr
	if lost == nil && !p.released {
		p.cancel = cancel
	}
	if outer != nil && outer.p.h == p.h {
		p.peer, outer.p.peer = outer.p, p
	}
	if lost != nil && !errors.Is(lost, ErrClosed) && (p.peer == nil || p.peer.lostErr == nil) {
		// Lost before its task was bound: cancelled here, not by
		// loseLocked, so counted here (once, as there). One given back
		// by Close is not lost, and counts no more here than there.
		p.h.st.tasksCancelled.Add(1)
	}
	p.h.mu.Unlock()
	if lost != nil {
		cancel(lost)
	}
	return &boundCtx{ctx, bound{p, outer}}
}

// Release implements executor.LimiterPermit. Under contention the permits above
// the cap, and those no task takes, go back to Redis.
func (p *permit) Release() {
	h := p.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if p.released {
		return
	}
	p.released = true
	p.done.Store(true)
	p.cancel = nil
	le := p.l
	if le == nil || le.lost {
		return
	}
	le.free = append(le.free, p.slots...)
	delete(le.permits, p)
	ks := le.ks
	now := time.Now()
	ks.used = now
	if ks.others > 0 || ks.giveUp || ks.lowered {
		// Others wait: the refiller gives back the excess (idleLocked,
		// excessLocked), this permit if no task of the key takes it
		// meanwhile; and a give-back it has scheduled is looked at
		// again, now that a task has used the block. Or the limit was
		// lowered: this permit goes back until Redis leases no more.
		ks.giveUp = true
		h.enqueueLocked(ks)
	}
	if ks.demand > 0 && ks.pickLocked(ks.demand, now) != nil {
		// The permits at hand now serve the task that waits here: the
		// refiller tells its executor, and ends this holder's waiting
		// record in Redis (refillLocked), which would otherwise split
		// the key's limit with a holder that waits for nothing until
		// the next notice or renewal round.
		h.enqueueLocked(ks)
	}
}
