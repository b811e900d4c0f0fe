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
// that is a path). A path whose prefix, in any case, names no tenant is
// served as before.
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

// Through the gateway: "/T/acme/x" is refused 400 invalid_tenant and never
// reaches the backend, which would serve it as acme's path while the
// gateway admitted it as the default tenant.
func TestPrefixInAnotherCaseNotProxied(t *testing.T) {
	gw := start(t, tenantEcho(t), minimal+"tenant: {from: path, path_prefix: /t}\ntenants: {acme: {}}\n")
	c := client(t)
	resp, body := do(t, c, http.MethodGet, gw.url+"/T/acme/x", "", nil)
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("/T/acme/x: %d %q, want 400 invalid_tenant", resp.StatusCode, body)
	}
	if code, _, _ := refusal(t, body); code != "invalid_tenant" {
		t.Errorf("/T/acme/x: 400 %q, want invalid_tenant", body)
	}
	if resp, body := do(t, c, http.MethodGet, gw.url+"/t/acme/x", "", nil); resp.StatusCode != 200 || body != "acme" {
		t.Errorf("/t/acme/x: %d, the backend was told %q; want 200 acme", resp.StatusCode, body)
	}
}
