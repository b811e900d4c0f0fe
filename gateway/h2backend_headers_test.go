package gateway_test

import (
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/groupexec/groupexec/gateway"
)

// An https backend speaking HTTP/2 announces how large a request's headers
// may be (SETTINGS_MAX_HEADER_LIST_SIZE), and net/http's transport refuses
// to send a request over it, with an error of its own. Under the gateway's
// max_header_bytes, such a request was answered 502 and counted as the
// backend's failure, tried again on the next backend: any client could
// open a backend's breaker for every tenant with requests that never
// reached it, where a backend over HTTP/1 answers them 431 itself. It is
// the request's size: answered 431 headers_too_large, counted in
// rejected_total{reason="header-size"}, not retried, and no breaker's.
func TestHeadersOverAnHTTP2BackendsLimitAre431(t *testing.T) {
	be := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	be.EnableHTTP2 = true
	be.Config.MaxHeaderBytes = 4 << 10
	be.StartTLS()
	t.Cleanup(be.Close)
	roots := x509.NewCertPool()
	roots.AddCert(be.Certificate())
	gw := build(t, be.URL, minimal+"breaker: {consecutive_failures: 1, timeout: 1h}\n")
	gateway.TrustBackends(gw, roots)
	url := serve(t, gw).url
	// The first request opens the connection, whose settings the backend
	// then announces; the second is over them, the third is not.
	for i, big := range []int{0, 16 << 10, 0} {
		req := "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Big: " + strings.Repeat("a", big) + "\r\n\r\n"
		resp, body, err := rawExchange(t, url, req)
		if err != nil {
			t.Fatal(err)
		}
		want, code := http.StatusOK, ""
		if big > 0 {
			want, code = http.StatusRequestHeaderFieldsTooLarge, `{"error":"headers_too_large"`
		}
		if resp.StatusCode != want || !strings.HasPrefix(body, code) {
			t.Errorf("request %d: %d %q, want %d %s", i+1, resp.StatusCode, body, want, code)
		}
	}
	if got := metric(t, gw.Metrics(), "rejected_total", "reason", "header-size"); got != 1 {
		t.Errorf("rejected_total{reason=header-size} = %v, want 1", got)
	}
	if got := metric(t, gw.Metrics(), "backoff_retries_total", "op", "upstream"); got != 0 {
		t.Errorf("backoff_retries_total = %v, want 0 (not retried)", got)
	}
}
