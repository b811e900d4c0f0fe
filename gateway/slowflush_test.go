package gateway_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// slowFlusher is a client's writer that buffers what it is written at
// once, as net/http's does, and takes nothing of it until the request's
// deadline has passed: its first flush has the deadline pass (expire), and
// returns only once the gateway has given the backend's request up (cut).
// An event stream's small events reach a slow client so: the write fills
// the server's buffer, the flush waits on the client.
type slowFlusher struct {
	h       http.Header
	expire  func()
	cut     <-chan struct{}
	flushed bool
}

func (w *slowFlusher) Header() http.Header         { return w.h }
func (w *slowFlusher) WriteHeader(int)             {}
func (w *slowFlusher) Write(p []byte) (int, error) { return len(p), nil }

func (w *slowFlusher) Flush() {
	if w.flushed {
		return
	}
	w.flushed = true
	w.expire()
	select {
	case <-w.cut:
	case <-time.After(bound):
	}
}

// A client that takes an event stream so slowly that the request's
// deadline passes while the gateway flushes an event to it, the backend
// having sent it at once, is the client not taking its answer: it counts
// against no breaker, whether the gateway waited on it in a write or in a
// flush.
func TestSlowFlushPastTheDeadlineIsNoBackendFailure(t *testing.T) {
	for _, br := range breakers {
		t.Run(br.per, func(t *testing.T) {
			cut := make(chan struct{})
			var once sync.Once
			be := backend(t, func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/events" {
					io.WriteString(w, "ok")
					return
				}
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, "data: x\n\n")
				http.NewResponseController(w).Flush()
				<-r.Context().Done() // the gateway gave the request up at its deadline
				once.Do(func() { close(cut) })
			})
			g := build(t, be.URL, minimal+br.config+"timeouts: {upstream: 1h}\n")
			t.Cleanup(func() { g.Close() })
			ctx := newExpiringContext()
			r := httptest.NewRequestWithContext(served(ctx), http.MethodGet, "/events", nil)
			r.Header.Set("X-Tenant", "a")
			if v := serveCut(g, &slowFlusher{h: http.Header{}, expire: ctx.expire, cut: cut}, r); v != http.ErrAbortHandler {
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
