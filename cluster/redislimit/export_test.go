package redislimit

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// SetRenewHook makes every renewal round call f first; an error fails the
// round as if Redis were unreachable (a partition, for tests).
func SetRenewHook(h *Holder, f func() error) {
	h.mu.Lock()
	h.renewHook = f
	h.mu.Unlock()
}

// SetReplyHook makes every refill call f once its reply has arrived, before
// using it (a slow round trip, for tests); an error replaces the reply, as
// if it was lost.
func SetReplyHook(h *Holder, f func() error) {
	h.mu.Lock()
	h.replyHook = f
	h.mu.Unlock()
}

// FallbackPermit returns a fallback permit of weight 1 (as FailOpen grants
// while Redis is down) for key.
func FallbackPermit(h *Holder, key string) interface {
	Bind(context.Context, context.CancelCauseFunc) context.Context
	Release()
} {
	return &permit{h: h, n: 1, key: key}
}

// SetReleaseHook makes every give-back outside the renewal round call f
// first; an error fails it as if Redis were unreachable.
func SetReleaseHook(h *Holder, f func() error) {
	h.mu.Lock()
	h.releaseHook = f
	h.mu.Unlock()
}

// Share returns what l's holder last heard from Redis about key: how many
// other holders wait, the most it may keep meanwhile, and how many others
// wait for room below an even split.
func Share(l *Limiter, key string) (others, cap, deprived int) {
	l.h.mu.Lock()
	defer l.h.mu.Unlock()
	if ks := l.keys[key]; ks != nil {
		return ks.others, ks.cap, ks.deprived
	}
	return 0, 0, 0
}

// HoldLock takes h's lock, as if h were paused, and returns its unlock:
// nothing of h runs meanwhile (renewals, lease timers, refills).
func HoldLock(h *Holder) (unlock func()) {
	h.mu.Lock()
	return h.mu.Unlock
}

// RenewNow runs one renewal round now, on the caller's goroutine (tests
// give the holder a renew interval longer than they run, so that only
// these rounds happen).
func RenewNow(h *Holder) { h.renewOnce() }

// Channel returns the pub/sub channel h hears contention notices on.
func Channel(h *Holder) string { return h.channel() }

// SetUnwaitHook makes every refiller pass that ends waiting records call f
// on its call's goroutine, before it is sent; an error fails it as if
// Redis were unreachable. f blocking past the op timeout makes the pass a
// late one: the holder stops waiting for it, and it reaches Redis when f
// returns.
func SetUnwaitHook(h *Holder, f func() error) {
	h.mu.Lock()
	h.unwaitHook = f
	h.mu.Unlock()
}

// SetRefillHook is SetUnwaitHook for the passes that ask for blocks.
func SetRefillHook(h *Holder, f func() error) {
	h.mu.Lock()
	h.refillHook = f
	h.mu.Unlock()
}

// Hear hands h a contention notice, as its subscriber does when the notice
// arrives.
func Hear(h *Holder, payload string) { h.hear(payload) }

// LastFailure returns when a call of h's to Redis last failed; zero if
// none has.
func LastFailure(h *Holder) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.failedAt
}

// Orphans returns how many leases of key l's holder still has to give
// back by id: leases Redis may have granted whose reply never came.
func Orphans(l *Limiter, key string) int {
	l.h.mu.Lock()
	defer l.h.mu.Unlock()
	if ks := l.keys[key]; ks != nil {
		return len(ks.orphans)
	}
	return 0
}

// LoadReleaseScript loads the script that gives leases back into the Redis
// c reaches, as a holder's first give-back does.
func LoadReleaseScript(ctx context.Context, c redis.Scripter) error {
	return releaseScript.Load(ctx, c).Err()
}

// KeyStateByName reports whether l, as a contention notice naming key's
// leases key finds it, finds the state TryAcquire keeps for key, and how
// many bytes that leases key's name has.
func KeyStateByName(l *Limiter, key string) (found bool, nameLen int) {
	l.h.mu.Lock()
	defer l.h.mu.Unlock()
	ks := l.keys[key]
	if ks == nil {
		return false, 0
	}
	scope, name, ok := l.h.parseLeasesKey(ks.keys[0])
	return ok && scope == l.scope && l.byNameLocked(name) == ks, len(ks.keys[0])
}

// HashedKeys returns how many keys over maxKeyName bytes l keeps.
func HashedKeys(l *Limiter) int {
	l.h.mu.Lock()
	defer l.h.mu.Unlock()
	return len(l.hashed)
}

// SetNameHook makes h call f each time it names a key over maxKeyName
// bytes (hashing it), with whether another goroutine could take h's lock
// meanwhile, within wait: false when the naming holds it.
func SetNameHook(h *Holder, wait time.Duration, f func(lockFree bool)) {
	h.mu.Lock()
	h.nameHook = func() {
		took := make(chan struct{})
		go func() {
			h.mu.Lock()
			close(took)
			h.mu.Unlock()
		}()
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-took:
			f(true)
		case <-t.C:
			f(false) // the goroutine takes the lock once the naming is over
		}
	}
	h.mu.Unlock()
}

// LoadAcquireScript loads the script that leases blocks into the Redis c
// reaches, as another holder's first refill does.
func LoadAcquireScript(ctx context.Context, c redis.Scripter) error {
	return acquireScript.Load(ctx, c).Err()
}
