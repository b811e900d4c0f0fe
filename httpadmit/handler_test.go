package httpadmit_test

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/httpadmit"
	"github.com/groupexec/groupexec/internal/adaptertest"
	"github.com/groupexec/groupexec/policy"
)

// A tenant's requests run at most its concurrency limit at once, the others
// wait, and another tenant is served meanwhile.
func TestHandlerHoldsTheGroupLimit(t *testing.T) {
	ev := newEvents()
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(2)}, ev.listener())
	g := newGate(t)
	srv := serve(t, httpadmit.Handler(ex, g))

	const n = 8
	var wg sync.WaitGroup
	codes := make(chan int, n+1)
	for range n {
		wg.Go(func() { code, _, _ := mustGet(t, srv.URL, "hot"); codes <- code })
	}
	for range n {
		next(t, ev.submitted)
	}
	<-g.entered
	<-g.entered
	adaptertest.Eventually(t, "the others waiting", func() bool { s, _ := ex.GroupStats("hot"); return s.Waiting == n-2 })
	if s, _ := ex.GroupStats("hot"); s.RunningTasks != 2 || s.Waiting != n-2 {
		t.Fatalf("hot: %d running, %d waiting; want 2 and %d", s.RunningTasks, s.Waiting, n-2)
	}
	// Another tenant is admitted while hot is full.
	wg.Go(func() { code, _, _ := mustGet(t, srv.URL, "cold"); codes <- code })
	if tenant := <-g.entered; tenant != "cold" {
		t.Fatalf("entered: %q, want cold", tenant)
	}
	g.release()
	wg.Wait()
	close(codes)
	for code := range codes {
		if code != http.StatusOK {
			t.Errorf("status %d, want 200", code)
		}
	}
	if m := g.max.Load(); m != 3 {
		t.Errorf("at most %d requests ran at once, want 3 (hot's 2 and cold's 1)", m)
	}
	if s := g.served.Load(); s != n+1 {
		t.Errorf("served %d, want %d", s, n+1)
	}
}

// A refusal is 429 with Retry-After, and next never sees the request.
func TestHandlerRefusesWith429(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1)})
	g := newGate(t)
	srv := serve(t, httpadmit.Handler(ex, g, httpadmit.WithRetryAfter(1500*time.Millisecond)))
	done := make(chan struct{})
	go func() { defer close(done); mustGet(t, srv.URL, "a") }()
	<-g.entered
	code, ra, body := mustGet(t, srv.URL, "a")
	if code != http.StatusTooManyRequests || ra != "2" || !strings.Contains(body, "group in-flight") {
		t.Errorf("got %d Retry-After %q %q; want 429, 2 and the limit's name", code, ra, body)
	}
	g.release()
	<-done
	if s := g.served.Load(); s != 1 {
		t.Errorf("next served %d requests, want 1", s)
	}
}

