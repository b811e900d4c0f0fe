package httpadmit_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/httpadmit"
	"github.com/groupexec/groupexec/policy"
)

type tenantKey struct{}

// Each tenant source sends a request to its group, the default group when the
// request names none, and answers 400 when the key is invalid.
func TestTenantSources(t *testing.T) {
	long := strings.Repeat("t", httpadmit.MaxTenantLen+1)
	header := func(vs ...string) func(*http.Request) {
		return func(r *http.Request) { r.Header["X-Tenant"] = vs }
	}
	for _, tc := range []struct {
		name   string
		opts   []httpadmit.Option
		target string
		prep   func(*http.Request)
		group  string // "" for 400
	}{
		{"header", nil, "/", header("acme"), "acme"},
		{"header trimmed", nil, "/", header(" acme\t"), "acme"},
		{"no header", nil, "/", nil, httpadmit.DefaultGroup},
		{"empty header", nil, "/", header(""), ""},
		{"blank header", nil, "/", header("  "), ""},
		{"header twice", nil, "/", header("a", "b"), ""},
		{"control character", nil, "/", header("a\x01b"), ""},
		{"space inside", nil, "/", header("a b"), ""},
		{"not ASCII", nil, "/", header("café"), ""},
		{"too long", nil, "/", header(long), ""},
		{"longest", nil, "/", header(long[1:]), long[1:]},
		{"other header", []httpadmit.Option{httpadmit.WithTenantHeader("x-org")}, "/",
			func(r *http.Request) { r.Header.Set("X-Org", "org1"); r.Header.Set("X-Tenant", "no") }, "org1"},
		{"default group", []httpadmit.Option{httpadmit.WithDefaultGroup("anon")}, "/", nil, "anon"},
		{"host", []httpadmit.Option{httpadmit.WithTenantHost()}, "http://API.Example.com:8080/x", nil, "api.example.com"},
		{"host ipv6", []httpadmit.Option{httpadmit.WithTenantHost()}, "http://[::1]:8080/x", nil, "::1"},
		{"host trailing dot", []httpadmit.Option{httpadmit.WithTenantHost()}, "http://API.Example.com.:8080/x", nil, "api.example.com"},
		{"host trailing dot, no port", []httpadmit.Option{httpadmit.WithTenantHost()}, "http://api.example.com./x", nil, "api.example.com"},
		{"host trailing dots", []httpadmit.Option{httpadmit.WithTenantHost()}, "http://api.example.com..:8080/x", nil, "api.example.com"},
		{"host trailing dots, no port", []httpadmit.Option{httpadmit.WithTenantHost()}, "http://api.example.com.../x", nil, "api.example.com"},
		{"host ipv6 spelled out", []httpadmit.Option{httpadmit.WithTenantHost()}, "http://[0:0:0:0:0:0:0:1]:8080/x", nil, "::1"},
		{"host ipv6 upper case, no port", []httpadmit.Option{httpadmit.WithTenantHost()}, "http://[2001:DB8::0001]/x", nil, "2001:db8::1"},
		{"host ipv4-mapped ipv6", []httpadmit.Option{httpadmit.WithTenantHost()}, "http://[::ffff:192.0.2.1]:8080/x", nil, "192.0.2.1"},
		{"host ipv4-mapped ipv6 in hex", []httpadmit.Option{httpadmit.WithTenantHost()}, "http://[::FFFF:c000:201]/x", nil, "192.0.2.1"},
		{"host ipv4", []httpadmit.Option{httpadmit.WithTenantHost()}, "http://192.0.2.1:8080/x", nil, "192.0.2.1"},
		{"no host", []httpadmit.Option{httpadmit.WithTenantHost()}, "/", func(r *http.Request) { r.Host = "" }, httpadmit.DefaultGroup},
		// A port that is not a number hides another host from the tenant:
		// a proxy in next passes the Host whole in X-Forwarded-Host, and a
		// backend taking the last host of a list there (Rails, Werkzeug's
		// ProxyFix) serves victim.example under acme.example's limits.
		{"host port not a number", []httpadmit.Option{httpadmit.WithTenantHost()}, "/",
			func(r *http.Request) { r.Host = "acme.example:1,victim.example" }, ""},
		{"host port a name", []httpadmit.Option{httpadmit.WithTenantHost()}, "/",
			func(r *http.Request) { r.Host = "acme.example:victim.example" }, ""},
		{"host ipv6 port not a number", []httpadmit.Option{httpadmit.WithTenantHost()}, "/",
			func(r *http.Request) { r.Host = "[::1]:1,victim.example" }, ""},
		{"host empty port", []httpadmit.Option{httpadmit.WithTenantHost()}, "/",
			func(r *http.Request) { r.Host = "acme.example:" }, "acme.example"},
		// A colon is no part of a name: "acme.example:1:2", which net/http
		// takes, is acme.example to a backend that reads the host up to
		// its first colon, and each such spelling would be a group of its
		// own, with acme.example's limits.
		{"host two ports", []httpadmit.Option{httpadmit.WithTenantHost()}, "/",
			func(r *http.Request) { r.Host = "acme.example:1:2" }, ""},
		{"host name with a colon in brackets", []httpadmit.Option{httpadmit.WithTenantHost()}, "/",
			func(r *http.Request) { r.Host = "[acme.example:1]:80" }, ""},
		{"host ipv6 without brackets", []httpadmit.Option{httpadmit.WithTenantHost()}, "/",
			func(r *http.Request) { r.Host = "::1" }, "::1"},
		{"host ipv6 in brackets, no port", []httpadmit.Option{httpadmit.WithTenantHost()}, "/",
			func(r *http.Request) { r.Host = "[::1]" }, "::1"},
		{"path segment", []httpadmit.Option{httpadmit.WithTenantPathSegment(1)}, "/t/acme/orders", nil, "acme"},
		{"path segment 0", []httpadmit.Option{httpadmit.WithTenantPathSegment(0)}, "/acme", nil, "acme"},
		{"path too short", []httpadmit.Option{httpadmit.WithTenantPathSegment(1)}, "/t", nil, httpadmit.DefaultGroup},
		{"path segment empty", []httpadmit.Option{httpadmit.WithTenantPathSegment(1)}, "/t//x", nil, httpadmit.DefaultGroup},
		{"path segment decoded", []httpadmit.Option{httpadmit.WithTenantPathSegment(1)}, "/t/a%20b/x", nil, ""},
		{"context", []httpadmit.Option{httpadmit.WithTenantContextValue(tenantKey{})}, "/",
			func(r *http.Request) { *r = *r.WithContext(context.WithValue(r.Context(), tenantKey{}, "ctx1")) }, "ctx1"},
		{"context absent", []httpadmit.Option{httpadmit.WithTenantContextValue(tenantKey{})}, "/", nil, httpadmit.DefaultGroup},
		{"context not a string", []httpadmit.Option{httpadmit.WithTenantContextValue(tenantKey{})}, "/",
			func(r *http.Request) { *r = *r.WithContext(context.WithValue(r.Context(), tenantKey{}, 7)) }, ""},
		{"func", []httpadmit.Option{httpadmit.WithTenantFunc(func(r *http.Request) (string, error) {
			if r.URL.Query().Get("t") == "bad" {
				return "", errors.New("unknown tenant")
			}
			return r.URL.Query().Get("t"), nil
		})}, "/?t=f1", nil, "f1"},
		{"func error", []httpadmit.Option{httpadmit.WithTenantFunc(func(r *http.Request) (string, error) {
			return "", errors.New("unknown tenant")
		})}, "/", nil, ""},
		{"func invalid key", []httpadmit.Option{httpadmit.WithTenantFunc(func(r *http.Request) (string, error) {
			return "a\nb", nil
		})}, "/", nil, ""},
		{"last tenant option wins", []httpadmit.Option{httpadmit.WithTenantHost(), httpadmit.WithTenantPathSegment(0)}, "/p1", nil, "p1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := newEvents()
			ex := newExec(t, nil, ev.listener())
			h := httpadmit.Handler(ex, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), tc.opts...)
			r := httptest.NewRequest(http.MethodGet, tc.target, nil)
			if tc.prep != nil {
				tc.prep(r)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if tc.group == "" {
				if w.Code != http.StatusBadRequest || w.Header().Get("Retry-After") != "" {
					t.Fatalf("status %d Retry-After %q, want 400 without", w.Code, w.Header().Get("Retry-After"))
				}
				if s := ex.Stats(); s.Submitted != 0 {
					t.Errorf("an invalid request reached the executor: %+v", s.TaskCounts)
				}
				return
			}
			if w.Code != http.StatusOK {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}
			if e := next(t, ev.started); e.Group != tc.group {
				t.Errorf("group %q, want %q", e.Group, tc.group)
			}
		})
	}
}

