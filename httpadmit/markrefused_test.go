package httpadmit_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/groupexec/groupexec/httpadmit"
)

// A Handler passes next the server's writer as it is unless it has
// WithFailureStatus: MarkRefused, and an inner Handler's refusal, cannot
// reach it, and the request counts as a Success, as MarkRefused's doc
// says. WithFailureStatus with a function that counts no status as a
// failure makes the writer MarkRefused finds, and the request counts as
// Cancelled, neither a failure nor a success.
func TestMarkRefusedNeedsFailureStatus(t *testing.T) {
	never := httpadmit.WithFailureStatus(func(int) bool { return false })
	for _, tc := range []struct {
		name  string
		inner bool // next is a Handler that refuses, not one that marks
		opts  []httpadmit.Option
		want  string
	}{
		{"marked", false, nil, "success"},
		{"marked, failure status", false, []httpadmit.Option{never}, "cancelled"},
		{"inner refusal", true, nil, "success"},
		{"inner refusal, failure status", true, []httpadmit.Option{never}, "cancelled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ex := newExec(t, nil)
			var next http.Handler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				httpadmit.MarkRefused(w)
				http.Error(w, "the dependency is busy", http.StatusServiceUnavailable)
			})
			if tc.inner {
				perRoute := newExec(t, nil)
				if err := perRoute.ShutdownGroup(context.Background(), httpadmit.DefaultGroup); err != nil {
					t.Fatal(err)
				}
				next = httpadmit.Handler(perRoute, next, httpadmit.WithTenantHeader("X-Route"))
			}
			w := httptest.NewRecorder()
			httpadmit.Handler(ex, next, tc.opts...).ServeHTTP(w, tenantRequest(context.Background(), "acme"))
			if w.Code != http.StatusServiceUnavailable {
				t.Fatalf("status %d, want 503", w.Code)
			}
			s, _ := ex.GroupStats("acme")
			got := "other"
			switch {
			case s.Succeeded == 1 && s.Cancelled == 0 && s.Failed == 0:
				got = "success"
			case s.Succeeded == 0 && s.Cancelled == 1 && s.Failed == 0:
				got = "cancelled"
			}
			if got != tc.want {
				t.Errorf("%d succeeded, %d cancelled, %d failed: %s, want %s", s.Succeeded, s.Cancelled, s.Failed, got, tc.want)
			}
		})
	}
}
