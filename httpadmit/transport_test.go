package httpadmit_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/httpadmit"
	"github.com/groupexec/groupexec/internal/adaptertest"
	"github.com/groupexec/groupexec/policy"
)

// host is the Transport's group for a test server's URL.
func host(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

func inFlight(ex *executor.Executor, group string) int {
	s, _ := ex.GroupStats(group)
	return s.InFlight
}

// Each destination host has its own bulkhead: a full host refuses with
// ErrRejected and sends nothing, another host is served, and closing a body
// (read or not) frees its slot before Close returns.
func TestTransportBoundsEachHost(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(2), policy.WithDefaultMaxConcurrency(2)})
	var hits [2]atomic.Int64
	slow := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits[0].Add(1)
		io.WriteString(w, "slow")
	}))
	fast := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits[1].Add(1)
		io.WriteString(w, "fast")
	}))
	client := &http.Client{Transport: httpadmit.Transport(ex, slow.Client().Transport)}
	get := func(u string) (*http.Response, error) { return client.Get(u) }

	a, err := get(slow.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, err := get(slow.URL)
	if err != nil {
		t.Fatal(err)
	}
	if n := inFlight(ex, host(t, slow.URL)); n != 2 {
		t.Fatalf("%d in flight with two bodies open, want 2", n)
	}
	if _, err := get(slow.URL); !errors.Is(err, executor.ErrRejected) {
		t.Fatalf("third request to a full host: %v, want ErrRejected", err)
	}
	if hits[0].Load() != 2 {
		t.Fatalf("the slow host saw %d requests, want 2", hits[0].Load())
	}
	c, err := get(fast.URL)
	if err != nil {
		t.Fatalf("another host: %v", err)
	}
	c.Body.Close()

	// Read and closed, and never read but closed: each frees its slot.
	if body, _ := io.ReadAll(a.Body); string(body) != "slow" {
		t.Fatalf("body %q", body)
	}
	a.Body.Close()
	if n := inFlight(ex, host(t, slow.URL)); n != 1 {
		t.Fatalf("%d in flight after one Close, want 1", n)
	}
	b.Body.Close()
	if n := inFlight(ex, host(t, slow.URL)); n != 0 {
		t.Fatalf("%d in flight after closing an unread body, want 0", n)
	}
	b.Body.Close() // a second Close is harmless
	d, err := get(slow.URL)
	if err != nil {
		t.Fatal(err)
	}
	d.Body.Close()
	client.CloseIdleConnections()
}

// The transport's in-flight requests per host never exceed the limit, counted
// in the server.
func TestTransportLimitHoldsUnderLoad(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(3)})
	var running, most atomic.Int64
	srv := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := running.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		io.WriteString(w, strings.Repeat("x", 1000))
		running.Add(-1)
	}))
	client := &http.Client{Transport: httpadmit.Transport(ex, srv.Client().Transport)}
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			for range 10 {
				resp, err := client.Get(srv.URL)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	if m := most.Load(); m > 3 || m < 1 {
		t.Errorf("the server saw %d requests at once, limit 3", m)
	}
	if s := ex.Stats(); s.Succeeded != 200 || s.Running != 0 {
		t.Errorf("%+v", s)
	}
	client.CloseIdleConnections()
}

// roundTripper is a base transport made of a function.
type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// trackedBody records that it was closed.
type trackedBody struct {
	io.Reader
	closed atomic.Bool
}

func (b *trackedBody) Close() error { b.closed.Store(true); return nil }

