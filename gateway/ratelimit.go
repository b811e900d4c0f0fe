package gateway

import (
	"container/list"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/groupexec/groupexec/gateway/config"
)

// rateLimits holds the tenants' token buckets (golang.org/x/time/rate):
// one per configured tenant with a rate limit of its own or the default
// one, made up front, and one per unconfigured tenant under the default,
// made on first use and kept in a bounded LRU. A tenant whose bucket was
// dropped from the LRU starts again full, which is what it would have been
// after idling that long; random keys can only cost the LRU's bound.
//
// A reload makes a new rateLimits from the old one: a bucket whose settings
// did not change is carried over with its state, a changed one starts full,
// whether the tenant stays configured or unconfigured or moves between the
// two.
type rateLimits struct {
	def     *config.RateLimit
	fixed   map[string]*rate.Limiter     // configured tenants; nil entry: no limit
	fixedBy map[string]*config.RateLimit // the settings each of fixed was made from
	lru     *rateLRU                     // unconfigured tenants' buckets, under def
	// adopt are buckets of tenants the previous state configured and this
	// one does not, to join lru, which the previous state may share, when
	// this state is stored (commit): a reload refused after newRateLimits
	// must leave the shared LRU as it was.
	adopt map[string]*rate.Limiter
}

// rateLRU holds the unconfigured tenants' buckets, most recently used first.
type rateLRU struct {
	mu   sync.Mutex
	max  int
	lru  list.List // of *bucket, most recently used first
	byID map[string]*list.Element
}

type bucket struct {
	tenant string
	lim    *rate.Limiter
}

// minRateLRU is the least number of unconfigured tenants' buckets kept.
const minRateLRU = 1024

// newRateLimits makes cfg's buckets, taking over prev's (nil: none) where
// their settings are the same.
func newRateLimits(cfg *config.Config, prev *rateLimits) *rateLimits {
	rl := &rateLimits{def: cfg.RateLimit, fixed: make(map[string]*rate.Limiter),
		fixedBy: make(map[string]*config.RateLimit)}
	add := func(name string, r *config.RateLimit) {
		if prev != nil {
			if old, ok := prev.fixedBy[name]; ok && sameRate(old, r) {
				rl.fixed[name], rl.fixedBy[name] = prev.fixed[name], old
				return
			}
			// A tenant configured now, under the rate it had unconfigured,
			// keeps its bucket: made afresh, it would be full, a refill
			// for a tenant that spent its burst.
			if _, ok := prev.fixed[name]; !ok && r != nil && sameRate(prev.def, r) {
				if lim := prev.lru.peek(name); lim != nil {
					rl.fixed[name], rl.fixedBy[name] = lim, r
					return
				}
			}
		}
		rl.fixed[name], rl.fixedBy[name] = newLimiter(r), r
	}
	for name, t := range cfg.Tenants {
		add(name, cmpRate(t.RateLimit, cfg.RateLimit))
	}
	if _, ok := rl.fixed[cfg.Tenant.Default]; !ok {
		add(cfg.Tenant.Default, cfg.RateLimit)
	}
	if prev != nil && sameRate(prev.def, cfg.RateLimit) {
		rl.lru = prev.lru
	} else {
		rl.lru = &rateLRU{max: max(cfg.Tenant.MaxGroups, minRateLRU), byID: make(map[string]*list.Element)}
	}
	if prev != nil && cfg.RateLimit != nil {
		// A tenant no longer configured, whose bucket was made with the
		// rate unconfigured tenants now have, keeps it among theirs, for
		// the same reason. The previous state, which may share the LRU,
		// reads its bucket from fixed, never from the LRU.
		for name, lim := range prev.fixed {
			if _, ok := rl.fixed[name]; !ok && sameRate(prev.fixedBy[name], cfg.RateLimit) {
				if rl.adopt == nil {
					rl.adopt = make(map[string]*rate.Limiter)
				}
				rl.adopt[name] = lim
			}
		}
	}
	return rl
}

// commit puts the buckets newRateLimits took over from the tenants no
// longer configured among the unconfigured tenants' (adopt). It runs once
// the reload that made rl can no longer be refused, before its state is
// stored, so that the first request under it finds them.
func (rl *rateLimits) commit() {
	for name, lim := range rl.adopt {
		rl.lru.put(name, lim)
	}
	rl.adopt = nil
}

// sameRate reports whether a and b make the same bucket.
func sameRate(a, b *config.RateLimit) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func cmpRate(a, b *config.RateLimit) *config.RateLimit {
	if a != nil {
		return a
	}
	return b
}

func newLimiter(r *config.RateLimit) *rate.Limiter {
	if r == nil {
		return nil
	}
	return rate.NewLimiter(rate.Limit(r.RPS), r.Burst)
}

// allow takes a token from tenant's bucket at now, or reports how long
// until one is there.
func (rl *rateLimits) allow(tenant string, now time.Time) (time.Duration, bool) {
	lim, ok := rl.fixed[tenant]
	if !ok {
		if rl.def == nil {
			return 0, true
		}
		lim = rl.lru.get(tenant, rl.def)
	}
	if lim == nil || lim.AllowN(now, 1) {
		return 0, true
	}
	// The wait is the delay a reservation would have, read from the
	// bucket's tokens rather than by reserving and cancelling: a
	// reservation cancelled after a later one was made gives back none of
	// its token, so concurrent refusals would drain the bucket.
	return delayOf(lim, now), false
}

// delayOf is how long from now until lim has a token: the delay of a
// reservation of one, the largest Duration when that is further out.
func delayOf(lim *rate.Limiter, now time.Time) time.Duration {
	secs := (1 - lim.TokensAt(now)) / float64(lim.Limit())
	if ns := secs * float64(time.Second); ns >= math.MaxInt64 {
		return math.MaxInt64
	} else if ns > 0 {
		return max(time.Duration(ns), 1)
	}
	return 1 // a token came in between: come back at once
}

// peek returns tenant's bucket, or nil if it has none, leaving the order
// as it is.
func (l *rateLRU) peek(tenant string) *rate.Limiter {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.byID[tenant]; ok {
		return e.Value.(*bucket).lim
	}
	return nil
}

// put makes lim tenant's bucket, in place of any it has.
func (l *rateLRU) put(tenant string, lim *rate.Limiter) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.byID[tenant]; ok {
		e.Value.(*bucket).lim = lim
		return
	}
	if l.lru.Len() >= l.max {
		old := l.lru.Remove(l.lru.Back()).(*bucket)
		delete(l.byID, old.tenant)
	}
	l.byID[tenant] = l.lru.PushFront(&bucket{tenant: tenant, lim: lim})
}

// get returns tenant's bucket, made with def if it has none.
func (l *rateLRU) get(tenant string, def *config.RateLimit) *rate.Limiter {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.byID[tenant]; ok {
		l.lru.MoveToFront(e)
		return e.Value.(*bucket).lim
	}
	if l.lru.Len() >= l.max {
		old := l.lru.Remove(l.lru.Back()).(*bucket)
		delete(l.byID, old.tenant)
	}
	b := &bucket{tenant: tenant, lim: newLimiter(def)}
	l.byID[tenant] = l.lru.PushFront(b)
	return b.lim
}
