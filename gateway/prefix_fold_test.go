package gateway_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/groupexec/groupexec/gateway"
	"github.com/groupexec/groupexec/gateway/config"
)

// A path whose tenant prefix is written with a character that Unicode
// case folding takes for one of its letters, though longer in bytes (the
// Kelvin sign K, U+212A, for k; the long s ſ, U+017F, for s), is refused
// with ErrInvalidTenant when the path so read names a tenant, as one in
// another ASCII case is: it names none as sent, and was served as the
// default tenant, while a backend folding Unicode case (Go's
// strings.EqualFold, .NET's OrdinalIgnoreCase for ſ) serves acme's path.
// The character is read escaped, as clients send it, and raw, as
// net/http takes it; in a PHP script's PATH_INFO too. A folded prefix
// naming no tenant, and a path that only resembles it, are served as
// before.
func TestExtractTenantPrefixFoldedFromUnicode(t *testing.T) {
	for _, tc := range []struct {
		prefix, url string
		want        string // "": no tenant; "!": ErrInvalidTenant
	}{
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

// Through the gateway: "/%C5%BF/acme/x" for path_prefix /s is refused 400
// invalid_tenant and never reaches the backend.
func TestPrefixFoldedFromUnicodeNotProxied(t *testing.T) {
	gw := start(t, tenantEcho(t), minimal+"tenant: {from: path, path_prefix: /s}\ntenants: {acme: {}}\n")
	c := client(t)
	resp, body := do(t, c, http.MethodGet, gw.url+"/%C5%BF/acme/x", "", nil)
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("/%%C5%%BF/acme/x: %d %q, want 400 invalid_tenant", resp.StatusCode, body)
	}
	if code, _, _ := refusal(t, body); code != "invalid_tenant" {
		t.Errorf("/%%C5%%BF/acme/x: 400 %q, want invalid_tenant", body)
	}
}
