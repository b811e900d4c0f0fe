package gateway_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/gateway"
)

// In-flight requests finish during the drain; /readyz fails meanwhile; the
// listener stops taking connections; nothing is aborted.
func TestDrainFinishesInFlight(t *testing.T) {
	g, gw := gated(t, minimal+"limits: {max_concurrency_per_group: 8}\ndrain_timeout: 1m\n")
	c, admin := client(t), client(t)
	if code, _ := get(t, admin, gw.admin+"/readyz"); code != 200 {
		t.Fatalf("readyz before drain: %d", code)
	}
	const n = 3
	var codes []<-chan int
	for range n {
		codes = append(codes, goDo(t, c, gw.url, "a"))
	}
	g.await(t, n)

	stopped := make(chan error, 1)
	go func() { stopped <- gw.stop() }()
	eventually(t, "readyz to fail", func() bool {
		code, body := get(t, admin, gw.admin+"/readyz")
		return code == 503 && body == "not ready: draining"
	})
	if got := metric(t, gw.gw.Metrics(), "gateway_degraded"); got != 1 {
		t.Errorf("gateway_degraded during drain = %v", got)
	}
	eventually(t, "the proxy listener to close", func() bool {
		resp, err := c.Get(gw.url)
		if err == nil {
			resp.Body.Close() // a 503 from before the listener closed
		}
		return err != nil
	})

	close(g.release)
	for _, done := range codes {
		if code := <-done; code != 200 {
			t.Errorf("in-flight request got %d", code)
		}
	}
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if got := metric(t, gw.gw.Metrics(), "tasks_aborted_total", "kind", "request"); got != 0 {
		t.Errorf("tasks_aborted_total = %v", got)
	}
}

// Requests still running at the drain deadline are cancelled and counted;
// the backend sees its requests cancelled; Serve returns nil.
func TestDrainAbortsStragglers(t *testing.T) {
	g, gw := gated(t, minimal+"limits: {max_concurrency_per_group: 8}\ndrain_timeout: 50ms\n") // never released: every request is a straggler
	c := client(t)
	const n = 2
	codes := make(chan int, n)
	for range n {
		go func() { codes <- statusOf(c, gw.url) }()
	}
	g.await(t, n)
	if err := gw.stop(); err != nil {
		t.Fatal(err)
	}
	for range n {
		if code := <-codes; code != 503 && code != 0 {
			t.Errorf("straggler got %d, want 503 or a closed connection", code)
		}
	}
	if got := metric(t, gw.gw.Metrics(), "tasks_aborted_total", "kind", "request"); got != n {
		t.Errorf("tasks_aborted_total = %v, want %d", got, n)
	}
}

// With drain_delay, a shutdown first fails /readyz while the gateway goes on
// serving as usual, listener open, for that long; then it drains.
func TestDrainDelay(t *testing.T) {
	be := backend(t, func(http.ResponseWriter, *http.Request) {})
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	gw := start(t, be.URL, minimal+"drain_delay: 30s\n", gateway.WithClock(clk))
	c, admin := client(t), client(t)
	stopped := make(chan error, 1)
	go func() { stopped <- gw.stop() }()
	eventually(t, "readyz to fail", func() bool {
		code, body := get(t, admin, gw.admin+"/readyz")
		return code == 503 && body == "not ready: draining"
	})
	for i := range 3 {
		if resp, body := do(t, c, http.MethodGet, gw.url, "a", nil); resp.StatusCode != 200 {
			t.Fatalf("request %d during the drain delay: %d %q", i, resp.StatusCode, body)
		}
	}
	select {
	case err := <-stopped:
		t.Fatalf("Serve returned before the drain delay passed: %v", err)
	default:
	}
	clk.Advance(30 * time.Second)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(gw.url); err == nil {
		t.Error("the listener is still open after the drain")
	}
}

