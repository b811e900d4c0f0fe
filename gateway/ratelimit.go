package gateway

import (
	"container/list"
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
type rateLimits struct {
	def   *config.RateLimit
	fixed map[string]*rate.Limiter // configured tenants; nil entry: no limit

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

func newRateLimits(cfg *config.Config) *rateLimits {
	rl := &rateLimits{def: cfg.RateLimit, fixed: make(map[string]*rate.Limiter),
		max: max(cfg.Tenant.MaxGroups, minRateLRU), byID: make(map[string]*list.Element)}
	for name, t := range cfg.Tenants {
		rl.fixed[name] = newLimiter(cmpRate(t.RateLimit, cfg.RateLimit))
	}
	if _, ok := rl.fixed[cfg.Tenant.Default]; !ok {
		rl.fixed[cfg.Tenant.Default] = newLimiter(cfg.RateLimit)
	}
	return rl
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
		lim = rl.unconfigured(tenant)
	}
	if lim == nil || lim.AllowN(now, 1) {
		return 0, true
	}
	// The wait is the delay of a reservation, which is then given back:
	// the request is refused, not queued.
	r := lim.ReserveN(now, 1)
	d := r.DelayFrom(now)
	if d == 0 {
		return 0, true // refilled in between
	}
	r.CancelAt(now)
	return d, false
}

func (rl *rateLimits) unconfigured(tenant string) *rate.Limiter {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if e, ok := rl.byID[tenant]; ok {
		rl.lru.MoveToFront(e)
		return e.Value.(*bucket).lim
	}
	if rl.lru.Len() >= rl.max {
		old := rl.lru.Remove(rl.lru.Back()).(*bucket)
		delete(rl.byID, old.tenant)
	}
	b := &bucket{tenant: tenant, lim: newLimiter(rl.def)}
	rl.byID[tenant] = rl.lru.PushFront(b)
	return b.lim
}
