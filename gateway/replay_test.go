package gateway_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// net/http's transport sends a GET, HEAD or OPTIONS without a body again,
// on a new connection, when the kept-alive connection it was sent on
// closes before the answer: it takes the method for idempotent. A GET
// overridden to POST (X-HTTP-Method-Override, ?_method=post) is a POST to
// the backend, which so ran twice, though the gateway's own retries
// leave it alone (docs/gateway.md, Timeouts and retries). Such a request
// is sent once: its connection closing first is a 502.
func TestOverriddenRequestNotReplayed(t *testing.T) {
	for _, tc := range []struct {
		name, target string
		hdr          []string
		sent         int // times the backend gets the second request
	}{
		{"override header", "/second", []string{"X-HTTP-Method-Override", "POST"}, 1},
		{"override parameter", "/second?_method=patch", nil, 1},
		{"idempotent override", "/second", []string{"X-HTTP-Method-Override", "DELETE"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			sent := 0
			var framed []string // the second request's framing headers
			url := rawBackend(t, func(c net.Conn, br *bufio.Reader) {
				for {
					head, ok := readHeadText(br)
					if !ok {
						return
					}
					if !strings.Contains(head, "/second") {
						io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst")
						continue
					}
					mu.Lock()
					sent++
					n := sent
					for _, l := range strings.Split(head, "\r\n") {
						if k, _, _ := strings.Cut(strings.ToLower(l), ":"); k == "content-length" || k == "transfer-encoding" {
							framed = append(framed, l)
						}
					}
					mu.Unlock()
					if n == 1 {
						return // closed under the request, as a backend that crashed on it
					}
					io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecond")
				}
			})
			gw := start(t, url, minimal)
			c := client(t)
			// The first request leaves the gateway a connection to the
			// backend to reuse for the second.
			if resp, body := do(t, c, http.MethodGet, gw.url+"/first", "a", nil); resp.StatusCode != 200 || body != "first" {
				t.Fatalf("first: %d %q", resp.StatusCode, body)
			}
			resp, body := do(t, c, http.MethodGet, gw.url+tc.target, "a", nil, tc.hdr...)
			mu.Lock()
			defer mu.Unlock()
			if sent != tc.sent {
				t.Errorf("the backend got the request %d times, want %d (answered %d %q)", sent, tc.sent, resp.StatusCode, body)
			}
			if want := map[int]int{1: http.StatusBadGateway, 2: http.StatusOK}[tc.sent]; resp.StatusCode != want {
				t.Errorf("answered %d %q, want %d", resp.StatusCode, body, want)
			}
			if len(framed) > 0 {
				t.Errorf("the request went with a body: %q", framed)
			}
		})
	}
}
