package httpadmit_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
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

// A handler behind Handler that answers 503 because the Transport it calls
// through refused (the dependency's breaker is open) says so with
// MarkRefused, here through a middleware's writer that unwraps: the
// inbound request counts Cancelled, and the inbound group's breaker, which
// trips on the first failure, stays closed. Judged by WithFailureStatus,
// the dependency's refusal would open it, though the request did no work.
func TestHandlerOverRefusingTransportIsNoFailure(t *testing.T) {
	trip1 := breaker.Settings{Timeout: time.Hour, ReadyToTrip: func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 1 }}
	failure := httpadmit.WithFailureStatus(func(c int) bool { return c >= 500 })
	inbound := newExec(t, nil, executor.WithGroupBreaker(trip1))
	outbound := newExec(t, nil, executor.WithGroupBreaker(trip1))
	var sent atomic.Int64
	base := roundTripper(func(r *http.Request) (*http.Response, error) {
		sent.Add(1)
		return &http.Response{StatusCode: http.StatusServiceUnavailable, Body: io.NopCloser(strings.NewReader("down"))}, nil
	})
	client := &http.Client{Transport: httpadmit.Transport(outbound, base, failure)}
	resp, err := client.Get("http://dep.test/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if s, _ := outbound.GroupStats("dep.test:80"); s.Breaker != breaker.StateOpen {
		t.Fatalf("dependency's breaker %v after its 503, want open", s.Breaker)
	}

	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, "http://dep.test/", nil)
		resp, err := client.Do(req)
		if err != nil {
			if errors.Is(err, executor.ErrRejected) {
				httpadmit.MarkRefused(w) // refused downstream: no failure here
			}
			http.Error(w, "the dependency is unavailable", http.StatusServiceUnavailable)
			return
		}
		resp.Body.Close()
	})
	mw := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(wrapWriter{w}, r) })
	}
	srv := serve(t, httpadmit.Handler(inbound, mw(next), failure))
	for i := range 3 {
		if code, _, _ := mustGet(t, srv.URL, "acme"); code != http.StatusServiceUnavailable {
			t.Fatalf("request %d: %d, want next's 503", i, code)
		}
	}
	s, _ := inbound.GroupStats("acme")
	if s.Breaker != breaker.StateClosed || s.Failed != 0 || s.Cancelled != 3 {
		t.Errorf("inbound group: breaker %v, %d failed, %d cancelled; want closed, 0, 3", s.Breaker, s.Failed, s.Cancelled)
	}
	if n := sent.Load(); n != 1 {
		t.Errorf("dependency called %d times, want 1: its breaker refused the rest", n)
	}
}