// The tenant WithTenantPathSegment admits a request under is the one an
// http.ServeMux route wrapped by Handler names: the mux splits the path as
// sent and decodes each segment, so "/t/ac%2Fme/x" is tenant "ac/me" to
// "/t/{tenant}/x", where the decoded path "/t/ac/me/x" would have been
// admitted as tenant "ac". A path with an escaped slash in or before the
// tenant's segment, which the two readings split otherwise, is refused 400
// and reaches no handler; one after it, or any other escape, is served.
func TestTenantPathSegmentAgreesWithMux(t *testing.T) {
	for _, tc := range []struct {
		pattern, target string
		group           string // "" for 400
	}{
		{"GET /t/{tenant}/x", "/t/acme/x", "acme"},
		{"GET /t/{tenant}/x", "/t/%61cme/x", "acme"},
		{"GET /t/{tenant}/x", "/t/ac%2Fme/x", ""},
		{"GET /t/{tenant}/x", "/t/ac%2fme/x", ""},
		{"GET /t/{tenant}/{rest...}", "/t/ac%2Fme/x", ""},
		{"GET /{p}/{tenant}/x", "/a%2Fb/acme/x", ""},
		{"GET /{p}/{tenant}/x", "/%2F/acme/x", ""},
		{"GET /t/{tenant}/{rest...}", "/t/acme/a%2Fb", "acme"},
		{"GET /t/{tenant}/{rest...}", "/t/acme/a%2Fb/c", "acme"},
	} {
		t.Run(tc.pattern+" "+tc.target, func(t *testing.T) {
			ev := newEvents()
			ex := newExec(t, nil, ev.listener())
			var routed string
			mux := http.NewServeMux()
			mux.HandleFunc(tc.pattern, func(w http.ResponseWriter, r *http.Request) { routed = r.PathValue("tenant") })
			h := httpadmit.Handler(ex, mux, httpadmit.WithTenantPathSegment(1))
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, tc.target, nil))
			if tc.group == "" {
				if w.Code != http.StatusBadRequest || routed != "" {
					var admitted string
					select {
					case e := <-ev.started:
						admitted = e.Group
					default:
					}
					t.Fatalf("status %d, admitted as %q, routed as %q; want 400, not routed", w.Code, admitted, routed)
				}
				return
			}
			if w.Code != http.StatusOK {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}
			if e := next(t, ev.started); e.Group != tc.group || routed != tc.group {
				t.Errorf("admitted as %q, routed as %q; want %q", e.Group, routed, tc.group)
			}
		})
	}
}

