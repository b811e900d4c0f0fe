package httpadmit_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/groupexec/groupexec/httpadmit"
)

// Handler reads no query parameter and no form field: a client that puts
// a tenant (or a method override, or a token) there does not choose its
// group, and the body is still unread, its form unparsed, when next runs,
// so that a request waiting for admission has read nothing of its body.
func TestTenantNotFromQueryOrForm(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opt    httpadmit.Option
		target string
		header string
		want   string
	}{
		{"header", nil, "/t/acme/x", "acme", "acme"},
		{"no header", nil, "/t/acme/x", "", httpadmit.DefaultGroup},
		{"path segment", httpadmit.WithTenantPathSegment(1), "/t/acme/x", "", "acme"},
		{"host", httpadmit.WithTenantHost(), "/t/acme/x", "", "example.com"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := newEvents()
			ex := newExec(t, nil, ev.listener())
			const form = "X-Tenant=globex&tenant=globex&_method=DELETE&access_token=globex"
			var body string
			var parsed bool
			next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				parsed = r.Form != nil || r.PostForm != nil
				b, _ := io.ReadAll(r.Body)
				body = string(b)
			})
			var opts []httpadmit.Option
			if tc.opt != nil {
				opts = append(opts, tc.opt)
			}
			r := httptest.NewRequest(http.MethodPost, tc.target+"?"+form, strings.NewReader(form))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			if tc.header != "" {
				r.Header.Set("X-Tenant", tc.header)
			}
			httpadmit.Handler(ex, next, opts...).ServeHTTP(httptest.NewRecorder(), r)
			if g := startedGroup(t, ev); g != tc.want {
				t.Errorf("admitted as %q, want %q", g, tc.want)
			}
			if parsed || body != form {
				t.Errorf("next saw the form parsed %v and the body %q; want unparsed, and all of it", parsed, body)
			}
		})
	}
}

// WithTenantPathSegment reads the path as sent, dot segments and repeated
// slashes uncleaned, and http.ServeMux serves no such path: it redirects
// to the clean one, so no route is served admitted as a tenant other than
// its own.
func TestTenantPathSegmentUncleanPathIsNotRouted(t *testing.T) {
	for _, tc := range []struct{ target, admitted string }{
		{"/t/acme/../globex/x", "acme"},
		{"/t/./globex/x", "."},
		{"/t//globex/x", httpadmit.DefaultGroup},
		{"/t/acme/%2e%2e/globex/x", "acme"},
	} {
		t.Run(tc.target, func(t *testing.T) {
			ev := newEvents()
			ex := newExec(t, nil, ev.listener())
			routed := false
			mux := http.NewServeMux()
			mux.HandleFunc("/t/{tenant}/x", func(http.ResponseWriter, *http.Request) { routed = true })
			w := httptest.NewRecorder()
			httpadmit.Handler(ex, mux, httpadmit.WithTenantPathSegment(1)).
				ServeHTTP(w, httptest.NewRequest(http.MethodGet, tc.target, nil))
			if g := startedGroup(t, ev); g != tc.admitted || routed || w.Code == http.StatusOK {
				t.Errorf("admitted as %q, status %d, routed %v; want %q and not routed", g, w.Code, routed, tc.admitted)
			}
		})
	}
}

// startedGroup is the group of the next request started.
func startedGroup(t *testing.T, ev *events) string {
	t.Helper()
	return next(t, ev.started).Group
}

// The tenant header is read under its one name: a client that adds it
// spelled with an underscore ("X_Tenant", which a CGI reader takes for the
// same variable) does not choose the group, and next sees both, as the
// doc of WithTenantHeader says, to set the one its backend reads.
func TestTenantHeaderUnderscoreSpellingIsAnotherHeader(t *testing.T) {
	ev := newEvents()
	ex := newExec(t, nil, ev.listener())
	var seen http.Header
	h := httpadmit.Handler(ex, http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { seen = r.Header.Clone() }))
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("X-Tenant", "acme")
	r.Header.Set("X_Tenant", "globex")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if g := startedGroup(t, ev); g != "acme" || w.Code != http.StatusOK {
		t.Fatalf("status %d, admitted as %q; want 200 and acme", w.Code, g)
	}
	if seen.Get("X-Tenant") != "acme" || seen.Get("X_Tenant") != "globex" {
		t.Errorf("next saw X-Tenant %q and X_Tenant %q; want both as sent", seen.Get("X-Tenant"), seen.Get("X_Tenant"))
	}
}
