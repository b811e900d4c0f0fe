package gateway_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/groupexec/groupexec/gateway"
	"github.com/groupexec/groupexec/gateway/config"
)

// A path whose tenant prefix is written in another case ("/T/acme" for
// path_prefix "/t") is refused with ErrInvalidTenant (400) when the path
// so read names a tenant: it names none as sent, but a backend matching
// paths without regard to case (Express and ASP.NET Core by default, IIS)
// serves acme's path, under the default tenant's limits. So is such a
// prefix in the other readings (escaped, after a PHP script, in a query
// that is a path). So is a prefix written with a character that Unicode
// case folding takes for one of its letters, though longer in bytes (the
// Kelvin sign K, U+212A, for k; the long s ſ, U+017F, for s), which a
// backend folding Unicode case (Go's strings.EqualFold, .NET's
// OrdinalIgnoreCase for ſ) reads as the prefix; it is read escaped, as
// clients send it, and raw, as net/http takes it. A path whose prefix, in
// any case, names no tenant, and one that only resembles it, are served as
// before.
func TestExtractTenantPrefixInAnotherCase(t *testing.T) {
	for _, tc := range []struct {
		prefix, url string
		want        string // "": no tenant; "!": ErrInvalidTenant
	}{
		{"/t", "http://h/T/acme/x", "!"},
		{"/t", "http://h/T/acme", "!"},
		{"/t/", "http://h/T/acme", "!"},
		{"/api/t", "http://h/API/t/acme/x", "!"},
		{"/api/t", "http://h/Api/T/acme", "!"},
		{"/t", "http://h/%54/acme", "!"},
		{"/t", "http://h/index.php/T/victim/x", "!"},
		{"/t", "http://h/t/acme/index.php/T/victim/x", "!"},
		{"/t", "http://h/?/T/victim/x", "!"},
		{"/t", "http://h/t/acme/x", "acme"},
		{"/t", "http://h/t/acme/index.php/T/acme/x", "acme"},
		{"/t", "http://h/T", ""},
		{"/t", "http://h/T/", ""},
		{"/t", "http://h/Tacme/x", ""},
		{"/t", "http://h/x/T/acme", ""},
		{"/k", "http://h/%E2%84%AA/acme/x", "!"},
		{"/k", "http://h/\u212A/acme/x", "!"},
		{"/s", "http://h/%C5%BF/acme/x", "!"},
		{"/api/ks", "http://h/api/%E2%84%AA%C5%BF/acme/x", "!"},
		{"/api/ks", "http://h/API/k%C5%BF/acme", "!"},
		{"/k", "http://h/index.php/%E2%84%AA/victim/x", "!"},
		{"/k", "http://h/k/acme/index.php/%E2%84%AA/victim/x", "!"},
		{"/s", "http://h/?/%C5%BF/victim/x", "!"},
		{"/k", "http://h/k/acme/x", "acme"},
		{"/k", "http://h/%E2%84%AA", ""},
		{"/k", "http://h/%E2%84%AA/", ""},
		{"/k", "http://h/%E2%84%AAacme/x", ""},
		{"/k", "http://h/%E2%84%A9/acme/x", ""}, // ℩ (U+2129), beside the Kelvin sign: no k
		{"/k", "http://h/x/%E2%84%AA/acme", ""},
	} {
		cfg := config.Tenant{From: config.FromPath, Header: "X-Tenant", PathPrefix: tc.prefix}
		r := httptest.NewRequest(http.MethodGet, tc.url, nil)
		got, err := gateway.ExtractTenant(&cfg, r)
		switch {
		case tc.want == "!" && !errors.Is(err, gateway.ErrInvalidTenant):
			t.Errorf("prefix %q, %s: %q, %v; want ErrInvalidTenant", tc.prefix, tc.url, got, err)
		case tc.want != "!" && (err != nil || got != tc.want):
			t.Errorf("prefix %q, %s: %q, %v; want %q", tc.prefix, tc.url, got, err, tc.want)
		}
	}
}

// Through the gateway: "/T/acme/x" for path_prefix /t, and
// "/%C5%BF/acme/x" for /s, are refused 400 invalid_tenant and never reach
// the backend, which would serve them as acme's path while the gateway
// admitted them as the default tenant.
func TestPrefixInAnotherCaseNotProxied(t *testing.T) {
	for _, tc := range []struct{ prefix, refused string }{
		{"/t", "/T/acme/x"},
		{"/s", "/%C5%BF/acme/x"},
	} {
		gw := start(t, tenantEcho(t), minimal+"tenant: {from: path, path_prefix: "+tc.prefix+"}\ntenants: {acme: {}}\n")
		c := client(t)
		resp, body := do(t, c, http.MethodGet, gw.url+tc.refused, "", nil)
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("%s: %d %q, want 400 invalid_tenant", tc.refused, resp.StatusCode, body)
		}
		if code, _, _ := refusal(t, body); code != "invalid_tenant" {
			t.Errorf("%s: 400 %q, want invalid_tenant", tc.refused, body)
		}
		if resp, body := do(t, c, http.MethodGet, gw.url+tc.prefix+"/acme/x", "", nil); resp.StatusCode != 200 || body != "acme" {
			t.Errorf("%s/acme/x: %d, the backend was told %q; want 200 acme", tc.prefix, resp.StatusCode, body)
		}
	}
}
