package gateway_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/gateway"
)

// A backend that stalls midway through a chunk of an event stream, until
// the request's deadline passes, missed the deadline: a failure of the
// tenant's breaker, or of the backend's, as when it stalls before its
// answer. The client took every byte it was sent at once; what the gateway
// wrote to it after the deadline (its last flush) began after the deadline
// and is no slow client's doing. Counted as the client not taking its
// answer, a stalling backend never opened a breaker and every such request
// counted as cancelled by its client.
func TestBackendStalledMidChunkPastTheDeadlineIsAFailure(t *testing.T) {
	for _, br := range breakers {
		t.Run(br.per, func(t *testing.T) {
			be := backend(t, func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/held" {
					io.WriteString(w, "ok")
					return
				}
				c, rw, err := http.NewResponseController(w).Hijack()
				if err != nil {
					t.Error(err)
					return
				}
				defer c.Close()
				// A chunk of 256 bytes announced, 7 sent.
				io.WriteString(rw, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n100\r\npartial")
				rw.Flush()
				io.Copy(io.Discard, bufio.NewReader(c)) // until the gateway gives the request up
			})
			g := build(t, be.URL, minimal+br.config+"timeouts: {upstream: 1h}\n")
			t.Cleanup(func() { g.Close() })
			// 31 minutes left of the hour: the backend is held to the deadline.
			ctx := &closingContext{expiringContext: newExpiringContext(), at: time.Now().Add(31 * time.Minute)}
			rec := &flushCounter{ResponseRecorder: httptest.NewRecorder()}
			// The deadline passes as the proxy waits on the backend for the
			// rest of the chunk (net/http's chunked reader returns "partial"
			// only with the read's error), once the proxy's first flush,
			// which it runs at the answer's start on a goroutine of its own,
			// has reached the client: a flush under way as the deadline
			// passes is the client's time.
			expire := func() {
				for end := time.Now().Add(bound); rec.flushes.Load() == 0; time.Sleep(time.Millisecond) {
					if time.Now().After(end) {
						t.Error("the proxy did not flush the answer's start")
						break
					}
				}
				ctx.expire()
			}
			gateway.WrapBackendConns(g, func(c net.Conn) net.Conn { return &partialConn{Conn: c, expire: expire} })
			serveHeld(t, g, ctx, rec)()
			if got := rec.Body.String(); got != "partial" {
				t.Fatalf("the client had %q, want %q", got, "partial")
			}
			if code, body := next(g, br.next); code != http.StatusServiceUnavailable {
				t.Errorf("the next request: %d %q, want 503 (the breaker open)", code, body)
			}
			if got := metric(t, g.Metrics(), "tasks_canceled_total", "kind", "request"); got != 0 {
				t.Errorf("tasks_canceled_total{kind=request} = %v, want 0 (the client took its answer)", got)
			}
		})
	}
}

// flushCounter is a client's writer that counts its flushes.
type flushCounter struct {
	*httptest.ResponseRecorder
	flushes atomic.Int32
}

func (w *flushCounter) Flush() {
	w.ResponseRecorder.Flush()
	w.flushes.Add(1)
}
