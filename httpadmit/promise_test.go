package httpadmit_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/httpadmit"
	"github.com/groupexec/groupexec/policy"
)

// serveAsync runs h on a recorded request in its own goroutine and returns
// the recorder once the handler has returned.
func serveAsync(h http.Handler, r *http.Request) <-chan *httptest.ResponseRecorder {
	out := make(chan *httptest.ResponseRecorder, 1)
	go func() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		out <- w
	}()
	return out
}

func tenantRequest(ctx context.Context, tenant string) *http.Request {
	r := httptest.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
	r.Header.Set("X-Tenant", tenant)
	return r
}

// A request that waits past the queue timeout is refused with 429 and
// Retry-After, and next never sees it.
func TestHandlerQueueTimeoutIs429(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	ev := newEvents()
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1), policy.WithQueueTimeout(time.Second)},
		executor.WithClock(clk), ev.listener())
	g := newGate(t)
	h := httpadmit.Handler(ex, g)
	first := serveAsync(h, tenantRequest(context.Background(), "a"))
	<-g.entered
	next(t, ev.submitted)
	second := serveAsync(h, tenantRequest(context.Background(), "a"))
	next(t, ev.submitted)
	for deadline := time.Now().Add(10 * time.Second); clk.Pending() == 0; { // the queue timeout's timer is set when the request is queued
		if time.Now().After(deadline) {
			t.Fatal("no queue-timeout timer set 10s after the second request was submitted") // a hang guard
		}
		time.Sleep(time.Millisecond)
	}
	clk.Advance(time.Second)
	w := <-second
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "1" || !strings.Contains(w.Body.String(), "queue timeout") {
		t.Errorf("queue timeout: %d Retry-After %q %q; want 429, 1 and the limit's name", w.Code, w.Header().Get("Retry-After"), w.Body.String())
	}
	g.release()
	if w := <-first; w.Code != http.StatusOK {
		t.Errorf("first: %d", w.Code)
	}
	if n := g.served.Load(); n != 1 {
		t.Errorf("next served %d requests, want 1", n)
	}
}

// A request whose context ends while it waits is answered 503 without
// Retry-After, and next never sees it.
func TestHandlerContextEndedWhileQueuedIs503WithoutRetryAfter(t *testing.T) {
	ev := newEvents()
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)}, ev.listener())
	g := newGate(t)
	h := httpadmit.Handler(ex, g)
	first := serveAsync(h, tenantRequest(context.Background(), "a"))
	<-g.entered
	next(t, ev.submitted)
	ctx, cancel := context.WithCancel(context.Background())
	second := serveAsync(h, tenantRequest(ctx, "a"))
	next(t, ev.submitted)
	cancel()
	w := <-second
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "" {
		t.Errorf("context ended while queued: %d Retry-After %q; want 503 without", w.Code, w.Header().Get("Retry-After"))
	}
	g.release()
	<-first
	if n := g.served.Load(); n != 1 {
		t.Errorf("next served %d requests, want 1", n)
	}
}

// A half-open breaker with its probe out refuses the tenant's other
// requests with 503 and Retry-After (breaker.ErrTooManyRequests).
func TestHandlerHalfOpenBreakerWithItsProbeOutIs503(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(4)}, executor.WithGroupBreaker(breaker.Settings{
		Clock:       clk,
		Timeout:     time.Minute,
		ReadyToTrip: func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 1 },
	}))
	fail := true
	g := newGate(t)
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fail {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		g.ServeHTTP(w, r)
	})
	h := httpadmit.Handler(ex, next, httpadmit.WithFailureStatus(func(c int) bool { return c >= 500 }))
	if w := <-serveAsync(h, tenantRequest(context.Background(), "a")); w.Code != http.StatusBadGateway {
		t.Fatalf("first: %d", w.Code)
	}
	if s, _ := ex.GroupStats("a"); s.Breaker != breaker.StateOpen {
		t.Fatalf("breaker %v, want open", s.Breaker)
	}
	fail = false
	clk.Advance(time.Minute)
	probe := serveAsync(h, tenantRequest(context.Background(), "a"))
	<-g.entered
	var got error
	refused := httpadmit.Handler(ex, next, httpadmit.WithFailureStatus(func(c int) bool { return c >= 500 }),
		httpadmit.WithRefusalWriter(func(w http.ResponseWriter, r *http.Request, err error) { got = err }))
	<-serveAsync(refused, tenantRequest(context.Background(), "a"))
	if !errors.Is(got, breaker.ErrTooManyRequests) {
		t.Fatalf("refused with %v, want breaker.ErrTooManyRequests", got)
	}
	w := <-serveAsync(h, tenantRequest(context.Background(), "a"))
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "1" {
		t.Errorf("half-open, probe out: %d Retry-After %q; want 503 and 1", w.Code, w.Header().Get("Retry-After"))
	}
	g.release()
	if w := <-probe; w.Code != http.StatusOK {
		t.Errorf("probe: %d", w.Code)
	}
}

