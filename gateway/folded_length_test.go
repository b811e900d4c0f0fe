package gateway_test

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"
)

// A Content-Length on a folded line is part of the header before it to
// net/http, which frames the request without it: by the request's own
// length, or as bodiless. A front proxy that took the line for a header of
// its own went by that length, and what it sent as the body the gateway
// read as the connection's next request, one the proxy never saw. Such a
// request closes its connection after its answer, on a plain connection
// (where the line is counted in the connection's bytes) and over TLS
// (where it is seen in the value net/http joined it to), as one whose
// Transfer-Encoding was on a folded line does; a request without one keeps
// its connection.
func TestFoldedLengthClosesConnection(t *testing.T) {
	p := newPKI(t)
	plain := start(t, echo(t), minimal)
	overTLS := start(t, echo(t), minimal+tlsConfig(p))
	for _, tc := range []struct {
		name   string
		req    string
		got    string // what the backend got: the body's length
		closed bool
	}{
		{"bodiless", "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\r\n Content-Length: 3\r\n\r\n", "0,", true},
		{"beside a length", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nX-A: a\r\n\tcontent-LENGTH: 5\r\n\r\nabc", "3,", true},
		{"value folded", "GET / HTTP/1.1\r\nHost: x\r\nX-A:\r\n Content-Length: 3\r\n\r\n", "0,", true},
		{"HTTP/1.0", "POST / HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\nContent-Length: 3\r\nX-A: a\r\n Content-Length: 5\r\n\r\nabc", "3,", true},
		{"length", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nX-A: a\r\n\r\nabc", "3,", false},
	} {
		for _, on := range []struct {
			name string
			dial func() net.Conn
		}{
			{"plain", func() net.Conn { return dialRaw(t, plain.url) }},
			{"TLS", func() net.Conn { return dialTLS1(t, overTLS.url, p) }},
		} {
			if on.name == "TLS" && tc.name == "HTTP/1.0" {
				continue // over TLS every HTTP/1.0 request closes its connection
			}
			t.Run(tc.name+" "+on.name, func(t *testing.T) {
				c := on.dial()
				c.SetDeadline(time.Now().Add(bound))
				br := bufio.NewReader(c)
				if tc.closed && on.name == "plain" {
					// A request with a length first, so that the count of
					// lengths seen on the connection is not trivially zero.
					io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi")
					if resp := readResponse(t, br); resp.StatusCode != 200 || resp.Close {
						t.Fatalf("first request: %d, close %v", resp.StatusCode, resp.Close)
					}
				}
				io.WriteString(c, tc.req)
				resp := readResponse(t, br)
				if resp.StatusCode != 200 || resp.Header.Get("X-Got") != tc.got {
					t.Fatalf("%d, backend got %q, want 200, %q", resp.StatusCode, resp.Header.Get("X-Got"), tc.got)
				}
				if resp.Close != tc.closed {
					t.Errorf("Connection: close is %v, want %v", resp.Close, tc.closed)
				}
				if tc.closed {
					if _, err := br.ReadByte(); err != io.EOF {
						t.Errorf("the connection is still open: %v", err)
					}
				}
			})
		}
	}
}
