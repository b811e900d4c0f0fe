package gateway_test

import (
	"bufio"
	"io"
	"net/http"
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
			const size = 64 << 20 // more than the sockets' buffers hold
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
			gw := start(t, be.URL, minimal+br.config+"timeouts: {upstream: 300ms, write: 1h}\n")
			c := dialRaw(t, gw.url)
			c.SetDeadline(time.Now().Add(bound))
			io.WriteString(c, "GET /large HTTP/1.1\r\nHost: x\r\nX-Tenant: a\r\n\r\n")
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			// The client takes nothing more until the deadline has passed,
			// then takes what the gateway sends, until it is cut.
			<-cut
			if n, err := io.Copy(io.Discard, resp.Body); err == nil {
				t.Fatalf("the client read %d bytes, the whole answer, past its deadline", n)
			}
			eventually(t, "the request to be counted", func() bool { return counted(t, gw.gw.Metrics()) == 1 })
			if resp, body := do(t, client(t), http.MethodGet, gw.url, br.next, nil); resp.StatusCode != 200 {
				t.Errorf("the next request: %d %q, want 200", resp.StatusCode, body)
			}
			if got := metric(t, gw.gw.Metrics(), "tasks_canceled_total", "kind", "request"); got != 1 {
				t.Errorf("tasks_canceled_total{kind=request} = %v, want 1 (a client that did not take its answer)", got)
			}
		})
	}
}

// A backend that stops sending its answer midway, until the request's
// deadline passes, has missed it: a failure of the tenant's breaker, or
// of the backend's, whether the answer was streamed or kept, while the
// client takes what it is sent.
func TestBackendStalledPastTheDeadlineIsAFailure(t *testing.T) {
	for _, br := range breakers {
		for _, stream := range []bool{true, false} {
			t.Run(br.per+"/stream="+strconv.FormatBool(stream), func(t *testing.T) {
				url, sent := breaking(t, stream, false)
				gw := start(t, url, minimal+br.config+"timeouts: {upstream: 200ms}\n")
				c := dialRaw(t, gw.url)
				c.SetDeadline(time.Now().Add(bound))
				io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nX-Tenant: a\r\n\r\n")
				<-sent
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body) // the client takes all it is sent, at once
				eventually(t, "the request to be counted", func() bool { return counted(t, gw.gw.Metrics()) == 1 })
				if resp, body := do(t, client(t), http.MethodGet, gw.url, br.next, nil); resp.StatusCode != 503 {
					t.Errorf("the next request: %d %q, want 503 (the breaker open)", resp.StatusCode, body)
				}
			})
		}
	}
}
