package gateway_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/gateway"
)

// lateContext is a request's context whose deadline the test moves, and
// which never ends by itself: a context whose deadline has passed by the
// clock while its timer has not fired yet, as on a loaded machine.
type lateContext struct {
	context.Context
	at atomic.Int64 // the deadline, in UnixNano
}

func (c *lateContext) Deadline() (time.Time, bool) { return time.Unix(0, c.at.Load()), true }

// pass moves the deadline just behind the clock.
func (c *lateContext) pass() { c.at.Store(time.Now().Add(-time.Millisecond).UnixNano()) }

// brokenConn is a backend connection that breaks off once the request's
// deadline has passed by the clock: with answer "", at its first read
// after the request is written; else at the read after the one that
// brought the backend's partial answer (see stalling).
type brokenConn struct {
	net.Conn
	ctx     *lateContext
	answer  string
	written chan struct{}
	once    sync.Once
	partial atomic.Bool
}

func (c *brokenConn) Write(p []byte) (int, error) {
	c.once.Do(func() { close(c.written) })
	return c.Conn.Write(p)
}

func (c *brokenConn) Read(p []byte) (int, error) {
	if c.answer == "" {
		<-c.written
	}
	if c.answer == "" || c.partial.Load() {
		c.ctx.pass()
		return 0, errors.New("connection reset by peer")
	}
	n, err := c.Conn.Read(p)
	if bytes.Contains(p[:n], []byte("partial")) {
		c.partial.Store(true)
	}
	return n, err
}

// breakAfterDeadline serves a GET /held for tenant a through a gateway
// with config, in front of a stalling backend whose connection breaks off
// (brokenConn) once the deadline, reported as left away at first, has
// passed by the clock; it returns the gateway and the status the client
// was given. Later connections to the backend are left alone.
func breakAfterDeadline(t *testing.T, config, answer string, left time.Duration) (*gateway.Gateway, int) {
	t.Helper()
	url, _ := stalling(t, answer)
	g := build(t, url, minimal+config+"timeouts: {upstream: 1h}\n")
	t.Cleanup(func() { g.Close() })
	ctx := &lateContext{Context: context.Background()}
	ctx.at.Store(time.Now().Add(left).UnixNano())
	var dialed atomic.Bool
	gateway.WrapBackendConns(g, func(c net.Conn) net.Conn {
		if dialed.Swap(true) {
			return c // a later request's
		}
		return &brokenConn{Conn: c, ctx: ctx, answer: answer, written: make(chan struct{})}
	})
	rec := httptest.NewRecorder()
	serveHeld(t, g, ctx, rec)()
	return g, rec.Code
}

// A backend whose connection breaks off once the request's deadline has
// passed by the clock, before the context's timer has fired, is read as
// one that missed the deadline, as it is once the timer has fired: 504
// (or the answer cut, once part of it is out), an upstream timeout, and a
// failure of the tenant's breaker, or of the backend's, only when the
// backend was held to the deadline (heldToDeadline). Read as a backend
// error, the request was answered 502, and its failure counted even where
// the backend was given too little of the deadline, the rest spent in its
// tenant's queue.
func TestBackendBrokenOffPastTheClocksDeadlineIsATimeout(t *testing.T) {
	for _, br := range breakers {
		for _, s := range stalls {
			for _, held := range []bool{true, false} {
				name := br.per + "/answer=" + s.answer + "/held=false"
				left := time.Minute // 59 minutes of the hour spent in the queue
				if held {
					name, left = br.per+"/answer="+s.answer+"/held=true", time.Hour
				}
				t.Run(name, func(t *testing.T) {
					g, code := breakAfterDeadline(t, br.config+s.config, s.answer, left)
					if code != s.status {
						t.Fatalf("the request broken off past its deadline was answered %d, want %d", code, s.status)
					}
					want := 0.0
					if s.status == http.StatusGatewayTimeout {
						want = 1
					}
					if got := metric(t, g.Metrics(), "io_timeouts_total", "op", "upstream"); got != want {
						t.Errorf("io_timeouts_total{op=upstream} = %v, want %v", got, want)
					}
					wantNext := http.StatusOK
					if held {
						wantNext = http.StatusServiceUnavailable // the breaker open
					}
					if code, body := next(g, br.next); code != wantNext {
						t.Errorf("the next request: %d %q, want %d", code, body, wantNext)
					}
				})
			}
		}
	}
}

// pastDeadlineConn is a backend connection that breaks off every read
// once the request's deadline has passed by the clock.
type pastDeadlineConn struct {
	net.Conn
	ctx *lateContext
}

