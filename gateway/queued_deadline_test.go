package gateway_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/gateway"
)

// closingContext is an expiringContext that reports a deadline: the test
// has the deadline pass (expire) when it says, whatever the time, so that
// what the gateway makes of the time it had left as it gave the backend
// the request is read deterministically.
type closingContext struct {
	*expiringContext
	at time.Time
}

func (c *closingContext) Deadline() (time.Time, bool) { return c.at, true }

// stalls are the points where a backend stalls until the request's
// deadline passes: before its answer (""), or midway through an answer the
// gateway keeps, or one longer than response.buffer_bytes, which it
// streams; each with the status the client then has: 504 while nothing of
// the answer is sent, the answer's own once it is. (The streamed answer
// has a length: one chunked, or an event stream, the proxy flushes at its
// start from a goroutine of its own, which would write to the client at
// a moment no test sets.)
var stalls = []struct {
	answer, config string
	status         int
}{
	{"", "", http.StatusGatewayTimeout},
	{"kept", "", http.StatusGatewayTimeout},
	{"streamed", "response: {buffer_bytes: 4}\n", http.StatusOK},
}

// stalling is a backend that stalls at /held until the gateway gives the
// request up (any other path is answered at once): with answer "", before
// answering, telling arrived that it has the request; else once it has
// sent part of its answer.
func stalling(t *testing.T, answer string) (url string, arrived <-chan struct{}) {
	ch := make(chan struct{}, 1)
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/held" {
			io.WriteString(w, "ok")
			return
		}
		if answer == "" {
			ch <- struct{}{}
		} else {
			w.Header().Set("Content-Length", "100")
			io.WriteString(w, "partial")
			http.NewResponseController(w).Flush()
		}
		<-r.Context().Done()
	})
	return be.URL, ch
}

// partialConn is a backend connection that has the request's deadline pass
// (expire) as the proxy reads on from it once it has had the backend's
// partial answer: as the proxy waits on the backend for the rest.
type partialConn struct {
	net.Conn
	expire  func()
	partial atomic.Bool
}

func (c *partialConn) Read(p []byte) (int, error) {
	if c.partial.Load() {
		c.expire()
	}
	n, err := c.Conn.Read(p)
	if bytes.Contains(p[:n], []byte("partial")) {
		c.partial.Store(true)
	}
	return n, err
}

// stallPastDeadline serves a GET /held for tenant a through a gateway with
// config, in front of a stalling backend (see stalling), with a
// deadline reported as left away; it has the deadline pass as the backend
// stalls, and returns the gateway and the status the client was given.
func stallPastDeadline(t *testing.T, config, answer string, left time.Duration) (*gateway.Gateway, int) {
	t.Helper()
	url, arrived := stalling(t, answer)
	g := build(t, url, minimal+config+"timeouts: {upstream: 1h}\n")
	t.Cleanup(func() { g.Close() })
	ctx := &closingContext{expiringContext: newExpiringContext(), at: time.Now().Add(left)}
	if answer != "" {
		gateway.WrapBackendConns(g, func(c net.Conn) net.Conn { return &partialConn{Conn: c, expire: ctx.expire} })
	}
	rec := httptest.NewRecorder()
	wait := serveHeld(t, g, ctx, rec)
	if answer == "" {
		select {
		case <-arrived:
		case <-time.After(bound):
			t.Fatal("the request did not reach the backend")
		}
		ctx.expire()
	}
	wait()
	return g, rec.Code
}

// serveHeld starts serving a GET /held for tenant a with ctx through g to
// w; the function it returns waits until the request has ended, cut
// (http.ErrAbortHandler) or not.
func serveHeld(t *testing.T, g http.Handler, ctx context.Context, w http.ResponseWriter) (wait func()) {
	r := httptest.NewRequestWithContext(served(ctx), http.MethodGet, "/held", nil)
	r.Header.Set("X-Tenant", "a")
	done := make(chan any, 1)
	go func() { done <- serveCut(g, w, r) }()
	return func() {
		t.Helper()
		select {
		case v := <-done:
			if v != nil && v != http.ErrAbortHandler {
				panic(v)
			}
		case <-time.After(bound):
			t.Fatal("the request did not end")
		}
	}
}

// A request admitted with little of its deadline left, the rest of
// timeouts.upstream spent waiting in its tenant's queue (there is no
// queue_timeout by default), whose deadline passes while the backend works
// on it, is answered as any (504, or its answer cut): but the backend,
// given less than half the request's timeout, was not slow, and the
// deadline counts against no breaker, whether it passed before the
// backend's answer or midway through it. Counted, a queue that grew long
// under one tenant's load opened the tenant's breaker, or, by default, the
// backend's for every tenant, though the backend answered as fast as ever.
func TestDeadlineSpentInTheQueueIsNoBackendFailure(t *testing.T) {
	for _, br := range breakers {
		for _, s := range stalls {
			t.Run(br.per+"/answer="+s.answer, func(t *testing.T) {
				// A minute left of the hour: 59 minutes spent in the queue.
				g, code := stallPastDeadline(t, br.config+s.config, s.answer, time.Minute)
				if code != s.status {
					t.Fatalf("the request past its deadline was answered %d, want %d", code, s.status)
				}
				if code, body := next(g, br.next); code != http.StatusOK {
					t.Errorf("the next request: %d %q, want 200 (no breaker open)", code, body)
				}
			})
		}
	}
}

// A backend that was given at least half the request's timeout and missed
// the deadline is held to it: a failure of the tenant's breaker, or of the
// backend's, however the rest of the time was spent.
func TestDeadlineMissedWithHalfTheTimeIsAFailure(t *testing.T) {
	for _, br := range breakers {
		for _, s := range stalls {
			t.Run(br.per+"/answer="+s.answer, func(t *testing.T) {
				// 31 minutes left of the hour: 29 spent in the queue.
				g, code := stallPastDeadline(t, br.config+s.config, s.answer, 31*time.Minute)
				if code != s.status {
					t.Fatalf("the request past its deadline was answered %d, want %d", code, s.status)
				}
				if code, body := next(g, br.next); code != http.StatusServiceUnavailable {
					t.Errorf("the next request: %d %q, want 503 (the breaker open)", code, body)
				}
			})
		}
	}
}
