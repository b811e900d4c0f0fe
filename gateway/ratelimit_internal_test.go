package gateway

import (
	"container/list"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/groupexec/groupexec/gateway/config"
)

// Requests refused by a tenant's rate limit, however many arrive at once,
// leave its bucket as they found it: once it has refilled by one token, the
// next request is served.
func TestRateLimitRefusalsTakeNoTokens(t *testing.T) {
	cfg, err := config.Parse([]byte("backends: [http://a:1]\nrate_limit: {rps: 1, burst: 1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	rl := newRateLimits(cfg, nil)
	now := time.Unix(1_000_000, 0)
	if _, ok := rl.allow("a", now); !ok {
		t.Fatal("the burst's request was refused")
	}
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 20000 {
				if _, ok := rl.allow("a", now); ok {
					t.Error("a request past the burst was allowed")
					return
				}
			}
		})
	}
	wg.Wait()
	if tok := rl.lru.get("a", cfg.RateLimit, now).TokensAt(now); tok < -1e-6 {
		t.Errorf("the bucket holds %v tokens after the refusals, want 0", tok)
	}
	if d, ok := rl.allow("a", now.Add(time.Second)); !ok {
		t.Errorf("refused a second later, with a wait of %v", d)
	}
}

// A reload refused after it has made its buckets leaves the unconfigured
// tenants' buckets, which it shares with the state in force, as they were:
// a tenant the refused config no longer configures does not take a place
// among them (which, the LRU full, would drop another's spent bucket).
func TestRefusedReloadLeavesTheUnconfiguredBuckets(t *testing.T) {
	cfg, err := config.Parse([]byte("backends: [http://127.0.0.1:1]\nrate_limit: {rps: 1, burst: 1}\ntenants: {a: {}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(cfg, WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	next := *cfg
	next.Tenants = nil       // a is unconfigured now, under the same rate
	next.Tenant.Default = "" // no group can be given limits under an empty key
	if err := g.Reload(&next); err == nil {
		t.Fatal("a config with an empty default tenant was applied")
	}
	if lim := g.state.Load().rates.lru.peek("a"); lim != nil {
		t.Error("the refused reload put tenant a's bucket among the unconfigured tenants'")
	}
	next.Tenant.Default = cfg.Tenant.Default
	if err := g.Reload(&next); err != nil {
		t.Fatal(err)
	}
	if lim := g.state.Load().rates.lru.peek("a"); lim == nil {
		t.Error("an applied reload that unconfigures tenant a did not keep its bucket among the unconfigured tenants'")
	}
}

// A bucket dropped from a full LRU once refilled gives the next new tenant
// a full bucket; one dropped while spent lowers the tokens every new
// bucket starts with to its own, until they would have refilled.
func TestRateLRUDropKeepsSpentTokens(t *testing.T) {
	def := &config.RateLimit{RPS: 1, Burst: 3}
	l := &rateLRU{max: 2, byID: make(map[string]*list.Element)}
	t0 := time.Unix(1_000_000, 0)
	l.get("a", def, t0).AllowN(t0, 1)
	l.get("b", def, t0).AllowN(t0, 1)
	t1 := t0.Add(time.Second) // a and b refilled
	if tok := l.get("c", def, t1).TokensAt(t1); tok != 3 || l.floor != nil {
		t.Errorf("a new bucket after a refilled one was dropped holds %v tokens (floor %v), want 3", tok, l.floor)
	}
	l.get("c", def, t1).AllowN(t1, 3) // c spent
	l.get("d", def, t1)               // drops b, refilled
	if tok := l.get("e", def, t1).TokensAt(t1); tok > 0 {
		t.Errorf("a new bucket after a spent one was dropped holds %v tokens, want none", tok)
	}
	if l.get("c", def, t1).AllowN(t1, 1) {
		t.Error("c, its spent bucket dropped, was allowed at once")
	}
	t2 := t1.Add(3 * time.Second)
	if tok := l.get("f", def, t2).TokensAt(t2); tok != 3 {
		t.Errorf("a new bucket once the dropped one would have refilled holds %v tokens, want 3", tok)
	}
}