func (c *pastDeadlineConn) Read(p []byte) (int, error) {
	if dl, _ := c.ctx.Deadline(); !time.Now().Before(dl) {
		return 0, errors.New("connection reset by peer")
	}
	return c.Conn.Read(p)
}

// lateClient is a client's writer whose writes take so long that the
// request's deadline passes by the clock during each.
type lateClient struct {
	h   http.Header
	ctx *lateContext
}

func (w *lateClient) Header() http.Header { return w.h }
func (w *lateClient) WriteHeader(int)     {}
func (w *lateClient) Flush()              {}

func (w *lateClient) Write(p []byte) (int, error) {
	w.ctx.pass()
	return len(p), nil
}

// A client so slow to take a streamed answer that the request's deadline
// passes by the clock while the gateway writes to it, before the
// context's timer fires, is the client's slowness, as it is once the timer
// has fired (TestSlowReaderPastTheDeadlineIsNoBackendFailure): the backend
// read after it is cut off, and neither breaker counts it. Read with the
// context's error alone, the write was not late, and the cut read was the
// backend's failure.
func TestSlowReaderPastTheClocksDeadlineIsNoBackendFailure(t *testing.T) {
	for _, br := range breakers {
		t.Run(br.per, func(t *testing.T) {
			const size = 1 << 20
			be := backend(t, func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/large" {
					io.WriteString(w, "ok")
					return
				}
				w.Header().Set("Content-Length", strconv.Itoa(size))
				w.Write(make([]byte, size))
			})
			g := build(t, be.URL, minimal+br.config+"response: {buffer_bytes: 4}\ntimeouts: {upstream: 1h}\n")
			t.Cleanup(func() { g.Close() })
			ctx := &lateContext{Context: context.Background()}
			ctx.at.Store(time.Now().Add(time.Hour).UnixNano())
			var dialed atomic.Bool
			gateway.WrapBackendConns(g, func(c net.Conn) net.Conn {
				if dialed.Swap(true) {
					return c
				}
				return &pastDeadlineConn{Conn: c, ctx: ctx}
			})
			r := httptest.NewRequestWithContext(served(ctx), http.MethodGet, "/large", nil)
			r.Header.Set("X-Tenant", "a")
			if v := serveCut(g, &lateClient{h: http.Header{}, ctx: ctx}, r); v != http.ErrAbortHandler {
				t.Fatalf("the answer cut past its deadline ended with %v, want the connection cut (http.ErrAbortHandler)", v)
			}
			if code, body := next(g, br.next); code != http.StatusOK {
				t.Errorf("the next request: %d %q, want 200", code, body)
			}
			if got := metric(t, g.Metrics(), "tasks_canceled_total", "kind", "request"); got != 1 {
				t.Errorf("tasks_canceled_total{kind=request} = %v, want 1 (a client that did not take its answer)", got)
			}
		})
	}
}

// A request whose deadline has passed by the clock as the transport would
// send it, before the context's timer has fired (it waited in its
// tenant's queue until then, on a loaded machine), is not sent: no try
// starts past the deadline (docs/gateway.md, Timeouts and retries), and
// the request is answered 504, an upstream timeout, counted against no
// breaker. Sent, on a kept-alive connection (a dial given a deadline
// already passed fails by itself), it reached the backend, which worked
// on a request already given up.
func TestRequestPastTheClocksDeadlineNotSent(t *testing.T) {
	for _, br := range breakers {
		t.Run(br.per, func(t *testing.T) {
			var got atomic.Int32
			be := backend(t, func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/held" {
					got.Add(1)
				}
				io.WriteString(w, "ok")
			})
			g := build(t, be.URL, minimal+br.config+"timeouts: {upstream: 1h}\n")
			t.Cleanup(func() { g.Close() })
			// A first request leaves the gateway a connection to the
			// backend to reuse.
			if code, body := next(g, "a"); code != http.StatusOK {
				t.Fatalf("first: %d %q", code, body)
			}
			ctx := &lateContext{Context: context.Background()}
			ctx.pass()
			rec := httptest.NewRecorder()
			serveHeld(t, g, ctx, rec)()
			if n := got.Load(); n != 0 {
				t.Errorf("the backend got the request past its deadline %d times, want 0", n)
			}
			if rec.Code != http.StatusGatewayTimeout {
				t.Errorf("the request past its deadline was answered %d %q, want 504", rec.Code, rec.Body.String())
			}
			if got := metric(t, g.Metrics(), "io_timeouts_total", "op", "upstream"); got != 1 {
				t.Errorf("io_timeouts_total{op=upstream} = %v, want 1", got)
			}
			if code, body := next(g, br.next); code != http.StatusOK {
				t.Errorf("the next request: %d %q, want 200 (no breaker open)", code, body)
			}
		})
	}
}