// After ShutdownGroup and after Shutdown: 503 with Retry-After.
func TestHandlerAnswers503AfterShutdown(t *testing.T) {
	ex := newExec(t, nil)
	g := newGate(t)
	g.release()
	srv := serve(t, httpadmit.Handler(ex, g))
	if code, _, _ := mustGet(t, srv.URL, "a"); code != http.StatusOK {
		t.Fatalf("before: %d", code)
	}
	if err := ex.ShutdownGroup(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	if code, ra, _ := mustGet(t, srv.URL, "a"); code != http.StatusServiceUnavailable || ra != "1" {
		t.Errorf("group shut down: %d Retry-After %q, want 503 and 1", code, ra)
	}
	if code, _, _ := mustGet(t, srv.URL, "b"); code != http.StatusOK {
		t.Errorf("other group: %d, want 200", code)
	}
	if err := ex.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if code, ra, _ := mustGet(t, srv.URL, "b"); code != http.StatusServiceUnavailable || ra != "1" {
		t.Errorf("executor shut down: %d Retry-After %q, want 503 and 1", code, ra)
	}
	if s := g.served.Load(); s != 2 {
		t.Errorf("next served %d, want 2", s)
	}
}

// With WithFailureStatus, 5xx answers trip the group's breaker; then the
// tenant gets 503 with Retry-After and next is not called, while others are
// served.
func TestHandlerAnswers503WhileTheBreakerIsOpen(t *testing.T) {
	ex := newExec(t, nil, executor.WithGroupBreaker(breaker.Settings{
		Timeout:     time.Hour,
		Clock:       clock.NewFake(time.Unix(1_000_000, 0)),
		ReadyToTrip: func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 2 },
	}))
	var calls sync.Map
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tenant := r.Header.Get("X-Tenant")
		n, _ := calls.LoadOrStore(tenant, new(int))
		*n.(*int)++
		if tenant == "bad" {
			w.WriteHeader(http.StatusBadGateway)
		}
	})
	srv := serve(t, httpadmit.Handler(ex, next, httpadmit.WithFailureStatus(func(c int) bool { return c >= 500 })))
	for range 2 {
		if code, _, _ := mustGet(t, srv.URL, "bad"); code != http.StatusBadGateway {
			t.Fatalf("status %d, want next's 502", code)
		}
	}
	if s, _ := ex.GroupStats("bad"); s.Breaker != breaker.StateOpen || s.Failed != 2 {
		t.Fatalf("breaker %v, %d failed; want open after 2", s.Breaker, s.Failed)
	}
	code, ra, body := mustGet(t, srv.URL, "bad")
	if code != http.StatusServiceUnavailable || ra != "3600" || !strings.Contains(body, "breaker") {
		t.Errorf("open breaker: %d Retry-After %q %q, want 503, the breaker's hour", code, ra, body)
	}
	if code, _, _ := mustGet(t, srv.URL, "good"); code != http.StatusOK {
		t.Errorf("other tenant: %d", code)
	}
	if n, _ := calls.Load("bad"); *n.(*int) != 2 {
		t.Errorf("next saw bad %d times, want 2", *n.(*int))
	}
}

// The Retry-After of a refusal by an open breaker is the time the breaker
// has left before it lets a probe through, rounded up to whole seconds,
// when that is longer than WithRetryAfter's: a client told to come back in
// a second would be refused for the rest of the breaker's Timeout. A
// half-open breaker's refusal (its probes out) keeps WithRetryAfter's.
func TestHandlerRetryAfterIsTheOpenBreakersTimeLeft(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	ex := newExec(t, nil, executor.WithGroupBreaker(breaker.Settings{
		Clock:       clk, // Timeout: the default 60s
		ReadyToTrip: func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 1 },
	}))
	probing, probe := make(chan struct{}), make(chan struct{})
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Probe") != "" {
			close(probing)
			<-probe
		}
		w.WriteHeader(http.StatusBadGateway)
	})
	failure := httpadmit.WithFailureStatus(func(c int) bool { return c >= 500 })
	srv := serve(t, httpadmit.Handler(ex, next, failure))
	long := serve(t, httpadmit.Handler(ex, next, failure, httpadmit.WithRetryAfter(90*time.Second)))
	if code, _, _ := mustGet(t, srv.URL, "bad"); code != http.StatusBadGateway {
		t.Fatalf("status %d, want next's 502", code)
	}
	for _, c := range []struct {
		advance time.Duration
		url     string
		want    string
	}{
		{0, srv.URL, "60"},
		{20*time.Second + time.Millisecond, srv.URL, "40"}, // 39.999s, rounded up
		{0, long.URL, "90"}, // WithRetryAfter's is longer
		{39 * time.Second, srv.URL, "1"},
	} {
		clk.Advance(c.advance)
		if code, ra, _ := mustGet(t, c.url, "bad"); code != http.StatusServiceUnavailable || ra != c.want {
			t.Fatalf("open breaker, %v left: %d Retry-After %q, want 503 and %s",
				breaker.DefaultTimeout-clk.Now().Sub(time.Unix(1_000_000, 0)), code, ra, c.want)
		}
	}

	// Past its Timeout: the next request is the half-open probe; while it is
	// out, refusals wait WithRetryAfter's second.
	clk.Advance(time.Second)
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		req.Header.Set("X-Tenant", "bad")
		req.Header.Set("X-Probe", "1")
		if resp, err := srv.Client().Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	<-probing // admitted: the breaker is half-open, its one probe out
	if code, ra, _ := mustGet(t, srv.URL, "bad"); code != http.StatusServiceUnavailable || ra != "1" {
		t.Errorf("half-open breaker, probe out: %d Retry-After %q, want 503 and 1", code, ra)
	}
	close(probe)
	<-done
}

