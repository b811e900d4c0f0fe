package redislimit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
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
	h      *Holder
	id     string // in Redis: lease ids, waiting records, contention notices; set by Attach
	scope  string // "global" or "group"
	limit  func(key string) int
	err    error // an invalid limit, returned by Attach
	notify func(key string)
	keys   map[string]*keyState
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

// GroupsFunc is Groups with a limit per group: f is called once when a
// group is first seen (and again after it was idle), under the holder's
// lock and the executor's, so it must be fast and must call neither. A value below 1
// refuses the group's tasks. Every holder must give a group the same limit.
func (h *Holder) GroupsFunc(f func(group string) int) *Limiter {
	l := h.newLimiter("group", f)
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
	l                 *Limiter
	key               string    // the executor's key
	keys              [4]string // the Redis keys: l n f w
	limit             int
	leases            []*lease
	block             int       // permits to lease next time
	granted           time.Time // when the last block was leased
	demand            int       // the heaviest task refused since the last refill; 0: none
	since             time.Time // when demand was last asked for
	queued            bool      // in Holder.queue
	retry             bool      // the last refill was denied: poll again
	retryAt           time.Time // not before then
	minFree           int       // the fewest free permits since the last renewal round
	others            int       // other holders waiting for this key, as Redis last said
	giveUp            bool      // return permits above the fair share as they free
	contended         bool      // a holder was just refused: return the free permits too
	fellBack, refused int       // fallbacks and refusals not yet reported
}

// lease is a block of permits leased from Redis.
type lease struct {
	ks         *keyState
	id         string
	token      int64
	size, used int
	valid      time.Time // when this holder considers it lost if not renewed
	timer      interface {
		Stop() bool
		Reset(time.Duration) bool
	}
	lost    bool
	permits map[*permit]struct{}
}

// permit is one task's permits; p.l is nil for a fallback permit.
type permit struct {
	h        *Holder
	l        *lease
	n        int
	token    int64
	key      string
	cancel   context.CancelCauseFunc
	lostErr  error
	released bool
}

func (l *Limiter) keyLocked(key string) *keyState {
	ks := l.keys[key]
	if ks == nil {
		base := l.h.cfg.prefix + ":{" + l.scope + ":" + key + "}:"
		ks = &keyState{l: l, key: key, limit: l.limit(key), block: 1,
			keys: [4]string{base + "l", base + "n", base + "f", base + "w"}}
		l.keys[key] = ks
	}
	return ks
}

func (ks *keyState) held() (held, free int) {
	for _, le := range ks.leases {
		held += le.size
		free += le.size - le.used
	}
	return held, free
}

// pickLocked returns the lease TryAcquire takes n permits from, or nil: a
// lease with n free permits within its local validity (its timer may not
// have run yet), unless this holder is above an even share while others
// wait (its free permits go back instead).
func (ks *keyState) pickLocked(n int) *lease {
	if ks.others > 0 {
		if held, _ := ks.held(); held > ks.fairShare() {
			return nil
		}
	}
	var now time.Time
	for _, le := range ks.leases {
		if le.size-le.used >= n {
			if now.IsZero() {
				now = time.Now()
			}
			if now.Before(le.valid) {
				return le
			}
		}
	}
	return nil
}

// fairShare is the most a holder keeps while others wait: the limit split
// evenly between them and it.
func (ks *keyState) fairShare() int { return (ks.limit + ks.others) / (ks.others + 1) }

// TryAcquire implements executor.Limiter: it hands out n permits from a
// leased block, without I/O. Without enough at hand it asks the refiller
// for a block and returns (nil, nil); the executor is notified when the
// block comes. While Redis is unreachable it applies the failure policy.
func (l *Limiter) TryAcquire(key string, n int) (executor.Permit, error) {
	h := l.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrClosed
	}
	ks := l.keyLocked(key)
	switch {
	case ks.limit < 1:
		return nil, fmt.Errorf("redislimit: %s limit for %q is %d: nothing can run", l.scope, key, ks.limit)
	case n > ks.limit:
		return nil, fmt.Errorf("%w: weight %d over the cluster %s limit %d", executor.ErrTooHeavy, n, l.scope, ks.limit)
	}
	held, free := ks.held()
	if ks.others > 0 && held > ks.fairShare() && free > 0 {
		// Above an even share while others wait: what is free goes back
		// rather than to this holder's next task.
		ks.giveUp = true
		h.enqueueLocked(ks)
	}
	if le := ks.pickLocked(n); le != nil {
		le.used += n
		p := &permit{h: h, l: le, n: n, token: le.token, key: key}
		le.permits[p] = struct{}{}
		_, free := ks.held()
		ks.minFree = min(ks.minFree, free)
		h.st.acquired.Add(1)
		return p, nil
	}
	if h.down {
		// The renewal loop probes Redis and ends the outage; the
		// refiller reports these to the listener.
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
	ks.demand, ks.since = max(ks.demand, n), time.Now()
	h.enqueueLocked(ks)
	return nil, nil
}

// Bind implements executor.Permit: the task's context carries the fencing
// token, and the lease's loss cancels it.
func (p *permit) Bind(ctx context.Context, cancel context.CancelCauseFunc) context.Context {
	p.h.mu.Lock()
	lost := p.lostErr
	if lost == nil && !p.released {
		p.cancel = cancel
	}
	p.h.mu.Unlock()
	if lost != nil {
		cancel(lost)
	}
	if p.l == nil {
		// A fallback permit has no token: hide one that ctx may carry
		// (the global lease's, under a group fallback permit).
		return context.WithValue(ctx, tokenKey{}, nil)
	}
	return context.WithValue(ctx, tokenKey{}, p.token)
}

// Release implements executor.Permit. Under contention the permits above
// the fair share go back to Redis.
func (p *permit) Release() {
	h := p.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if p.released {
		return
	}
	p.released = true
	p.cancel = nil
	le := p.l
	if le == nil || le.lost {
		return
	}
	le.used -= p.n
	delete(le.permits, p)
	if ks := le.ks; ks.others > 0 {
		if held, _ := ks.held(); held > ks.fairShare() {
			ks.giveUp = true
			h.enqueueLocked(ks)
		}
	}
}

type tokenKey struct{}

// FencingToken returns the fencing token of the lease the task's permit
// came from, and false outside a task run under a cluster permit or on a
// fallback permit (FailOpen). With both a global and a group limiter, it is
// the group lease's token (and false on a fallback group permit, even when
// the global permit has a lease).
//
// Tokens are issued per lease (a leased block of permits), from a counter
// per key in Redis: a lease taken after another for the same key has a
// greater token, and the permits of one lease share its token. What a
// downstream may conclude from them depends on the limit:
//
//   - With limit 1, at most one lease of the key is valid at a time (up to
//     the exceptions FailClosed lists), so a downstream that records the
//     greatest token it has seen for the key and refuses smaller ones
//     refuses a stale holder: use limit 1 for mutual exclusion with fencing.
//   - With a limit above 1, several leases of the key are valid at once,
//     with different tokens, and one granted later has the greater token:
//     refusing tokens smaller than the greatest seen would refuse live
//     leases. A token then identifies a lease (and orders leases by when
//     they were granted); it does not tell a live lease from a lost one.
func FencingToken(ctx context.Context) (int64, bool) {
	t, ok := ctx.Value(tokenKey{}).(int64)
	return t, ok
}