// An admin client that holds a connection open without finishing its
// request (its headers a byte at a time, or none) is cut off when Serve
// returns: the admin server's 1s shutdown does not leave it open, with
// the server's goroutine reading it, until admin's header timeout.
func TestServeClosesAdminConnections(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {})
	// The header timeout, which would close the connection by itself, is
	// past any wait here.
	gw := start(t, be.URL, minimal+"timeouts: {read_header: 1h}\n")
	c := dialRaw(t, gw.admin)
	io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: x\r\n") // and never the blank line
	// The server has the connection once it has read from it: a first
	// complete request on another shows the admin server is serving.
	if code, _ := get(t, client(t), gw.admin+"/healthz"); code != 200 {
		t.Fatalf("/healthz: %d", code)
	}
	if err := gw.stop(); err != nil {
		t.Fatal(err)
	}
	// The connection is closed by now, so the read returns at once; the
	// deadline only bounds the wait if it is not. A short one would fire
	// by itself if the test were descheduled before the read.
	c.SetReadDeadline(time.Now().Add(bound))
	if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("the admin connection is still open after Serve returned (read: %v)", err)
	}
}

// Every 503 draining closes its connection, as the one for a request
// arriving during the drain does: here a request running and one waiting
// in its group when a gateway served by a server of its own (not Serve,
// whose shutdown closes connections anyway) is closed. Kept open, the
// client would send its next request to a gateway that takes none.
func TestDrainingAnswersCloseConnection(t *testing.T) {
	g := newGate()
	gw := build(t, backend(t, g.ServeHTTP).URL, minimal+"limits: {max_concurrency_per_group: 1}\n")
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	answers := make(chan *http.Response, 2)
	send := func() {
		c := dialRaw(t, srv.URL)
		c.SetDeadline(time.Now().Add(bound))
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nX-Tenant: a\r\n\r\n")
		go func() {
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Errorf("no answer: %v", err)
				answers <- nil
				return
			}
			body, _ := io.ReadAll(resp.Body)
			if !strings.Contains(string(body), `"error":"draining"`) {
				t.Errorf("%d %q, want draining", resp.StatusCode, body) // refusal's t.Fatal is the test goroutine's
			}
			answers <- resp
		}()
	}
	send()
	g.await(t, 1) // running
	send()
	eventually(t, "the second request to wait", func() bool {
		s, _ := gw.Executor().GroupStats("a")
		return s.Waiting == 1
	})
	gw.Close()
	for range 2 {
		resp := <-answers
		if resp == nil {
			continue
		}
		if resp.StatusCode != http.StatusServiceUnavailable || !resp.Close {
			t.Errorf("%d, close %v; want 503 draining closing the connection", resp.StatusCode, resp.Close)
		}
	}
}

// A running request that the executor's shutdown cancels before the
// abort reaches it is answered 503 draining too, closing its connection:
// Close aborts a request served by a server of its own on a goroutine of
// the abort's, and then shuts the executor down at once, so either may
// cancel the request first. Taken for a client that went away, it was
// answered nothing: an empty 200, its connection kept.
func TestRequestCancelledByShutdownAnswersDraining(t *testing.T) {
	g := newGate()
	gw := build(t, backend(t, g.ServeHTTP).URL, minimal)
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	c := dialRaw(t, srv.URL)
	c.SetDeadline(time.Now().Add(bound))
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nX-Tenant: a\r\n\r\n")
	g.await(t, 1) // running
	// The executor alone, as when its shutdown wins the race with the
	// abort: the request's own context is not cancelled.
	if err := gw.Executor().Close(); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusServiceUnavailable || !resp.Close || !strings.Contains(string(body), `"error":"draining"`) {
		t.Errorf("%d %q, close %v; want 503 draining closing the connection", resp.StatusCode, body, resp.Close)
	}
	gw.Close()
}