// Responses without a body, base's errors and base's panics free the slot
// before RoundTrip returns; a refused request's body is closed.
func TestTransportReleasesWithoutABody(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1)})
	errDial := errors.New("dial refused")
	base := roundTripper(func(r *http.Request) (*http.Response, error) {
		switch r.URL.Path {
		case "/nobody":
			return &http.Response{StatusCode: http.StatusNoContent, Body: http.NoBody}, nil
		case "/nil":
			return &http.Response{StatusCode: http.StatusOK}, nil
		case "/error":
			return nil, errDial
		case "/panic":
			panic("base broke")
		}
		return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("x"))}, nil
	})
	rt := httpadmit.Transport(ex, base)
	send := func(path string) (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodGet, "http://svc.test"+path, nil)
		return rt.RoundTrip(req)
	}
	const group = "svc.test:80"
	for _, path := range []string{"/nobody", "/nil"} {
		if _, err := send(path); err != nil {
			t.Fatal(err)
		}
		if n := inFlight(ex, group); n != 0 {
			t.Errorf("%s: %d in flight after RoundTrip returned", path, n)
		}
	}
	if _, err := send("/error"); err != errDial {
		t.Errorf("base's error: %v", err)
	}
	if n := inFlight(ex, group); n != 0 {
		t.Errorf("error: %d in flight", n)
	}
	func() {
		defer func() {
			if v := recover(); v != "base broke" {
				t.Errorf("recovered %v", v)
			}
		}()
		send("/panic")
	}()
	if n := inFlight(ex, group); n != 0 {
		t.Errorf("panic: %d in flight", n)
	}
	if s, _ := ex.GroupStats(group); s.Failed != 2 || s.Succeeded != 2 {
		t.Errorf("%d failed, %d succeeded: want the error and the panic failed", s.Failed, s.Succeeded)
	}

	// A request refused by a full group is not sent, and its body is closed.
	held, err := send("/")
	if err != nil {
		t.Fatal(err)
	}
	body := &trackedBody{Reader: strings.NewReader("payload")}
	req, _ := http.NewRequest(http.MethodPost, "http://svc.test/", body)
	if _, err := rt.RoundTrip(req); !errors.Is(err, executor.ErrRejected) || !body.closed.Load() {
		t.Errorf("refused: %v, body closed %v", err, body.closed.Load())
	}
	held.Body.Close()
}

// A request whose context ends while it waits is not sent; one whose context
// ends while its body is open frees its slot without Close.
func TestTransportContext(t *testing.T) {
	ev := newEvents()
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)}, ev.listener())
	var sent atomic.Int64
	base := roundTripper(func(r *http.Request) (*http.Response, error) {
		sent.Add(1)
		return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("x"))}, nil
	})
	rt := httpadmit.Transport(ex, base)
	ctx1, cancel1 := context.WithCancel(context.Background())
	req1, _ := http.NewRequestWithContext(ctx1, http.MethodGet, "http://svc.test/", nil)
	resp1, err := rt.RoundTrip(req1)
	if err != nil {
		t.Fatal(err)
	}
	next(t, ev.started)

	ctx2, cancel2 := context.WithCancel(context.Background())
	req2, _ := http.NewRequestWithContext(ctx2, http.MethodGet, "http://svc.test/", nil)
	done := make(chan error)
	go func() { _, err := rt.RoundTrip(req2); done <- err }()
	next(t, ev.submitted)
	next(t, ev.submitted)
	cancel2()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled while waiting: %v", err)
	}
	if sent.Load() != 1 {
		t.Errorf("sent %d, want 1", sent.Load())
	}
	cancel1() // the open body's request ends: its slot is freed
	if e := next(t, ev.completed); e.Status != executor.Cancelled {
		t.Errorf("waiting request: %v", e.Status)
	}
	if e := next(t, ev.completed); e.Status != executor.Success {
		t.Errorf("first request: %v", e.Status)
	}
	if n := inFlight(ex, "svc.test:80"); n != 0 {
		t.Errorf("%d in flight", n)
	}
	resp1.Body.Close()
}

