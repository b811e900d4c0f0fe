package gateway_test

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/groupexec/groupexec/gateway"
)

// expiringContext is a request's context whose deadline passes when the
// test says so (expire): from then on it is done, with
// context.DeadlineExceeded.
type expiringContext struct {
	context.Context
	done chan struct{}
	once sync.Once
}

func newExpiringContext() *expiringContext {
	return &expiringContext{Context: context.Background(), done: make(chan struct{})}
}

func (c *expiringContext) expire()               { c.once.Do(func() { close(c.done) }) }
func (c *expiringContext) Done() <-chan struct{} { return c.done }

func (c *expiringContext) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// stalledClient is a client's writer whose connection, once taken over for
// a switch, takes no byte: the request's deadline passes as the 101 is
// being written, and the write waits until the gateway closes the
// connection.
type stalledClient struct {
	h    http.Header
	ctx  *expiringContext
	peer net.Conn // the client's end, which never reads
}

func (w *stalledClient) Header() http.Header         { return w.h }
func (w *stalledClient) Write(p []byte) (int, error) { return len(p), nil }
func (w *stalledClient) WriteHeader(int)             {}

func (w *stalledClient) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, peer := net.Pipe()
	w.peer = peer
	sc := &stalledConn{Conn: c, expire: w.ctx.expire}
	return sc, bufio.NewReadWriter(bufio.NewReader(sc), bufio.NewWriter(sc)), nil
}

// stalledConn has the request's deadline pass at its first write, which
// then waits for the connection to close (its peer never reads).
type stalledConn struct {
	net.Conn
	expire func()
}

func (c *stalledConn) Write(p []byte) (int, error) {
	c.expire()
	return c.Conn.Write(p)
}

// A request whose deadline passes once its backend has answered 101
// Switching Protocols, while the switch is being written to the client, is
// an upgrade ended at its deadline, as one whose client goes silent after
// the switch is: the backend answered in time. It is counted as answered
// with 101, not as a backend that missed the deadline (504, an upstream
// timeout, and a failure of the tenant's breaker), whatever the order in
// which the gateway reads the deadline and the switch.
func TestDeadlineAfterTheSwitchIsNoBackendTimeout(t *testing.T) {
	ctx := newExpiringContext()
	w := &stalledClient{h: http.Header{}, ctx: ctx}
	g := serveSwitch(t, ctx, w, &w.peer)
	if got := metric(t, g.Metrics(), requestsTotal, "code", "504"); got != 0 {
		t.Errorf("%s{code=504} = %v, want 0", requestsTotal, got)
	}
	if got := metric(t, g.Metrics(), "io_timeouts_total", "op", "upstream"); got != 0 {
		t.Errorf("io_timeouts_total{op=upstream} = %v, want 0", got)
	}
}

// serveSwitch serves an upgrade for tenant a, with ctx, to w, through a
// gateway whose tenant breaker trips on the first failure, in front of a
// backend that switches; peer is where w keeps the client's end of the
// connection taken over. It checks that the request was counted as
// answered with 101, and that the tenant's next request is served (its
// breaker closed), and returns the gateway.
func serveSwitch(t *testing.T, ctx context.Context, w http.ResponseWriter, peer *net.Conn) *gateway.Gateway {
	t.Helper()
	url := switchingBackend(t, func(*http.Request) string { return "plain" })
	g := build(t, url, minimal+"breaker: {per: tenant, consecutive_failures: 1, timeout: 1h}\n")
	t.Cleanup(func() { g.Close() })
	r := httptest.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
	r.Header.Set("Connection", "Upgrade")
	r.Header.Set("Upgrade", "test")
	r.Header.Set("X-Tenant", "a")
	if v := serveCut(g, w, r); v != nil && v != http.ErrAbortHandler {
		panic(v) // the gateway has the server cut a request it gives up
	}
	if *peer == nil {
		t.Fatal("the backend's switch never reached the client's connection")
	}
	(*peer).Close()
	if got := metric(t, g.Metrics(), requestsTotal, "code", "101"); got != 1 {
		t.Errorf("%s{code=101} = %v, want 1", requestsTotal, got)
	}
	rec := httptest.NewRecorder()
	next := httptest.NewRequest(http.MethodGet, "/", nil)
	next.Header.Set("X-Tenant", "a")
	g.ServeHTTP(rec, next)
	if rec.Code != http.StatusOK || rec.Body.String() != "plain" {
		t.Errorf("the tenant's next request: %d %q, want 200 \"plain\"", rec.Code, rec.Body)
	}
	return g
}

// abortingClient is a stalledClient whose connection, once taken over for
// a switch, has the drain abort the request (cause gateway.ErrAborted) at
// its first write: the drain's deadline passes as the 101 is being written.
type abortingClient struct {
	stalledClient
	abort context.CancelCauseFunc
}

func (w *abortingClient) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, peer := net.Pipe()
	w.peer = peer
	sc := &stalledConn{Conn: c, expire: func() { w.abort(gateway.ErrAborted) }}
	return sc, bufio.NewReadWriter(bufio.NewReader(sc), bufio.NewWriter(sc)), nil
}

// A request whose backend answered 101 Switching Protocols, aborted by the
// drain as the switch is being written to the client, is counted as
// answered with 101, and as aborted: the backend answered, and the drain
// cut the upgrade. Counted 503 (the drain's refusal of a request it never
// ran), the requests' metrics said the gateway refused an upgrade whose
// switch it had sent.
func TestDrainDuringTheSwitchIsCountedAsTheSwitch(t *testing.T) {
	ctx, abort := context.WithCancelCause(context.Background())
	defer abort(nil)
	w := &abortingClient{stalledClient: stalledClient{h: http.Header{}}, abort: abort}
	g := serveSwitch(t, ctx, w, &w.peer)
	if got := metric(t, g.Metrics(), requestsTotal, "code", "503"); got != 0 {
		t.Errorf("%s{code=503} = %v, want 0", requestsTotal, got)
	}
	if got := metric(t, g.Metrics(), "tasks_aborted_total", "kind", "request"); got != 1 {
		t.Errorf("tasks_aborted_total{kind=request} = %v, want 1", got)
	}
}
