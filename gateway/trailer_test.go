package gateway_test

import (
	"bufio"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"testing"
	"time"
)

// A backend's trailers that RFC 9110 6.5.1 forbids (framing, routing,
// credentials, content format) are not passed on, announced in the
// Trailer header or not, whether the answer is kept or streamed; the
// others are.
func TestForbiddenTrailersDropped(t *testing.T) {
	url, _ := hijacker(t, func(conn net.Conn, brw *bufio.ReadWriter) {
		brw.WriteString("HTTP/1.1 200 OK\r\n" +
			"Trailer: Host, X-Sum, Authorization, Content-Type\r\n" +
			"Transfer-Encoding: chunked\r\n\r\n" +
			"4\r\nbody\r\n0\r\n" +
			"Host: other\r\nX-Sum: 1\r\nAuthorization: Bearer x\r\nContent-Type: text/html\r\n" +
			"Content-Length: 5\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\nWww-Authenticate: Basic\r\nIf-Match: *\r\n\r\n")
		brw.Flush()
		conn.Close()
	})
	for _, tc := range []struct{ name, yaml string }{
		{"kept", minimal},
		{"streamed", minimal + "response: {buffer_bytes: 1}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gw := start(t, url, tc.yaml)
			c := dialRaw(t, gw.url)
			c.SetDeadline(time.Now().Add(bound))
			io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nX-Tenant: a\r\nConnection: close\r\n\r\n")
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			// net/http reads the Trailer header's names into resp.Trailer.
			if got := slices.Sorted(maps.Keys(resp.Trailer)); !slices.Equal(got, []string{"X-Sum"}) {
				t.Errorf("Trailer header names %q, want [X-Sum]", got)
			}
			body, err := io.ReadAll(resp.Body)
			if err != nil || string(body) != "body" {
				t.Fatalf("body %q, %v", body, err)
			}
			if len(resp.Trailer) != 1 || resp.Trailer.Get("X-Sum") != "1" {
				t.Errorf("trailers %v, want only X-Sum: 1", resp.Trailer)
			}
		})
	}
}