// A 101 response's body stays a writable connection and holds its slot until
// it is closed.
func TestTransportUpgrade(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1)})
	srv := echoUpgradeServer(t)
	client := &http.Client{Transport: httpadmit.Transport(ex, srv.Client().Transport)}
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "echo")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("status %d", resp.StatusCode)
	}
	conn, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		t.Fatalf("body %T is not writable", resp.Body)
	}
	io.WriteString(conn, "hello\n")
	if line, _ := bufio.NewReader(conn).ReadString('\n'); line != "HELLO\n" {
		t.Errorf("echo %q", line)
	}
	if n := inFlight(ex, host(t, srv.URL)); n != 1 {
		t.Errorf("%d in flight while upgraded, want 1", n)
	}
	conn.Close()
	if n := inFlight(ex, host(t, srv.URL)); n != 0 {
		t.Errorf("%d in flight after Close", n)
	}
}

// WithFailureStatus's failures and transport errors trip the host's breaker;
// an open breaker refuses with ErrRejected and breaker.ErrOpenState.
func TestTransportBreaker(t *testing.T) {
	ex := newExec(t, nil, executor.WithGroupBreaker(breaker.Settings{
		ReadyToTrip: func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 2 },
	}))
	var sent atomic.Int64
	base := roundTripper(func(r *http.Request) (*http.Response, error) {
		sent.Add(1)
		return &http.Response{StatusCode: http.StatusServiceUnavailable, Body: io.NopCloser(strings.NewReader("down"))}, nil
	})
	rt := httpadmit.Transport(ex, base, httpadmit.WithFailureStatus(func(c int) bool { return c >= 500 }))
	for range 2 {
		req, _ := http.NewRequest(http.MethodGet, "https://dep.test/", nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	req, _ := http.NewRequest(http.MethodGet, "https://dep.test/", nil)
	if _, err := rt.RoundTrip(req); !errors.Is(err, executor.ErrRejected) || !errors.Is(err, breaker.ErrOpenState) {
		t.Errorf("open breaker: %v", err)
	}
	if sent.Load() != 2 {
		t.Errorf("sent %d, want 2", sent.Load())
	}
	if s, _ := ex.GroupStats("dep.test:443"); s.Failed != 2 {
		t.Errorf("%d failed", s.Failed)
	}
}

// echoUpgradeServer answers every request 101, upgrading to a protocol
// that echoes each line upper-cased, until the client closes.
func echoUpgradeServer(t *testing.T) *httptest.Server {
	return serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		brw.Flush()
		for {
			line, err := brw.ReadString('\n')
			if err != nil {
				return
			}
			brw.WriteString(strings.ToUpper(line))
			brw.Flush()
		}
	}))
}

// A faulty base that returns neither a response nor an error gets the error
// net/http's Client would give it, not a nil dereference raised as a panic in
// RoundTrip's caller; the slot is freed and the request counts as failed.
func TestTransportNilResponseIsAnError(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1)})
	base := roundTripper(func(*http.Request) (*http.Response, error) { return nil, nil })
	client := &http.Client{Transport: httpadmit.Transport(ex, base,
		httpadmit.WithFailureStatus(func(code int) bool { return code >= 500 }))}
	var resp *http.Response
	var err error
	func() {
		defer func() {
			if v := recover(); v != nil {
				t.Errorf("RoundTrip panicked: %v", v)
			}
		}()
		resp, err = client.Get("http://svc.test/")
	}()
	if resp != nil || err == nil {
		t.Errorf("nil response from base: %v, %v; want an error", resp, err)
	}
	if s, _ := ex.GroupStats("svc.test:80"); s.InFlight != 0 || s.Failed != 1 {
		t.Errorf("%d in flight, %d failed; want 0 and 1", s.InFlight, s.Failed)
	}
}

