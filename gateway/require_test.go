package gateway_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// With tenant.require, a request that names no tenant is refused instead
// of served as the default tenant, in every tenant source: 401 with a
// Bearer challenge and no error code (RFC 6750 3.1) with bearer, whatever
// other credentials it carries, and 400 missing_tenant with header (a
// client outside trusted_proxies names none), host and path; each is
// counted in rejected_total{reason="missing-tenant"}. A reload switches it
// off, serving such requests as the default tenant again, and on.
func TestRequireTenant(t *testing.T) {
	secret, file := hmacSecretFile(t)
	token := func(tenant string) string {
		return hs256(secret, map[string]any{"tenant": tenant, "exp": time.Now().Add(time.Hour).Unix()})
	}
	header := func(k, v string) func(*http.Request) { return func(r *http.Request) { r.Header.Set(k, v) } }
	for _, tc := range []struct {
		name   string
		tenant string // the tenant mapping's keys but require
		path   string // requested, unless a request sets its own
		named  func(*http.Request)
		none   map[string]func(*http.Request) // requests naming no tenant
		status int
	}{
		{"header", "from: header", "/", header("X-Tenant", "acme"),
			map[string]func(*http.Request){"no header": func(*http.Request) {}, "empty header": header("X-Tenant", " ")}, 400},
		{"untrusted peer", "from: header, trusted_proxies: [10.0.0.0/8]", "/",
			func(r *http.Request) { r.RemoteAddr = "10.0.0.7:1234"; r.Header.Set("X-Tenant", "acme") },
			map[string]func(*http.Request){"naming acme": header("X-Tenant", "acme")}, 400},
		{"host", "from: host", "/", func(r *http.Request) { r.Host = "acme" },
			map[string]func(*http.Request){"no host": func(r *http.Request) { r.Host = "" }}, 400},
		{"path", "from: path, path_prefix: /t/", "/t/acme/x", func(*http.Request) {},
			map[string]func(*http.Request){"outside the prefix": func(r *http.Request) { r.URL.Path, r.RequestURI = "/x", "/x" }}, 400},
		{"bearer", "from: bearer, bearer: {hmac_secret_file: " + file + ", claim: tenant}", "/",
			header("Authorization", "Bearer "+token("acme")),
			map[string]func(*http.Request){
				"no credentials":  func(*http.Request) {},
				"basic":           header("Authorization", "Basic YTpi"),
				"session cookie":  header("Cookie", "session=acme-session"),
				"x-auth-token":    header("X-Auth-Token", "acme-key"),
				"empty auth":      header("Authorization", ""),
				"another scheme":  header("Authorization", "Digest username=acme"),
				"bearer in other": header("X-Authorization", "Bearer "+token("acme")),
			}, 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gw, write := reloadable(t, tenantEcho(t), "backends: [%s]\ntenant: {"+tc.tenant+", require: true}\n")
			serve := func(prepare func(*http.Request)) *httptest.ResponseRecorder {
				r := httptest.NewRequest(http.MethodGet, tc.path, nil)
				prepare(r)
				w := httptest.NewRecorder()
				gw.gw.ServeHTTP(w, r)
				return w
			}
			refused := 0
			expectRefused := func(name string, prepare func(*http.Request)) {
				t.Helper()
				w := serve(prepare)
				refused++
				code, _, _ := refusal(t, w.Body.String())
				if w.Code != tc.status || code != "missing_tenant" {
					t.Errorf("%s: %d %q, want %d missing_tenant", name, w.Code, w.Body, tc.status)
				}
				challenge := w.Header().Values("WWW-Authenticate")
				if tc.status == 401 && (len(challenge) != 1 || challenge[0] != "Bearer") {
					t.Errorf("%s: challenged with %q, want Bearer without an error code", name, challenge)
				}
				if tc.status != 401 && len(challenge) != 0 {
					t.Errorf("%s: challenged with %q, want none", name, challenge)
				}
			}
			if w := serve(tc.named); w.Code != 200 || w.Body.String() != "acme" {
				t.Errorf("naming acme: %d, the backend was told %q", w.Code, w.Body)
			}
			for name, prepare := range tc.none {
				expectRefused(name, prepare)
			}

			write("backends: [%s]\ntenant: {" + tc.tenant + "}\n")
			if err := gw.gw.ReloadFile(); err != nil {
				t.Fatal(err)
			}
			for name, prepare := range tc.none {
				if w := serve(prepare); w.Code != 200 || w.Body.String() != "anonymous" {
					t.Errorf("%s, require reloaded off: %d, the backend was told %q; want the default tenant", name, w.Code, w.Body)
				}
			}

			write("backends: [%s]\ntenant: {" + tc.tenant + ", require: true}\n")
			if err := gw.gw.ReloadFile(); err != nil {
				t.Fatal(err)
			}
			for name, prepare := range tc.none {
				expectRefused(name+", require reloaded on", prepare)
			}
			if w := serve(tc.named); w.Code != 200 || w.Body.String() != "acme" {
				t.Errorf("naming acme, require reloaded on: %d, the backend was told %q", w.Code, w.Body)
			}
			if got := metric(t, gw.gw.Metrics(), "rejected_total", "reason", "missing-tenant"); got != float64(refused) {
				t.Errorf("rejected_total{reason=missing-tenant} = %v, want %d", got, refused)
			}
		})
	}
}

// With tenant.from client_cert, tenant.require changes nothing: a request
// without a verified certificate is refused 401 unauthenticated already,
// without a challenge, and is not counted as missing its tenant.
func TestRequireTenantClientCert(t *testing.T) {
	p := newPKI(t)
	gw := start(t, tenantEcho(t), minimal+fmt.Sprintf("tls: {cert_file: %s, key_file: %s, client_ca_file: %s}\ntenant: {from: client_cert, require: true}\n",
		p.certFile, p.keyFile, p.caFile))
	w := httptest.NewRecorder()
	gw.gw.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil)) // no TLS, so no certificate
	if code, _, _ := refusal(t, w.Body.String()); w.Code != 401 || code != "unauthenticated" || len(w.Header().Values("WWW-Authenticate")) != 0 {
		t.Errorf("no certificate: %d %q, challenge %q; want 401 unauthenticated without one", w.Code, w.Body, w.Header().Values("WWW-Authenticate"))
	}
	if got := metric(t, gw.gw.Metrics(), "rejected_total", "reason", "missing-tenant"); got != 0 {
		t.Errorf("rejected_total{reason=missing-tenant} = %v, want 0", got)
	}
}