// Without WithFailureStatus a 5xx is a success for the executor.
func TestHandlerCountsStatusOnlyWhenAsked(t *testing.T) {
	ex := newExec(t, nil)
	srv := serve(t, httpadmit.Handler(ex, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	})))
	mustGet(t, srv.URL, "a")
	if s, _ := ex.GroupStats("a"); s.Succeeded != 1 || s.Failed != 0 {
		t.Errorf("%d succeeded, %d failed; want 1 and 0", s.Succeeded, s.Failed)
	}
}

// 101 Switching Protocols is a final status (net/http sends it and hands
// the connection over), not an informational 1xx: WithFailureStatus's
// function is told 101, as for any status next answers with, not the 200
// of a handler that answered nothing. Informational ones (103) stay
// uncounted.
func TestHandlerFailureStatusSeesSwitchingProtocols(t *testing.T) {
	ex := newExec(t, nil)
	var got []int
	h := httpadmit.Handler(ex, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusEarlyHints)
		w.WriteHeader(http.StatusSwitchingProtocols)
	}), httpadmit.WithFailureStatus(func(c int) bool { got = append(got, c); return false }))
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("X-Tenant", "a")
	h.ServeHTTP(httptest.NewRecorder(), r)
	if len(got) != 1 || got[0] != http.StatusSwitchingProtocols {
		t.Fatalf("the failure function was told %v, want [101]", got)
	}
}

// A client that gives up while its request waits frees its place at once,
// and its request never reaches next.
func TestHandlerClientGoneWhileQueued(t *testing.T) {
	ev := newEvents()
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1), policy.WithDefaultMaxInFlight(2)}, ev.listener())
	g := newGate(t)
	srv := serve(t, httpadmit.Handler(ex, g))
	first := make(chan struct{})
	go func() { defer close(first); mustGet(t, srv.URL, "a") }()
	<-g.entered
	next(t, ev.submitted)

	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan error)
	go func() { _, _, _, err := get(t, ctx, srv.URL, "a"); gone <- err }()
	next(t, ev.submitted)
	adaptertest.Eventually(t, "the second request waiting", func() bool { s, _ := ex.GroupStats("a"); return s.Waiting == 1 })
	if s, _ := ex.GroupStats("a"); s.Waiting != 1 || s.InFlight != 2 {
		t.Fatalf("%+v: want 1 waiting, 2 in flight", s)
	}
	cancel()
	if err := <-gone; !errors.Is(err, context.Canceled) {
		t.Fatalf("client: %v", err)
	}
	if e := next(t, ev.completed); e.Status != executor.Cancelled {
		t.Fatalf("waiting request ended %v, want Cancelled", e.Status)
	}
	if s, _ := ex.GroupStats("a"); s.Waiting != 0 || s.InFlight != 1 {
		t.Fatalf("%+v: the cancelled request kept its place", s)
	}
	// Its place is free: another request is admitted and waits.
	third := make(chan int)
	go func() { code, _, _ := mustGet(t, srv.URL, "a"); third <- code }()
	next(t, ev.submitted)
	g.release()
	<-first
	if code := <-third; code != http.StatusOK {
		t.Errorf("third: %d", code)
	}
	if s := g.served.Load(); s != 2 {
		t.Errorf("next served %d, want 2: the cancelled request reached it", s)
	}
}

