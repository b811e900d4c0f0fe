package gateway

import (
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
	if tok := rl.lru.get("a", cfg.RateLimit).TokensAt(now); tok < -1e-6 {
		t.Errorf("the bucket holds %v tokens after the refusals, want 0", tok)
	}
	if d, ok := rl.allow("a", now.Add(time.Second)); !ok {
		t.Errorf("refused a second later, with a wait of %v", d)
	}
}
