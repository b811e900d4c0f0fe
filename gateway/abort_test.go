package gateway_test

import (
	"bufio"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/groupexec/groupexec/gateway"
)

// breaking is a backend whose first request gets its headers and a first
// part of its body, flushed, and then, if cut, its connection closed, else
// nothing more until the gateway gives the request up. With stream, the
// answer is an event stream, which the gateway streams; else one of a
// length, which it keeps. Every later request is answered "ok".
func breaking(t *testing.T, stream, cut bool) (url string, sent <-chan struct{}) {
	var hits atomic.Int32
	ch := make(chan struct{}, 1)
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) > 1 {
			io.WriteString(w, "ok")
			return
		}
		if stream {
			w.Header().Set("Content-Type", "text/event-stream")
		} else {
			w.Header().Set("Content-Length", "100")
		}
		io.WriteString(w, "partial")
		http.NewResponseController(w).Flush()
		ch <- struct{}{}
		if cut {
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				conn.Close()
			}
			return
		}
		<-r.Context().Done()
	})
	return be.URL, ch
}

// A request whose answer breaks off counts against a breaker only when the
// backend broke it: with breaker.per: tenant, against its tenant's; by
// default, against its backend's, which every tenant's next request meets
// (its headers arriving is not enough for a success). A client that goes
// away, before or after its answer started, is no failure of the backend,
// as it is not while the backend has not answered yet.
func TestAnswerBrokenOffCountsOnlyBackendFaults(t *testing.T) {
	for _, br := range []struct {
		per, config string
		next        string // the tenant of the request after: one the breaker refuses
	}{
		{"tenant", "breaker: {per: tenant, consecutive_failures: 1, timeout: 1h}\n", "a"},
		{"backend", "breaker: {consecutive_failures: 1, timeout: 1h}\n", "b"},
	} {
		for _, tc := range []struct {
			name   string
			stream bool // the answer is streamed; else kept
			cut    bool // the backend cuts its connection; else the client goes away
			want   int  // the next request's status
		}{
			{"client gone while streamed", true, false, 200},
			{"client gone while kept", false, false, 200},
			{"backend cut while streamed", true, true, 503},
			{"backend cut while kept", false, true, 503},
		} {
			t.Run(br.per+"/"+tc.name, func(t *testing.T) {
				url, sent := breaking(t, tc.stream, tc.cut)
				g := build(t, url, minimal+br.config)
				answered := make(chan struct{}, 2)
				gateway.OnBackendAnswer(g, func() { answered <- struct{}{} })
				gw := serve(t, g)
				c := dialRaw(t, gw.url)
				io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nX-Tenant: a\r\n\r\n")
				if tc.stream {
					// The answer has started: the client has its status.
					resp, err := http.ReadResponse(bufio.NewReader(c), nil)
					if err != nil || resp.StatusCode != 200 {
						t.Fatalf("streamed answer: %v %v", resp, err)
					}
				}
				<-sent
				<-answered // the proxy reads the body now
				if !tc.cut {
					c.Close()
				}
				eventually(t, "the request to leave the gateway", func() bool {
					return metric(t, gw.gw.Metrics(), inGatewayGauge) == 0
				})
				resp, body := do(t, client(t), http.MethodGet, gw.url, br.next, nil)
				if resp.StatusCode != tc.want {
					t.Errorf("the next request: %d %q, want %d", resp.StatusCode, body, tc.want)
				}
				if !tc.cut {
					if got := metric(t, gw.gw.Metrics(), "tasks_canceled_total", "kind", "request"); got != 1 {
						t.Errorf("tasks_canceled_total{kind=request} = %v, want 1", got)
					}
				}
			})
		}
	}
}
