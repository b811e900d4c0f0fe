package httpadmit_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/httpadmit"
	"github.com/groupexec/groupexec/internal/adaptertest"
	"github.com/groupexec/groupexec/policy"
)

// breakerOnFirstFailure is an executor whose groups run one task at once,
// with a breaker that opens at its first failure, for the default 60s on
// clk.
func breakerOnFirstFailure(t *testing.T, clk clock.Clock, eopts ...executor.Option) *executor.Executor {
	t.Helper()
	return newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)}, append(eopts,
		executor.WithGroupBreaker(breaker.Settings{
			Clock:       clk,
			ReadyToTrip: func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 1 },
		}))...)
}

// answer is what a client got for one request.
type answer struct {
	code       int
	retryAfter string
	body       string
}

// A request that waited in its tenant's queue when the tenant's breaker
// opened is refused as it would start, and its client gets what a request
// refused by the open breaker at its admission gets: 503, the breaker's
// time left as Retry-After, the same body. next never sees it, and the
// group's listener hears one refusal by the breaker.
func TestHandlerQueuedRequestRefusedByTheBreakerAsAtAdmission(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	ev := newEvents()
	ex := breakerOnFirstFailure(t, clk, ev.listener())
	entered, release := make(chan struct{}), make(chan struct{})
	var servedQueued atomic.Bool
	backend := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Fail") != "" {
			close(entered)
			select {
			case <-release:
			case <-r.Context().Done():
			}
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		servedQueued.Store(true)
		_, _ = io.WriteString(w, "ok")
	})
	srv := serve(t, httpadmit.Handler(ex, backend, httpadmit.WithFailureStatus(func(c int) bool { return c >= 500 })))

	first := make(chan int, 1)
	go func() {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL, nil)
		req.Header.Set("X-Tenant", "bad")
		req.Header.Set("X-Fail", "1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			first <- 0
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	<-entered
	queued := make(chan answer, 1)
	go func() {
		code, ra, body, err := get(t, t.Context(), srv.URL, "bad")
		if err != nil {
			t.Errorf("queued request: %v", err)
		}
		queued <- answer{code, ra, body}
	}()
	adaptertest.Eventually(t, "the second request queued", func() bool { s, _ := ex.GroupStats("bad"); return s.Waiting == 1 })

	close(release)
	if code := <-first; code != http.StatusBadGateway {
		t.Fatalf("first request: %d, want next's 502", code)
	}
	var late answer
	select {
	case late = <-queued:
	case <-time.After(10 * time.Second):
		t.Fatal("the queued request got no answer within 10s")
	}
	if servedQueued.Load() {
		t.Fatal("next served the queued request after the breaker opened")
	}
	code, ra, body := mustGet(t, srv.URL, "bad") // refused at its admission
	atAdmission := answer{code, ra, body}
	if atAdmission.code != http.StatusServiceUnavailable || atAdmission.retryAfter != "60" || !strings.Contains(atAdmission.body, "circuit breaker") {
		t.Fatalf("refused at admission: %+v, want 503, Retry-After 60 (the breaker's time left), the breaker named", atAdmission)
	}
	if late != atAdmission {
		t.Errorf("queued then refused by the breaker: %+v; refused at admission: %+v, want the same answer", late, atAdmission)
	}

	// The listener hears one refusal of each by the breaker.
	for _, what := range []string{"queued", "at admission"} {
		e := next(t, ev.rejected)
		var re *executor.RejectedError
		if !errors.As(e.Err, &re) || re.Limit != executor.LimitBreaker || !errors.Is(e.Err, breaker.ErrOpenState) {
			t.Errorf("%s: OnRejected with %v, want a refusal by the open breaker", what, e.Err)
		}
	}
	if s, _ := ex.GroupStats("bad"); s.Rejected != 2 || s.Failed != 1 || s.Waiting != 0 || s.InFlight != 0 {
		t.Errorf("bad: %+v, want 1 failed, 2 rejected, none waiting or in flight", s)
	}
}

// A request that waited in its destination's queue when the destination's
// breaker opened is refused as it would start, never sent: RoundTrip's
// error is the one a request refused by the open breaker at its admission
// gets, matching executor.ErrRejected and breaker.ErrOpenState, a
// *executor.RejectedError for the breaker, through http.Client's
// *url.Error too.
func TestTransportQueuedRequestRefusedByTheBreakerAsAtAdmission(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	ex := breakerOnFirstFailure(t, clk)
	entered, release := make(chan struct{}), make(chan struct{})
	var sent atomic.Int32
	backendDown := errors.New("connection refused")
	base := roundTripper(func(r *http.Request) (*http.Response, error) {
		if sent.Add(1) == 1 {
			close(entered)
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return nil, backendDown
		}
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: r}, nil
	})
	client := &http.Client{Transport: httpadmit.Transport(ex, base)}
	getErr := func() error {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://dep.example/x", nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}

	first := make(chan error, 1)
	go func() { first <- getErr() }()
	<-entered
	queued := make(chan error, 1)
	go func() { queued <- getErr() }()
	adaptertest.Eventually(t, "the second request queued", func() bool { s, _ := ex.GroupStats("dep.example:80"); return s.Waiting == 1 })

	close(release)
	if err := <-first; !errors.Is(err, backendDown) {
		t.Fatalf("first request: %v, want the base's error", err)
	}
	var late error
	select {
	case late = <-queued:
	case <-time.After(10 * time.Second):
		t.Fatal("the queued request did not return within 10s")
	}
	atAdmission := getErr()
	if n := sent.Load(); n != 1 {
		t.Fatalf("the base was sent %d requests, want 1: neither refused one is sent", n)
	}
	for _, c := range []struct {
		what string
		err  error
	}{{"queued then refused", late}, {"refused at admission", atAdmission}} {
		var re *executor.RejectedError
		if !errors.Is(c.err, executor.ErrRejected) || !errors.Is(c.err, breaker.ErrOpenState) ||
			!errors.As(c.err, &re) || re.Limit != executor.LimitBreaker || re.Group != "dep.example:80" {
			t.Errorf("%s: %v, want a refusal by the destination's open breaker", c.what, c.err)
		}
	}
	if late.Error() != atAdmission.Error() {
		t.Errorf("queued then refused: %q; refused at admission: %q, want the same error", late, atAdmission)
	}
	if s, _ := ex.GroupStats("dep.example:80"); s.Rejected != 2 || s.Failed != 1 || s.Waiting != 0 || s.InFlight != 0 {
		t.Errorf("destination: %+v, want 1 failed, 2 rejected, none waiting or in flight", s)
	}
}
