package gateway_test

import (
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/groupexec/groupexec/gateway"
)

// net/http serves an HTTP/1 request whose target is a URI with a scheme
// and no authority ("http:t/acme/x", "foo:%2Ft%2Facme"): it parses it as
// an opaque URL, with no path. The proxy sent the opaque part as the
// backend's request-target ("GET t/acme/x HTTP/1.1", "GET %2Ft%2Facme
// HTTP/1.1"), no origin-form (RFC 9112 3.2.1), with tenant.from path
// under the default tenant (no path, no tenant): a backend taking such a
// target and decoding it before it routes would serve "/t/acme" under the
// default tenant's limits. Such a request is refused
// 400 bad_target before its tenant is read, and never reaches a backend;
// an absolute-form target with an authority, or a scheme followed by a
// path ("http:/t/acme/x"), is proxied by its path.
func TestOpaqueTargetRefused(t *testing.T) {
	url, taken := lineBackend(t)
	gw := start(t, url, minimal+"tenant: {from: path, path_prefix: /t}\n")
	refused := 0
	for _, tc := range []struct{ target, status, line string }{
		{"http:t/acme/x", "400", ""},
		{"foo:%2Ft%2Facme", "400", ""},
		{"https:t/acme", "400", ""},
		{"HTTP:t/acme?q=1", "400", ""},
		{"http:/t/acme/x", "200", "GET /t/acme/x HTTP/1.1"},
		{"http://example/t/acme/x", "200", "GET /t/acme/x HTTP/1.1"},
		{"/t/acme/x", "200", "GET /t/acme/x HTTP/1.1"},
	} {
		resp, body, err := rawExchange(t, gw.url, "GET "+tc.target+" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		if err != nil {
			t.Fatalf("%q: %v", tc.target, err)
		}
		got := taken()
		if got := strconv.Itoa(resp.StatusCode); got != tc.status {
			t.Errorf("%q: %s %q, want %s", tc.target, got, body, tc.status)
		}
		if tc.status == "400" {
			refused++
			if !strings.HasPrefix(body, `{"error":"bad_target"`) {
				t.Errorf("%q: %q, want 400 bad_target", tc.target, body)
			}
		}
		wantLine(t, tc.target, got, tc.line)
	}
	if got := metric(t, gw.gw.Metrics(), "rejected_total", "reason", "target"); got != float64(refused) {
		t.Errorf("rejected_total{reason=target} = %v, want %d", got, refused)
	}
}

// Sent to a backend over HTTP/2 (an https backend that offers it), an
// opaque target was no :path at all: net/http's transport refused to send
// it, an error counted as the backend's failure (502), so that any client
// could open a backend's breaker for every tenant without a request
// reaching it. Refused before it is proxied, it counts against no breaker.
func TestOpaqueTargetOpensNoBreaker(t *testing.T) {
	be := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	be.EnableHTTP2 = true
	be.StartTLS()
	t.Cleanup(be.Close)
	roots := x509.NewCertPool()
	roots.AddCert(be.Certificate())
	gw := build(t, be.URL, minimal+"breaker: {consecutive_failures: 1, timeout: 1h}\n")
	gateway.TrustBackends(gw, roots)
	url := serve(t, gw).url
	for i, target := range []string{"/warm", "http:x", "/"} {
		resp, body, err := rawExchange(t, url, "GET "+target+" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		if err != nil {
			t.Fatalf("%q: %v", target, err)
		}
		want := http.StatusOK
		if i == 1 {
			want = http.StatusBadRequest
		}
		if resp.StatusCode != want {
			t.Errorf("%q: %d %q, want %d", target, resp.StatusCode, body, want)
		}
	}
}

// Over HTTP/2 net/http serves an opaque :path ("http:t/acme") as it does
// an HTTP/1 target: it is refused alike.
func TestHTTP2OpaquePathRefused(t *testing.T) {
	url, taken := lineBackend(t)
	p := newPKI(t)
	gw := start(t, url, minimal+tlsConfig(p)+"tenant: {from: path, path_prefix: /t}\n")
	for _, tc := range []struct{ path, status, line string }{
		{"http:t/acme", "400", ""},
		{"foo:%2Ft%2Facme", "400", ""},
		{"/t/acme", "200", "GET /t/acme HTTP/1.1"},
	} {
		status, body := h2Path(t, gw.url, p, tc.path)
		got := taken()
		if status != tc.status || tc.status == "400" && !strings.HasPrefix(body, `{"error":"bad_target"`) {
			t.Errorf("%q: %s %q, want %s", tc.path, status, body, tc.status)
		}
		wantLine(t, tc.path, got, tc.line)
	}
}