func TestValidTenant(t *testing.T) {
	for s, want := range map[string]bool{
		"a": true, "acme-1.eu:prod_2": true, "user@example.com": true, "~!": true,
		"": false, " a": false, "a\x7f": false, "ä": false, strings.Repeat("x", 129): false,
	} {
		if got := httpadmit.ValidTenant(s); got != want {
			t.Errorf("ValidTenant(%q) = %v", s, got)
		}
	}
}

// Invalid options panic at construction with the option's name and value.
func TestInvalidOptionsPanic(t *testing.T) {
	ex := newExec(t, nil)
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	for _, tc := range []struct {
		opt  httpadmit.Option
		want string
	}{
		{httpadmit.WithTenantHeader(""), `WithTenantHeader("")`},
		{httpadmit.WithTenantHeader("X Tenant"), `WithTenantHeader("X Tenant")`},
		{httpadmit.WithTenantHeader("X-Tenant:"), `WithTenantHeader("X-Tenant:")`},
		{httpadmit.WithTenantHeader("host"), `WithTenantHeader("host")`},
		{httpadmit.WithTenantHeader("Transfer-Encoding"), `WithTenantHeader("Transfer-Encoding")`},
		{httpadmit.WithTenantPathSegment(-1), "WithTenantPathSegment(-1)"},
		{httpadmit.WithTenantContextValue(nil), "WithTenantContextValue(nil)"},
		{httpadmit.WithTenantContextValue([]int{1}), "WithTenantContextValue([]int)"},
		// A comparable type holding an uncomparable value: every lookup
		// that meets the middleware's key of the same type would panic.
		{httpadmit.WithTenantContextValue(struct{ k any }{[]int{1}}), "WithTenantContextValue(struct { k interface {} })"},
		{httpadmit.WithTenantFunc(nil), "WithTenantFunc(nil)"},
		{httpadmit.WithDefaultGroup("a b"), `WithDefaultGroup("a b")`},
		{httpadmit.WithRetryAfter(0), "WithRetryAfter(0s)"},
		{httpadmit.WithRefusalWriter(nil), "WithRefusalWriter(nil)"},
		{httpadmit.WithFailureStatus(nil), "WithFailureStatus(nil)"},
		{httpadmit.WithWeightFunc(nil), "WithWeightFunc(nil)"},
		{nil, "nil Option"},
	} {
		for side, build := range map[string]func(){
			"Handler":   func() { httpadmit.Handler(ex, ok, tc.opt) },
			"Transport": func() { httpadmit.Transport(ex, nil, tc.opt) },
		} {
			func() {
				defer func() {
					if v, _ := recover().(string); !strings.Contains(v, tc.want) {
						t.Errorf("%s: panic %q, want it to name %s", side, v, tc.want)
					}
				}()
				build()
			}()
		}
	}
}

