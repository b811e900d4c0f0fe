package httpadmit_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/httpadmit"
)

// wrapWriter is a middleware's writer that passes everything on and
// unwraps to the writer it wraps, as http.ResponseController asks.
type wrapWriter struct{ http.ResponseWriter }

func (w wrapWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// A Handler chained before another (one group per tenant, then one per
// route), even through a middleware's writer that unwraps, counts a
// request the inner one refused as Cancelled: next never ran. Judged by
// WithFailureStatus, the inner group's shutdown (503) would open the
// tenant's breaker.
func TestHandlerStackedRefusalIsNoFailure(t *testing.T) {
	perTenant := newExec(t, nil, executor.WithGroupBreaker(breaker.Settings{
		Timeout: time.Hour, ReadyToTrip: func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 1 },
	}))
	perRoute := newExec(t, nil)
	if err := perRoute.ShutdownGroup(context.Background(), httpadmit.DefaultGroup); err != nil {
		t.Fatal(err)
	}
	served := 0
	inner := httpadmit.Handler(perRoute, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served++ }),
		httpadmit.WithTenantHeader("X-Route"))
	middleware := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { inner.ServeHTTP(wrapWriter{w}, r) })
	h := httpadmit.Handler(perTenant, middleware, httpadmit.WithFailureStatus(func(c int) bool { return c >= 500 }))

	for _, tc := range []struct {
		route []string
		want  int
	}{
		{nil, http.StatusServiceUnavailable},        // the route's group is shut down
		{[]string{"a", "b"}, http.StatusBadRequest}, // an invalid route key
		{nil, http.StatusServiceUnavailable},        // the tenant's breaker is still closed
	} {
		r := tenantRequest(context.Background(), "t1")
		r.Header["X-Route"] = tc.route
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.want {
			t.Fatalf("route %q: status %d, want %d from the inner Handler", tc.route, w.Code, tc.want)
		}
	}
	if s, _ := perTenant.GroupStats("t1"); s.Failed != 0 || s.Cancelled != 3 || s.Breaker != breaker.StateClosed {
		t.Errorf("tenant: %d failed, %d cancelled, breaker %v; want 0, 3 and closed", s.Failed, s.Cancelled, s.Breaker)
	}
	if served != 0 {
		t.Errorf("next served %d requests, want 0", served)
	}
}
