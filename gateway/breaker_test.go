package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/gateway"
)

// With breaker.per: tenant, a tenant whose requests keep failing gets its
// own breaker opened: 503 at once, without reaching the backend, while
// another tenant is not affected.
func TestTenantBreakerOpen503(t *testing.T) {
	var hits atomic.Int32
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Error(w, "boom", 500)
	})
	gw := start(t, be.URL, minimal+"breaker: {per: tenant, consecutive_failures: 2, timeout: 1h}\n")
	c := client(t)
	for range 2 {
		if resp, _ := do(t, c, http.MethodGet, gw.url, "bad", nil); resp.StatusCode != 500 {
			t.Fatalf("backend's 500 not passed through: %d", resp.StatusCode)
		}
	}
	resp, body := do(t, c, http.MethodGet, gw.url, "bad", nil)
	if code, _, _ := refusal(t, body); resp.StatusCode != 503 || code != "breaker_open" {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	if ra := resp.Header.Get("Retry-After"); ra != "3600" {
		t.Errorf("Retry-After %q", ra)
	}
	if hits.Load() != 2 {
		t.Errorf("backend hit %d times", hits.Load())
	}
	if resp, _ := do(t, c, http.MethodGet, gw.url, "good", nil); resp.StatusCode != 500 {
		t.Errorf("other tenant: %d", resp.StatusCode)
	}
}

// By default breakers are per backend: a failing backend is taken out of the
// rotation once its breaker opens, and every tenant is served by the others.
// No tenant is locked out by failures it did not cause.
func TestBackendBreakerSkipsFailingBackend(t *testing.T) {
	var badHits atomic.Int32
	bad := backend(t, func(w http.ResponseWriter, r *http.Request) {
		badHits.Add(1)
		http.Error(w, "boom", 500)
	})
	good := backend(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	gw := start(t, bad.URL, "backends: [%s, "+good.URL+"]\nbreaker: {consecutive_failures: 3, timeout: 1h}\n")
	c := client(t)
	var failed int
	for i := range 30 {
		resp, _ := do(t, c, http.MethodGet, gw.url, fmt.Sprintf("t%d", i%3), nil)
		switch resp.StatusCode {
		case 200:
		case 500:
			failed++
		default:
			t.Fatalf("request %d: %d", i, resp.StatusCode)
		}
	}
	if failed != 3 || badHits.Load() != 3 {
		t.Errorf("%d requests failed, the failing backend got %d; want 3 and 3", failed, badHits.Load())
	}
	code, body := get(t, client(t), gw.admin+"/readyz")
	if code != 200 || !strings.Contains(body, "breaker open: "+bad.URL) {
		t.Errorf("readyz %d %q: want ready, listing the open breaker", code, body)
	}
}

// A backend's breaker stays open breaker.timeout at first, then twice as long
// each time its probe fails, up to breaker.max_timeout, and back to
// breaker.timeout once a probe succeeds. Retry-After says how long is left;
// /readyz fails while every backend's breaker is open.
func TestBackendBreakerBacksOff(t *testing.T) {
	var healthy atomic.Bool
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {
		if !healthy.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
		}
	})
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	gw := start(t, be.URL, minimal+"breaker: {consecutive_failures: 1, timeout: 1s, max_timeout: 4s}\n", gateway.WithClock(clk))
	c := client(t)
	status := func() (int, string) {
		resp, _ := do(t, c, http.MethodGet, gw.url, "a", nil)
		return resp.StatusCode, resp.Header.Get("Retry-After")
	}
	if code, _ := status(); code != 503 {
		t.Fatalf("the backend's own 503: %d", code)
	}
	for i, open := range []int{1, 2, 4, 4} {
		code, ra := status()
		if code != 503 || ra != fmt.Sprint(open) {
			t.Fatalf("opening %d: %d Retry-After %q, want 503 and %d", i+1, code, ra, open)
		}
		if rc, body := get(t, client(t), gw.admin+"/readyz"); rc != 503 || !strings.Contains(body, "every backend's breaker is open") {
			t.Errorf("readyz while open: %d %q", rc, body)
		}
		clk.Advance(time.Duration(open) * time.Second)
		if code, _ := status(); code != 503 { // the probe, which fails
			t.Fatalf("probe after opening %d: %d", i+1, code)
		}
	}
	clk.Advance(4 * time.Second)
	healthy.Store(true)
	if code, _ := status(); code != 200 {
		t.Fatalf("probe to the healthy backend: %d", code)
	}
	healthy.Store(false)
	status() // fails and opens again, for breaker.timeout
	if code, ra := status(); code != 503 || ra != "1" {
		t.Errorf("after closing and failing again: %d Retry-After %q, want 503 and 1", code, ra)
	}
}