// A refusal writer answers every request next does not serve.
func TestRefusalWriter(t *testing.T) {
	ex := newExec(t, nil)
	var got error
	h := httpadmit.Handler(ex, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}),
		httpadmit.WithRefusalWriter(func(w http.ResponseWriter, r *http.Request, err error) {
			got = err
			w.WriteHeader(http.StatusTeapot)
		}))
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("X-Tenant", "a b")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusTeapot || !errors.Is(got, httpadmit.ErrInvalidTenant) || httpadmit.RefusalStatus(got) != http.StatusBadRequest {
		t.Errorf("status %d, err %v", w.Code, got)
	}
}

func TestRefusalStatus(t *testing.T) {
	for err, want := range map[error]int{
		context.Canceled:         http.StatusServiceUnavailable,
		context.DeadlineExceeded: http.StatusServiceUnavailable,
		errors.New("other"):      http.StatusInternalServerError,
		&executor.RejectedError{Limit: executor.LimitResolver}:                              http.StatusInternalServerError,
		&executor.RejectedError{Limit: executor.LimitInvalid, Err: executor.ErrInvalidTask}: http.StatusInternalServerError,
	} {
		if got := httpadmit.RefusalStatus(err); got != want {
			t.Errorf("RefusalStatus(%v) = %d, want %d", err, got, want)
		}
	}
}

// A request refused because a limit resolver gave an invalid value is the
// server's misconfiguration: 500, without Retry-After, since a retry meets
// the same limits.
func TestInvalidLimitIs500(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithMaxConcurrencyResolver(func(group string) (int, bool) {
		return 0, group == "bad"
	})})
	h := httpadmit.Handler(ex, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for tenant, want := range map[string]int{"bad": http.StatusInternalServerError, "good": http.StatusOK} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("X-Tenant", tenant)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != want || w.Header().Get("Retry-After") != "" {
			t.Errorf("tenant %s: %d, Retry-After %q; want %d without", tenant, w.Code, w.Header().Get("Retry-After"), want)
		}
	}
}
