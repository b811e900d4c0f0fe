package gateway_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/net/http2/hpack"
)

// Over HTTP/2 net/http serves a request whose :method is no token (RFC
// 9110 section 9.1: "G T", "G(T"), which it refuses over HTTP/1 as it
// reads the request line. The transport would refuse to send it, an error
// counted as the backend's failure (502): any client could so open a
// backend's breaker for every tenant without a request reaching it. Such
// a request is refused 400 bad_method before its tenant is read, and never
// reaches a backend or its breaker.
func TestHTTP2MethodNotATokenRefused(t *testing.T) {
	var hits atomic.Int32
	be := backend(t, func(w http.ResponseWriter, r *http.Request) { hits.Add(1) })
	p := newPKI(t)
	gw := start(t, be.URL, minimal+tlsConfig(p)+"breaker: {consecutive_failures: 1, timeout: 1h}\n")
	for _, m := range []string{"G T", "G(T", "GET/", "G\u00c9T", "G,T", "G\tT"} {
		_, body := h2Outcome(t, gw.url, p, []hpack.HeaderField{{Name: ":method", Value: m}})
		if !strings.HasPrefix(body, `{"error":"bad_method"`) {
			t.Errorf("method %q: answered %q, want 400 bad_method", m, body)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the backend got %d requests with a method that is no token", n)
	}
	if got, body := h2Outcome(t, gw.url, p, nil); got != "served" || body != "" {
		t.Errorf("a GET after them: %s %q, want served by the backend: its breaker counted what the client sent", got, body)
	}
	if got := metric(t, gw.gw.Metrics(), "rejected_total", "reason", "method"); got != 6 {
		t.Errorf("rejected_total{reason=method} = %v, want 6", got)
	}
}
