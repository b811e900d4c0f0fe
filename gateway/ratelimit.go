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
// made on first use and kept in a bounded LRU; random keys can only cost
// the LRU's bound. A tenant whose bucket was dropped from the LRU gets a
// new one, with no more tokens than the dropped one would have had (see
// rateLRU.floor): a client cannot refill a spent bucket by sending the
// LRU's worth of made-up keys.
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
	// renew are the tenants the previous state configured, and this one
	// does not, at another rate than the unconfigured tenants' now: a
	// bucket lru still holds for one (from before it was configured) is
	// made afresh at commit, its rate having changed twice since.
	renew []string
}

// rateLRU holds the unconfigured tenants' buckets, most recently used first.
type rateLRU struct {
	mu   sync.Mutex
	max  int
	lru  list.List // of *bucket, most recently used first
	byID map[string]*list.Element
	// floor bounds the tokens a bucket made afresh starts with: it holds
	// as few as the emptiest bucket dropped while not yet refilled, and
	// refills at the same rate. A dropped tenant may come back at once,
	// and the LRU cannot tell it from a new one: each new bucket so starts
	// with no more than that tenant's would have now. nil until such a
	// bucket is dropped.
	floor *rate.Limiter
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
			switch _, ok := rl.fixed[name]; {
			case ok:
			case sameRate(prev.fixedBy[name], cfg.RateLimit):
				if rl.adopt == nil {
					rl.adopt = make(map[string]*rate.Limiter)
				}
				rl.adopt[name] = lim
			case rl.lru == prev.lru:
				// Its rate changes: it starts afresh. The LRU, kept, may
				// hold the bucket it had before it was configured, under
				// the rate it is under again, as spent as it was then.
				rl.renew = append(rl.renew, name)
			}
		}
	}
	return rl
}

// commit puts the buckets newRateLimits took over from the tenants no
// longer configured among the unconfigured tenants' (adopt). It runs once
// the reload that made rl can no longer be refused, before its state is
// stored, so that the first request under it finds them.
func (rl *rateLimits) commit(now time.Time) {
	for name, lim := range rl.adopt {
		rl.lru.put(name, lim, now)
	}
	for _, name := range rl.renew {
		rl.lru.renew(name, rl.def)
	}
	rl.adopt, rl.renew = nil, nil
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
		lim = rl.lru.get(tenant, rl.def, now)
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

// renew gives tenant a full bucket made with def in place of the one it
// has, if it has one; it leaves the order as it is.
func (l *rateLRU) renew(tenant string, def *config.RateLimit) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.byID[tenant]; ok {
		e.Value.(*bucket).lim = newLimiter(def)
	}
}

// put makes lim tenant's bucket, in place of any it has, at now.
func (l *rateLRU) put(tenant string, lim *rate.Limiter, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.byID[tenant]; ok {
		e.Value.(*bucket).lim = lim
		return
	}
	if l.lru.Len() >= l.max {
		l.drop(now)
	}
	l.byID[tenant] = l.lru.PushFront(&bucket{tenant: tenant, lim: lim})
}

// get returns tenant's bucket, made with def at now if it has none.
func (l *rateLRU) get(tenant string, def *config.RateLimit, now time.Time) *rate.Limiter {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.byID[tenant]; ok {
		l.lru.MoveToFront(e)
		return e.Value.(*bucket).lim
	}
	if l.lru.Len() >= l.max {
		l.drop(now)
	}
	b := &bucket{tenant: tenant, lim: newLimiter(def)}
	if l.floor != nil {
		take(b.lim, now, float64(b.lim.Burst())-l.floor.TokensAt(now))
	}
	l.byID[tenant] = l.lru.PushFront(b)
	return b.lim
}

// drop removes the least recently used bucket, lowering the floor to its
// tokens when it has not refilled yet.
func (l *rateLRU) drop(now time.Time) {
	old := l.lru.Remove(l.lru.Back()).(*bucket)
	delete(l.byID, old.tenant)
	left := old.lim.TokensAt(now)
	if left >= float64(old.lim.Burst()) {
		return // as full as a new bucket: dropping it gives nothing back
	}
	if l.floor == nil {
		l.floor = rate.NewLimiter(old.lim.Limit(), old.lim.Burst())
	}
	take(l.floor, now, l.floor.TokensAt(now)-left)
}

// take removes n tokens, rounded up, from lim at now (at most its burst;
// none when n is not positive).
func take(lim *rate.Limiter, now time.Time, n float64) {
	if k := min(int(math.Ceil(n)), lim.Burst()); k > 0 {
		lim.ReserveN(now, k)
	}
}
