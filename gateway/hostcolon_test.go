package gateway_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/groupexec/groupexec/gateway"
	"github.com/groupexec/groupexec/gateway/config"
)

// With tenant.from host, a Host with more than one colon that is no IPv6
// address ("acme.example:1:2") is an invalid key (400): it was a tenant of
// its own, with the default limits, while a backend taking the host as
// what comes before the first colon (Express's req.hostname, from the
// X-Forwarded-Host the gateway sends) served acme.example. An IPv6
// address, bracketed or not, is still its canonical form.
func TestExtractTenantHostWithColons(t *testing.T) {
	host := config.Tenant{From: config.FromHost, Header: "X-Tenant"}
	for _, tc := range []struct {
		host string
		want string // "!": ErrInvalidTenant
	}{
		{"acme.example:1:2", "!"},
		{"acme.example::80", "!"},
		{"acme.example:80:", "!"},
		{"127.0.0.1:1:2", "!"},
		{"acme.example:80", "acme.example"},
		{"acme.example:", "acme.example"},
		{"[::1]:80", "0::1"},
		{"::1", "0::1"},
		{"2001:db8::1", "2001:db8::1"},
	} {
		r := httptest.NewRequest(http.MethodGet, "http://h/x", nil)
		r.Host = tc.host
		got, err := gateway.ExtractTenant(&host, r)
		switch {
		case tc.want == "!" && !errors.Is(err, gateway.ErrInvalidTenant):
			t.Errorf("Host %q: %q, %v; want ErrInvalidTenant", tc.host, got, err)
		case tc.want != "!" && (err != nil || got != tc.want):
			t.Errorf("Host %q: %q, %v; want %q", tc.host, got, err, tc.want)
		}
	}
}

// Through the gateway, over HTTP/1.1: such a Host is refused 400
// invalid_tenant and never reaches the backend.
func TestHostWithColonsNotProxied(t *testing.T) {
	gw := start(t, tenantEcho(t), minimal+"tenant: {from: host}\ntenants: {acme.example: {}}\n")
	req, _ := http.NewRequest(http.MethodGet, gw.url+"/x", nil)
	req.Host = "acme.example:1:2"
	resp, err := client(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("Host acme.example:1:2: %d, want 400", resp.StatusCode)
	}
}