// A panic in next goes on to net/http (which closes the connection, and
// logs unless it is http.ErrAbortHandler); the request's slot is released.
// A panic with http.ErrAbortHandler, a deliberate abort, counts as
// Cancelled; any other as Failed.
func TestHandlerPanicsKeepNetHTTPBehaviour(t *testing.T) {
	for _, tc := range []struct {
		value             any
		failed, cancelled uint64
	}{{http.ErrAbortHandler, 0, 1}, {"boom", 1, 0}} {
		value := tc.value
		t.Run(fmt30(value), func(t *testing.T) {
			ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1)})
			var recovered sync.Map
			next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/panic" {
					panic(value)
				}
			})
			// An outer middleware sees the panic value unchanged.
			outer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				defer func() {
					if v := recover(); v != nil {
						recovered.Store(r.URL.Path, v)
						panic(v)
					}
				}()
				httpadmit.Handler(ex, next).ServeHTTP(w, r)
			})
			srv := serve(t, outer)
			if _, _, _, err := get(t, context.Background(), srv.URL+"/panic", "a"); err == nil {
				t.Error("the client got a response from a handler that panicked")
			}
			if v, _ := recovered.Load("/panic"); v != value {
				t.Errorf("panic value %v, want %v", v, value)
			}
			if code, _, _ := mustGet(t, srv.URL, "a"); code != http.StatusOK {
				t.Errorf("after the panic: %d, the slot was not released", code)
			}
			if s, _ := ex.GroupStats("a"); s.Failed != tc.failed || s.Cancelled != tc.cancelled || s.Succeeded != 1 {
				t.Errorf("%d failed, %d cancelled, %d succeeded; want %d, %d and 1", s.Failed, s.Cancelled, s.Succeeded, tc.failed, tc.cancelled)
			}
		})
	}
}

// A request whose next aborts it with http.ErrAbortHandler is not a failure
// of its tenant's dependency: it does not trip the group's circuit breaker,
// with or without WithFailureStatus, while the abort still reaches the
// server.
func TestHandlerAbortIsNotABreakerFailure(t *testing.T) {
	for _, opts := range [][]httpadmit.Option{nil, {httpadmit.WithFailureStatus(func(code int) bool { return code >= 500 })}} {
		ex := newExec(t, nil, executor.WithGroupBreaker(breaker.Settings{
			ReadyToTrip: func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 1 }}))
		h := httpadmit.Handler(ex, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
			panic(http.ErrAbortHandler)
		}), append(opts, httpadmit.WithTenantFunc(func(*http.Request) (string, error) { return "a", nil }))...)
		panicked := servePanic(h, httptest.NewRecorder())
		if panicked != http.ErrAbortHandler {
			t.Errorf("ServeHTTP's panic = %v, want http.ErrAbortHandler", panicked)
		}
		if s, _ := ex.GroupStats("a"); s.Breaker != breaker.StateClosed || s.Failed != 0 || s.Cancelled != 1 {
			t.Errorf("with %d options: breaker %v, %d failed, %d cancelled; want closed, 0 and 1", len(opts), s.Breaker, s.Failed, s.Cancelled)
		}
	}
}

func fmt30(v any) string {
	if err, ok := v.(error); ok {
		return strings.ReplaceAll(err.Error(), " ", "_")
	}
	return v.(string)
}

// next gets the request's own context when the executor passes it through,
// and a context the executor's Close cancels in any case.
func TestHandlerPassesTheContext(t *testing.T) {
	ex := newExec(t, nil)
	type key struct{}
	var got any
	h := httpadmit.Handler(ex, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Context().Value(key{})
	}))
	srv := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), key{}, "v")))
	}))
	mustGet(t, srv.URL, "")
	if got != "v" {
		t.Errorf("next's context lost the request's values: %v", got)
	}
}

// Close cancels the context of the requests next is serving.
func TestHandlerCloseCancelsRunningRequests(t *testing.T) {
	ex := newExec(t, nil)
	entered := make(chan struct{})
	srv := serve(t, httpadmit.Handler(ex, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-r.Context().Done()
		w.WriteHeader(http.StatusServiceUnavailable)
	})))
	done := make(chan int)
	go func() { code, _, _ := mustGet(t, srv.URL, "a"); done <- code }()
	<-entered
	ex.Close()
	if code := <-done; code != http.StatusServiceUnavailable {
		t.Errorf("status %d: next did not see its context end", code)
	}
}

// Retry-After is WithRetryAfter's delay in whole seconds, rounded up, for
// every delay the option accepts: the largest one too, whose rounding must
// not overflow into a negative header.
func TestRetryAfterRoundsUpWithoutOverflow(t *testing.T) {
	ex := newExec(t, nil)
	if err := ex.ShutdownGroup(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	g := newGate(t)
	g.release()
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{time.Nanosecond, "1"}, {time.Second, "1"}, {1500 * time.Millisecond, "2"},
		{time.Duration(math.MaxInt64), "9223372037"},
	} {
		srv := serve(t, httpadmit.Handler(ex, g, httpadmit.WithRetryAfter(tc.d)))
		if code, ra, _ := mustGet(t, srv.URL, "a"); code != http.StatusServiceUnavailable || ra != tc.want {
			t.Errorf("WithRetryAfter(%v): %d Retry-After %q, want 503 and %s", tc.d, code, ra, tc.want)
		}
	}
}