// A Transport stacked on another (one group per destination above one per
// tenant) does not blame the destination for a request the lower one never
// sent: refused there, or whose deadline passed while it waited there, it
// counts as Cancelled, and the destination's breaker stays closed.
func TestStackedTransportLocalRefusalIsNoFailure(t *testing.T) {
	ev := newEvents()
	perTenant := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)}, ev.listener())
	perHost := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(4)}, executor.WithGroupBreaker(breaker.Settings{
		Timeout: time.Hour, ReadyToTrip: func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 1 },
	}))
	base := roundTripper(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("x"))}, nil
	})
	rt := httpadmit.Transport(perHost, httpadmit.Transport(perTenant, base, httpadmit.WithTenantHeader("X-Tenant")))
	send := func(ctx context.Context, tenant string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://svc.test/", nil)
		req.Header.Set("X-Tenant", tenant)
		return rt.RoundTrip(req)
	}
	held, err := send(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	next(t, ev.submitted)
	// a's only slot is held until the body is closed: the next request of
	// a waits, and its deadline passes there.
	ctx := adaptertest.NewExpiring()
	go func() { <-ev.submitted; ctx.Expire() }()
	if _, err := send(ctx, "a"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("deadline while waiting below: %v", err)
	}
	// A tenant key the lower Transport refuses.
	if _, err := send(context.Background(), "a b"); !errors.Is(err, httpadmit.ErrInvalidTenant) {
		t.Fatalf("invalid tenant below: %v", err)
	}
	held.Body.Close()
	if s, _ := perHost.GroupStats("svc.test:80"); s.Failed != 0 || s.Cancelled != 2 || s.Breaker != breaker.StateClosed {
		t.Errorf("destination's group: %d failed, %d cancelled, breaker %v; want 0, 2 and closed", s.Failed, s.Cancelled, s.Breaker)
	}
}

// A request admitted as its deadline passes (here while the listener is
// told it starts) is not sent, and is no failure of its destination.
func TestTransportDeadlineAtAdmissionIsNotSent(t *testing.T) {
	ctx := adaptertest.NewExpiring()
	ex := newExec(t, nil, executor.WithGroupBreaker(breaker.Settings{
		Timeout: time.Hour, ReadyToTrip: func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 1 },
	}), executor.WithListener(executor.ListenerFuncs{Started: func(executor.Event) { ctx.Expire() }}))
	var sent atomic.Int64
	base := roundTripper(func(r *http.Request) (*http.Response, error) {
		sent.Add(1)
		if err := r.Context().Err(); err != nil {
			return nil, err // as net/http's Transport fails it
		}
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
	})
	body := &trackedBody{Reader: strings.NewReader("payload")}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://svc.test/", body)
	if _, err := httpadmit.Transport(ex, base).RoundTrip(req); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("RoundTrip: %v, want DeadlineExceeded", err)
	}
	if n := sent.Load(); n != 0 || !body.closed.Load() {
		t.Errorf("sent %d, body closed %v; want 0 and true", n, body.closed.Load())
	}
	if s, _ := ex.GroupStats("svc.test:80"); s.Failed != 0 || s.Breaker != breaker.StateClosed {
		t.Errorf("%d failed, breaker %v; want 0 and closed", s.Failed, s.Breaker)
	}
}

// The error of a request whose deadline passed while it waited reads as a
// timeout, as the context's own error does: http.Client's *url.Error, and
// a net.Error check, ask the error itself.
func TestTransportQueuedDeadlineIsATimeout(t *testing.T) {
	ev := newEvents()
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)}, ev.listener())
	base := roundTripper(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("x"))}, nil
	})
	client := &http.Client{Transport: httpadmit.Transport(ex, base)}
	held, err := client.Get("http://svc.test/")
	if err != nil {
		t.Fatal(err)
	}
	next(t, ev.submitted)
	ctx := adaptertest.NewExpiring()
	go func() { <-ev.submitted; ctx.Expire() }()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://svc.test/", nil)
	_, err = client.Do(req)
	var ue *url.Error
	if !errors.As(err, &ue) || !ue.Timeout() || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("deadline while waiting: %v, want a *url.Error that is a timeout", err)
	}
	held.Body.Close()
}