// An error from the base transport counts as a failure for the host's
// breaker and in Stats; a cancellation does not.
func TestTransportBaseErrorsCountUnlessCancelled(t *testing.T) {
	ex := newExec(t, nil, executor.WithGroupBreaker(breaker.Settings{
		ReadyToTrip: func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 2 },
	}))
	down := errors.New("connection refused")
	var sendErr error
	base := roundTripper(func(r *http.Request) (*http.Response, error) { return nil, sendErr })
	rt := httpadmit.Transport(ex, base)
	roundTrip := func() error {
		req, _ := http.NewRequest(http.MethodGet, "https://dep.test/", nil)
		_, err := rt.RoundTrip(req)
		return err
	}
	sendErr = context.Canceled
	for range 3 {
		if err := roundTrip(); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled: %v", err)
		}
	}
	if s, _ := ex.GroupStats("dep.test:443"); s.Failed != 0 || s.Cancelled != 3 || s.Breaker != breaker.StateClosed {
		t.Fatalf("after cancellations: %d failed, %d cancelled, breaker %v; want 0, 3, closed", s.Failed, s.Cancelled, s.Breaker)
	}
	sendErr = down
	for range 2 {
		if err := roundTrip(); !errors.Is(err, down) {
			t.Fatalf("base error: %v", err)
		}
	}
	if s, _ := ex.GroupStats("dep.test:443"); s.Failed != 2 || s.Breaker != breaker.StateOpen {
		t.Fatalf("after base errors: %d failed, breaker %v; want 2 and open", s.Failed, s.Breaker)
	}
	if err := roundTrip(); !errors.Is(err, executor.ErrRejected) || !errors.Is(err, breaker.ErrOpenState) {
		t.Errorf("open breaker: %v", err)
	}
}

// A base that refuses the request in this process, with an executor's or a
// breaker's error (the caller's own limiter below this Transport), never
// sent it: the destination's group counts it Cancelled, its breaker does
// not trip, and the caller gets the error.
func TestTransportBaseLocalRefusalIsNoFailure(t *testing.T) {
	for _, refusal := range []error{
		fmt.Errorf("caller's bulkhead: %w", executor.ErrRejected),
		breaker.ErrOpenState,
		fmt.Errorf("half-open: %w", breaker.ErrTooManyRequests),
	} {
		ex := newExec(t, nil, executor.WithGroupBreaker(breaker.Settings{
			ReadyToTrip: func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 1 },
		}))
		base := roundTripper(func(r *http.Request) (*http.Response, error) { return nil, refusal })
		rt := httpadmit.Transport(ex, base)
		for range 2 {
			req, _ := http.NewRequest(http.MethodGet, "https://dep.test/", nil)
			if _, err := rt.RoundTrip(req); !errors.Is(err, refusal) {
				t.Fatalf("%v: the caller got %v, want the refusal", refusal, err)
			}
		}
		if s, _ := ex.GroupStats("dep.test:443"); s.Failed != 0 || s.Cancelled != 2 || s.Breaker != breaker.StateClosed {
			t.Errorf("%v: %d failed, %d cancelled, breaker %v; want 0, 2, closed", refusal, s.Failed, s.Cancelled, s.Breaker)
		}
	}
}
