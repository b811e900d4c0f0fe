package gateway_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/gateway"
)

// A tenant that spent its burst does not get it back by having its bucket
// pushed out of the unconfigured tenants' LRU: a client sending one request
// under each of 1024 made-up keys at once (the LRU holding
// max(tenant.max_groups, 1024) buckets) dropped acme's spent bucket, and
// acme's next request was given a full one, as if it had idled until its
// bucket refilled. Once the time to refill has passed, acme's burst is
// back.
func TestRateBucketNotRefilledByEviction(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	gw := start(t, backend(t, func(http.ResponseWriter, *http.Request) {}).URL,
		minimal+"rate_limit: {rps: 1, burst: 3}\ntenant: {max_groups: 16}\n", gateway.WithClock(clk))
	c := client(t)
	send := func(tenant string) int {
		resp, _ := do(t, c, http.MethodGet, gw.url, tenant, nil)
		return resp.StatusCode
	}
	for i := range 3 {
		if code := send("acme"); code != 200 {
			t.Fatalf("acme's request %d within its burst: %d", i+1, code)
		}
	}
	if code := send("acme"); code != 429 {
		t.Fatalf("acme past its burst: %d, want 429", code)
	}
	for i := range 1024 {
		send(fmt.Sprintf("k%d", i))
	}
	if code := send("acme"); code != 429 {
		t.Errorf("acme past its burst, after 1024 other keys: %d, want 429", code)
	}
	clk.Advance(3 * time.Second)
	for i := range 3 {
		if code := send("acme"); code != 200 {
			t.Fatalf("acme's request %d within its burst, refilled: %d", i+1, code)
		}
	}
}
