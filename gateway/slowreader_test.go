package gateway_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"
)

// breakers are the two breaker configs, each with the tenant of the request
// that meets the breaker a failure opened: with breaker.per: tenant, the
// failing request's own; by default, its backend's, which every tenant's
// next request meets.
var breakers = []struct{ per, config, next string }{
	{"tenant", "breaker: {per: tenant, consecutive_failures: 1, timeout: 1h}\n", "a"},
	{"backend", "breaker: {consecutive_failures: 1, timeout: 1h}\n", "b"},
}

// slowClient is a client's writer that takes nothing of its answer until
// the request's deadline has passed: its first write has the deadline pass
// (expire), and returns only once the gateway has given the backend's
// request up (cut). So the deadline passes while the gateway waits on the
// client, whatever the machine's pace.
type slowClient struct {
	h      http.Header
	expire func()
	cut    <-chan struct{}
}

func (w *slowClient) Header() http.Header { return w.h }
func (w *slowClient) WriteHeader(int)     {}
func (w *slowClient) Flush()              {}

func (w *slowClient) Write(p []byte) (int, error) {
	w.expire()
	select {
	case <-w.cut:
		return len(p), nil
	case <-time.After(bound):
		return 0, errors.New("the gateway did not give the backend's request up at the deadline")
	}
}

// A client that takes a streamed answer so slowly that the request's
// deadline (timeouts.upstream) passes while the gateway waits on it, the
// backend having sent its answer as fast as the gateway took it, has its
// answer cut at the deadline: that is the client not taking its answer,
// which counts against no breaker. It was counted as the backend's missed
// deadline, a failure of the tenant's breaker and of the backend's: slow
// readers of one tenant opened the backend's breaker for every tenant.
func TestSlowReaderPastTheDeadlineIsNoBackendFailure(t *testing.T) {
	for _, br := range breakers {
		t.Run(br.per, func(t *testing.T) {
			const size = 1 << 20 // more than response.buffer_bytes: streamed
			cut := make(chan struct{})
			var once sync.Once
			be := backend(t, func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/large" {
					io.WriteString(w, "ok")
					return
				}
				w.Header().Set("Content-Length", strconv.Itoa(size))
				chunk := make([]byte, 64<<10)
				for sent := 0; sent < size; sent += len(chunk) {
					if _, err := w.Write(chunk); err != nil {
						break
					}
				}
				<-r.Context().Done() // the gateway gave the request up at its deadline
				once.Do(func() { close(cut) })
			})
			g := build(t, be.URL, minimal+br.config+"timeouts: {upstream: 1h}\n")
			t.Cleanup(func() { g.Close() })
			ctx := newExpiringContext()
			r := httptest.NewRequestWithContext(served(ctx), http.MethodGet, "/large", nil)
			r.Header.Set("X-Tenant", "a")
			if v := serveCut(g, &slowClient{h: http.Header{}, expire: ctx.expire, cut: cut}, r); v != http.ErrAbortHandler {
				t.Fatalf("the answer past its deadline ended with %v, want the connection cut (http.ErrAbortHandler)", v)
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

// served returns ctx as that of a request an http.Server serves: the
// proxy has the server cut an answer it cannot finish only for such a
// request, and returns, as if it had finished it, for one it takes for a
// test's (httputil.ReverseProxy reads http.ServerContextKey).
func served(ctx context.Context) context.Context {
	return context.WithValue(ctx, http.ServerContextKey, &http.Server{})
}

// serveCut serves r through g to w, and returns what ServeHTTP panicked
// with: http.ErrAbortHandler when the gateway has the server cut the
// connection; nil if it returned.
func serveCut(g http.Handler, w http.ResponseWriter, r *http.Request) (v any) {
	defer func() { v = recover() }()
	g.ServeHTTP(w, r)
	return nil
}

// next serves tenant's next request through g, and returns its status.
func next(g http.Handler, tenant string) (int, string) {
	rec := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("X-Tenant", tenant)
	g.ServeHTTP(rec, r)
	return rec.Code, rec.Body.String()
}

// A backend that stops sending its answer midway, until the request's
// deadline passes, has missed it: a failure of the tenant's breaker, or
// of the backend's, whether the answer was streamed or kept, while the
// client takes what it is sent. The deadline passes as the gateway waits
// on the backend for the rest (stallPastDeadline), whatever the machine's
// pace.
func TestBackendStalledPastTheDeadlineIsAFailure(t *testing.T) {
	for _, br := range breakers {
		for _, s := range stalls[1:] {
			t.Run(br.per+"/answer="+s.answer, func(t *testing.T) {
				// The whole timeout left: the backend had all of it.
				g, code := stallPastDeadline(t, br.config+s.config, s.answer, time.Hour)
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