// endingCtx is a context that ends with err when end is called, as a
// request's does when its client goes away (context.Canceled) or its
// deadline passes (context.DeadlineExceeded), without waiting for a clock.
type endingCtx struct {
	context.Context
	done chan struct{}
	err  error
	once sync.Once
}

func newEndingCtx(err error) *endingCtx {
	return &endingCtx{Context: context.Background(), done: make(chan struct{}), err: err}
}

func (c *endingCtx) end()                  { c.once.Do(func() { close(c.done) }) }
func (c *endingCtx) Done() <-chan struct{} { return c.done }

func (c *endingCtx) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

// With WithFailureStatus, a failing status written after the request's
// context was cancelled (its client went away, and next answered for the
// work it gave up, as a ReverseProxy's 502) counts as Cancelled, not against
// the group's breaker; its outcome still carries the status. A deadline that
// passed is no cancellation: the work did not finish in its time.
func TestHandlerStatusAfterCancelIsCancelled(t *testing.T) {
	ev := newEvents()
	ex := newExec(t, nil, ev.listener(), executor.WithGroupBreaker(breaker.Settings{
		ReadyToTrip: func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 2 }}))
	h := httpadmit.Handler(ex, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Context().Value(endKey{}).(func())()
		<-r.Context().Done()
		w.WriteHeader(http.StatusBadGateway)
	}), httpadmit.WithFailureStatus(func(code int) bool { return code >= 500 }))
	serveEnding := func(err error) executor.Event {
		ctx := newEndingCtx(err)
		r := httptest.NewRequest(http.MethodGet, "/", nil).WithContext(context.WithValue(ctx, endKey{}, ctx.end))
		r.Header.Set("X-Tenant", "a")
		h.ServeHTTP(httptest.NewRecorder(), r)
		return next(t, ev.completed)
	}
	for range 2 {
		e := serveEnding(context.Canceled)
		var se *httpadmit.StatusError
		if e.Status != executor.Cancelled || !errors.Is(e.Err, context.Canceled) || !errors.As(e.Err, &se) || se.Code != http.StatusBadGateway {
			t.Errorf("client gone: %v %v, want Cancelled with the status", e.Status, e.Err)
		}
	}
	if s, _ := ex.GroupStats("a"); s.Breaker != breaker.StateClosed || s.Failed != 0 || s.Cancelled != 2 {
		t.Fatalf("breaker %v, %d failed, %d cancelled; want closed, 0 and 2", s.Breaker, s.Failed, s.Cancelled)
	}
	if e := serveEnding(context.DeadlineExceeded); e.Status != executor.Failed {
		t.Errorf("deadline passed: %v %v, want Failed", e.Status, e.Err)
	}
}

type endKey struct{}

// A failing status written while the request's context was still live is
// the server's failure, even if the context is cancelled before next
// returns (its client read the 500 and went away while next cleaned up):
// only a status written after the cancellation answers for work given up
// on.
func TestHandlerStatusBeforeCancelIsAFailure(t *testing.T) {
	ev := newEvents()
	ex := newExec(t, nil, ev.listener())
	h := httpadmit.Handler(ex, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		r.Context().Value(endKey{}).(func())()
		<-r.Context().Done()
	}), httpadmit.WithFailureStatus(func(code int) bool { return code >= 500 }))
	ctx := newEndingCtx(context.Canceled)
	r := httptest.NewRequest(http.MethodGet, "/", nil).WithContext(context.WithValue(ctx, endKey{}, ctx.end))
	r.Header.Set("X-Tenant", "a")
	h.ServeHTTP(httptest.NewRecorder(), r)
	e := next(t, ev.completed)
	var se *httpadmit.StatusError
	if e.Status != executor.Failed || errors.Is(e.Err, context.Canceled) || !errors.As(e.Err, &se) || se.Code != http.StatusInternalServerError {
		t.Errorf("500 written before the cancellation: %v %v, want Failed with the status", e.Status, e.Err)
	}
}
