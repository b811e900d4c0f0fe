package gateway_test

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/gateway"
	"github.com/groupexec/groupexec/gateway/config"
)

// A reload that changes no rate limit keeps every bucket as it is: a
// tenant that spent its burst is still refused after a reload that only
// adds another tenant's concurrency limit.
func TestReloadKeepsUnchangedRateBuckets(t *testing.T) {
	be := backend(t, func(http.ResponseWriter, *http.Request) {})
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	const base = "backends: [%s]\nrate_limit: {rps: 1, burst: 1}\n"
	path, write := configFile(t, be.URL, base)
	gw := start(t, be.URL, "listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\n"+base,
		gateway.WithConfigFile(path), gateway.WithClock(clk))
	c := client(t)
	if resp, _ := do(t, c, http.MethodGet, gw.url, "a", nil); resp.StatusCode != 200 {
		t.Fatalf("first request: %d", resp.StatusCode)
	}
	if resp, _ := do(t, c, http.MethodGet, gw.url, "a", nil); resp.StatusCode != 429 {
		t.Fatalf("past the burst: %d", resp.StatusCode)
	}
	write(base + "tenants: {b: {max_concurrency: 2}}\n") // no rate setting changes
	if err := gw.gw.ReloadFile(); err != nil {
		t.Fatal(err)
	}
	if resp, _ := do(t, c, http.MethodGet, gw.url, "a", nil); resp.StatusCode != 429 {
		t.Errorf("tenant a after a reload that left its rate alone: %d, want 429 (its bucket kept, still empty)", resp.StatusCode)
	}
}

// A tenant a reload configures without a rate of its own, or removes from
// the config, is under the same rate before and after: it keeps its
// bucket, and a tenant that spent its burst is still refused, rather than
// given a full bucket by the move between the configured tenants' buckets
// and the unconfigured ones'.
func TestReloadKeepsBucketOfTenantConfiguredOrRemoved(t *testing.T) {
	be := backend(t, func(http.ResponseWriter, *http.Request) {})
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	const base = "backends: [%s]\nrate_limit: {rps: 1, burst: 1}\n"
	path, write := configFile(t, be.URL, base+"tenants: {b: {max_concurrency: 2}}\n")
	gw := start(t, be.URL, "listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\n"+base+"tenants: {b: {max_concurrency: 2}}\n",
		gateway.WithConfigFile(path), gateway.WithClock(clk))
	c := client(t)
	for _, tenant := range []string{"a", "b"} {
		if resp, _ := do(t, c, http.MethodGet, gw.url, tenant, nil); resp.StatusCode != 200 {
			t.Fatalf("tenant %s's first request: %d", tenant, resp.StatusCode)
		}
	}
	write(base + "tenants: {a: {max_concurrency: 2}}\n")
	if err := gw.gw.ReloadFile(); err != nil {
		t.Fatal(err)
	}
	for tenant, what := range map[string]string{"a": "configured without a rate of its own", "b": "removed from the config"} {
		if resp, _ := do(t, c, http.MethodGet, gw.url, tenant, nil); resp.StatusCode != 429 {
			t.Errorf("tenant %s, %s: %d, want 429 (its bucket kept, still empty)", tenant, what, resp.StatusCode)
		}
	}
}