// Requests that the executor's shutdown cancels or refuses before Close's
// abort reaches their contexts count as aborted, as those the abort
// reaches first do, never as cancelled by their clients: running, its
// answer not yet started (proxyError) or streaming (the answer broken
// off), or waiting in its group. As in
// TestRequestCancelledByShutdownAnswersDraining, the executor is closed
// alone, so that the abort never comes.
func TestRequestsCancelledByShutdownCountAborted(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream bool // the running request's answer has started, streamed
		queued bool // a second request waits in the group
	}{
		{name: "running"},
		{name: "streaming", stream: true},
		{name: "queued", queued: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGate()
			url := backend(t, g.ServeHTTP).URL
			var sent <-chan struct{}
			if tc.stream {
				url, sent = breaking(t, true, false)
			}
			gw := build(t, url, minimal+"limits: {max_concurrency_per_group: 1}\n")
			t.Cleanup(func() { gw.Close() })
			srv := httptest.NewServer(gw)
			t.Cleanup(srv.Close)
			send := func() net.Conn {
				c := dialRaw(t, srv.URL)
				c.SetDeadline(time.Now().Add(bound))
				io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nX-Tenant: a\r\n\r\n")
				return c
			}
			c := send()
			if tc.stream {
				<-sent
				// Its status is out: the answer has started, and the proxy
				// copies its body.
				if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil || resp.StatusCode != 200 {
					t.Fatalf("streamed answer: %v %v", resp, err)
				}
			} else {
				g.await(t, 1) // running
			}
			want := 1.0
			if tc.queued {
				send()
				eventually(t, "the second request to wait", func() bool {
					s, _ := gw.Executor().GroupStats("a")
					return s.Waiting == 1
				})
				want = 2
			}
			if err := gw.Executor().Close(); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the requests to leave the gateway", func() bool {
				return metric(t, gw.Metrics(), inGatewayGauge) == 0
			})
			if got := metric(t, gw.Metrics(), "tasks_aborted_total", "kind", "request"); got != want {
				t.Errorf("tasks_aborted_total{kind=request} = %v, want %v", got, want)
			}
			for _, kind := range []string{"request", "queued"} {
				if got := metric(t, gw.Metrics(), "tasks_canceled_total", "kind", kind); got != 0 {
					t.Errorf("tasks_canceled_total{kind=%s} = %v, want 0: no client went away", kind, got)
				}
			}
		})
	}
}

// drain_timeout reloads in place, also during drain_delay: a drain reads it
// once the delay has passed, not as the shutdown begins. A request still
// running is cut off after the drain_timeout in force then.
func TestDrainTimeoutReloadedDuringDelay(t *testing.T) {
	g := newGate()
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	gw := start(t, backend(t, g.ServeHTTP).URL, minimal+"drain_delay: 30s\ndrain_timeout: 1h\n", gateway.WithClock(clk))
	c, admin := client(t), client(t)
	codes := make(chan int, 1)
	go func() { codes <- statusOf(c, gw.url) }()
	g.await(t, 1) // never released: it runs until the drain cuts it off
	stopped := make(chan error, 1)
	go func() { stopped <- gw.stop() }()
	eventually(t, "readyz to fail", func() bool {
		code, _ := get(t, admin, gw.admin+"/readyz")
		return code == 503
	})
	cfg := *gw.gw.Config()
	cfg.DrainTimeout = 50 * time.Millisecond
	if err := gw.gw.Reload(&cfg); err != nil {
		t.Fatal(err)
	}
	clk.Advance(30 * time.Second)
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(bound):
		t.Fatal("the drain waits on the drain_timeout it began with (1h), not the reloaded one (50ms)")
	}
	if code := <-codes; code != 503 && code != 0 {
		t.Errorf("the request cut off got %d, want 503 or a closed connection", code)
	}
}

// statusOf GETs url and returns the answer's status, or 0 if the
// connection was closed under the request, as a drain may close it.
func statusOf(c *http.Client, url string) int {
	resp, err := c.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// A request whose body is still coming at the drain deadline is in flight
// as one at its backend is: aborted, counted in
// tasks_aborted_total{kind=request} (and requests_total as the 503 a
// drained request is answered), never as a body its client got wrong
// (400 bad_body, rejected_total{reason=bad-body}) because the drain closed
// its connection under it.
func TestDrainAbortsARequestReceivingItsBody(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) })
	gw := start(t, be.URL, minimal+"drain_timeout: 50ms\ntimeouts: {read: 1h}\n")
	m := gw.gw.Metrics()
	c := dialRaw(t, gw.url)
	io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nX-Tenant: a\r\nContent-Length: 10\r\n\r\nhalf")
	eventually(t, "the request in the gateway", func() bool { return metric(t, m, inGatewayGauge) == 1 })
	if err := gw.stop(); err != nil {
		t.Fatal(err)
	}
	if got := metric(t, m, "rejected_total", "reason", "bad-body"); got != 0 {
		t.Errorf("rejected_total{reason=bad-body} = %v, want 0", got)
	}
	if got := metric(t, m, "tasks_aborted_total", "kind", "request"); got != 1 {
		t.Errorf("tasks_aborted_total{kind=request} = %v, want 1", got)
	}
	for code, want := range map[string]float64{"400": 0, "503": 1} {
		if got := metric(t, m, requestsTotal, "code", code); got != want {
			t.Errorf("requests_total{code=%s} = %v, want %v", code, got, want)
		}
	}
}
