package gateway_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/gateway"
)

// With breaker.per: tenant, the Retry-After of a breaker_open answer is the
// time left until the breaker lets a probe through, as for backend
// breakers: not the whole breaker.timeout however much of it has passed.
func TestTenantBreakerRetryAfterIsTimeLeft(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, r *http.Request) { http.Error(w, "boom", 500) })
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	gw := start(t, be.URL, minimal+"breaker: {per: tenant, consecutive_failures: 2, timeout: 1h}\n", gateway.WithClock(clk))
	c := client(t)
	for range 2 {
		if resp, _ := do(t, c, http.MethodGet, gw.url, "bad", nil); resp.StatusCode != 500 {
			t.Fatalf("backend's 500 not passed through: %d", resp.StatusCode)
		}
	}
	clk.Advance(59 * time.Minute)
	resp, body := do(t, c, http.MethodGet, gw.url, "bad", nil)
	if code, _, _ := refusal(t, body); resp.StatusCode != 503 || code != "breaker_open" {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	if ra, _ := strconv.Atoi(resp.Header.Get("Retry-After")); ra > 60 {
		t.Errorf("Retry-After %q with 1m of the breaker's 1h left", resp.Header.Get("Retry-After"))
	}
}

// A retry the backends' breakers keep from being sent (the one backend's
// opened on the first try's failure) is no retry: the request is answered
// with the first try's failure (502), and backoff_retries_total, the
// retries after transport errors, does not count it.
func TestRetryRefusedByTheBreakersIsNotCounted(t *testing.T) {
	url, hits := flaky(t, 1)
	gw := start(t, url, minimal+"breaker: {consecutive_failures: 1, timeout: 1h}\n")
	resp, body := do(t, client(t), http.MethodGet, gw.url, "a", nil)
	if resp.StatusCode != http.StatusBadGateway || hits.Load() != 1 {
		t.Fatalf("%d %q after %d backend requests, want 502 after 1", resp.StatusCode, body, hits.Load())
	}
	if got := metric(t, gw.gw.Metrics(), "backoff_retries_total", "op", "upstream"); got != 0 {
		t.Errorf("backoff_retries_total = %v, want 0 (no retry sent)", got)
	}
}