// A reload that adds a backend keeps the breakers of the backends it had:
// an open one stays open, and the backend stays out of the rotation.
func TestReloadKeepsUnchangedBackendBreakers(t *testing.T) {
	bad := backend(t, func(w http.ResponseWriter, r *http.Request) { http.Error(w, "boom", 500) })
	good := backend(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	const brk = "breaker: {consecutive_failures: 1, timeout: 1h}\n"
	path, write := configFile(t, bad.URL, "backends: [%s]\n"+brk)
	gw := start(t, bad.URL, "listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\nbackends: [%s]\n"+brk, gateway.WithConfigFile(path))
	c := client(t)
	if resp, _ := do(t, c, http.MethodGet, gw.url, "a", nil); resp.StatusCode != 500 {
		t.Fatalf("backend's 500: %d", resp.StatusCode)
	}
	if resp, _ := do(t, c, http.MethodGet, gw.url, "a", nil); resp.StatusCode != 503 {
		t.Fatalf("with the only backend's breaker open: %d", resp.StatusCode)
	}
	write("backends: [%s, " + good.URL + "]\n" + brk)
	if err := gw.gw.ReloadFile(); err != nil {
		t.Fatal(err)
	}
	if got := metric(t, gw.gw.Metrics(), "breaker_state", "backend", bad.URL); got != 1 {
		t.Errorf("the failing backend's breaker after a reload that added another backend: state %v, want 1 (open)", got)
	}
	for i := range 4 {
		if resp, _ := do(t, c, http.MethodGet, gw.url, "a", nil); resp.StatusCode != 200 {
			t.Errorf("request %d after the reload: %d, want 200 from the new backend alone", i, resp.StatusCode)
		}
	}
}

// A reload is applied whole or not at all: a config the executor cannot
// take for one group changes neither the global limit nor any other
// group's, though they come before it, and the config in force stays.
func TestReloadRefusedChangesNoLimit(t *testing.T) {
	be := backend(t, func(http.ResponseWriter, *http.Request) {})
	gw := start(t, be.URL, minimal+"limits: {global_max_in_flight: 8}\ntenants: {a: {max_concurrency: 2}}\n")
	do(t, client(t), http.MethodGet, gw.url, "a", nil) // the executor keeps the group from now on
	before := gw.gw.Config()
	cfg := *before
	global, conc := 3, 5
	cfg.Limits.GlobalMaxInFlight = &global
	cfg.Tenants = map[string]config.TenantLimits{"a": {MaxConcurrency: &conc}}
	cfg.Tenant.Default = "" // no group can be given limits under an empty key
	if err := gw.gw.Reload(&cfg); err == nil {
		t.Fatal("a config with an empty default tenant was applied")
	}
	if s := gw.gw.Executor().Stats(); s.GlobalMaxInFlight != 8 {
		t.Errorf("global limit %d after a refused reload, want 8 as before", s.GlobalMaxInFlight)
	}
	if got := groupLimitOf(gw, "a"); got != 2 {
		t.Errorf("tenant a's limit %d after a refused reload, want 2 as before", got)
	}
	if gw.gw.Config() != before {
		t.Error("the refused config is in force")
	}
}

// A tenant configured at a rate of its own, then removed from the config,
// is under a changed rate: it starts afresh, with a full bucket of the
// unconfigured tenants' rate, not the bucket it had before it was
// configured, which the unconfigured tenants' buckets still held, as
// spent as it was left.
func TestReloadGivesARemovedTenantAFreshBucket(t *testing.T) {
	be := backend(t, func(http.ResponseWriter, *http.Request) {})
	clk := clock.NewFake(time.Unix(1_000_000, 0)) // never moves: no bucket refills
	const base = "backends: [%s]\nrate_limit: {rps: 1, burst: 1}\n"
	path, write := configFile(t, be.URL, base)
	gw := start(t, be.URL, "listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\n"+base,
		gateway.WithConfigFile(path), gateway.WithClock(clk))
	c := client(t)
	status := func(what string, want int) {
		t.Helper()
		if resp, _ := do(t, c, http.MethodGet, gw.url, "a", nil); resp.StatusCode != want {
			t.Fatalf("tenant a, %s: %d, want %d", what, resp.StatusCode, want)
		}
	}
	reload := func(yaml string) {
		t.Helper()
		write(yaml)
		if err := gw.gw.ReloadFile(); err != nil {
			t.Fatal(err)
		}
	}
	status("unconfigured, its burst", http.StatusOK)
	status("unconfigured, past its burst", http.StatusTooManyRequests)
	reload(base + "tenants: {a: {rate_limit: {rps: 1, burst: 2}}}\n")
	status("configured at a rate of its own", http.StatusOK)
	reload(base)
	status("removed from the config, under the unconfigured tenants' rate again", http.StatusOK)
	status("removed, past the burst of its fresh bucket", http.StatusTooManyRequests)
}
