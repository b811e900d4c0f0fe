package httpadmit_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/httpadmit"
)

// The handler Handler runs learns the group its request was admitted under
// from the request's context, whatever named it (a tenant header, the
// default group, a tenant function), and whatever the request's context:
// context.Background, as httptest gives, or one that can end, as a
// server's can.
func TestHandlerGivesNextTheGroup(t *testing.T) {
	ex := newExec(t, nil)
	var got string
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g, ok := executor.GroupFromContext(r.Context())
		if !ok {
			g = "<none>"
		}
		got = g
	})
	for _, tc := range []struct {
		name   string
		h      http.Handler
		tenant string
		want   string
	}{
		{"header", httpadmit.Handler(ex, next), "acme", "acme"},
		{"default group", httpadmit.Handler(ex, next, httpadmit.WithDefaultGroup("anon")), "", "anon"},
		{"tenant function", httpadmit.Handler(ex, next, httpadmit.WithTenantFunc(func(*http.Request) (string, error) { return "from-func", nil })), "acme", "from-func"},
		{"failure status", httpadmit.Handler(ex, next, httpadmit.WithFailureStatus(func(code int) bool { return code >= 500 })), "acme", "acme"},
	} {
		for _, cancellable := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/cancellable=%v", tc.name, cancellable), func(t *testing.T) {
				got = ""
				r := httptest.NewRequest(http.MethodGet, "/", nil)
				if cancellable {
					ctx, cancel := context.WithCancel(r.Context())
					defer cancel()
					r = r.WithContext(ctx)
				}
				if tc.tenant != "" {
					r.Header.Set("X-Tenant", tc.tenant)
				}
				w := httptest.NewRecorder()
				tc.h.ServeHTTP(w, r)
				if w.Code != http.StatusOK {
					t.Fatalf("status %d: %s", w.Code, w.Body)
				}
				if got != tc.want {
					t.Errorf("GroupFromContext(r.Context()) in next: %q, want %q", got, tc.want)
				}
			})
		}
	}
}
