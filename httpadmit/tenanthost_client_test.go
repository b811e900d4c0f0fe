package httpadmit_test

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/httpadmit"
)

// A Transport grouping by the outgoing request's Host (WithTenantHost)
// reads the Host net/http sends: URL.Host when the request's Host is empty,
// as httputil.ReverseProxy's Rewrite leaves it after SetURL. Read as no
// tenant, every host the proxy sends to shared the default group.
func TestTransportTenantHostOfARequestWithoutHost(t *testing.T) {
	ex := newExec(t, nil)
	var group string
	rt := httpadmit.Transport(ex, groupOf(&group), httpadmit.WithTenantHost())
	req, err := http.NewRequest(http.MethodGet, "http://API.Example.com:8080/x", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "" // net/http sends URL.Host
	if _, err := rt.RoundTrip(req); err != nil {
		t.Fatal(err)
	}
	if group != "api.example.com" {
		t.Errorf("group %q, want %q, the host net/http sends", group, "api.example.com")
	}

	target, _ := url.Parse("http://backend.example:9000")
	proxy := &httputil.ReverseProxy{
		Rewrite:   func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport: rt,
	}
	group = ""
	proxy.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "http://front.example/y", nil))
	if group != "backend.example" {
		t.Errorf("a ReverseProxy's request after SetURL: group %q, want %q", group, "backend.example")
	}
}

// A server's request without a Host (HTTP/1.0, whose URL has no host
// either) still names no tenant.
func TestHandlerTenantHostOfARequestWithoutHost(t *testing.T) {
	ex := newExec(t, nil)
	var group string
	h := httpadmit.Handler(ex, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		group, _ = executor.GroupFromContext(r.Context())
	}), httpadmit.WithTenantHost(), httpadmit.WithDefaultGroup("nohost"))
	req := httptest.NewRequest(http.MethodGet, "/x", nil)
	req.Host = ""
	h.ServeHTTP(httptest.NewRecorder(), req)
	if group != "nohost" {
		t.Errorf("group %q, want the default group", group)
	}
}
