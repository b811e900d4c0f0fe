package gateway_test

import (
	"bufio"
	"fmt"
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

// A backend's Set-Cookie trailer is not passed on, announced in the
// Trailer header or not, kept or streamed: a cookie is part of the answer's
// handling, which a trailer must not carry (RFC 9110 6.5.1), browsers
// ignore it there, and a client or front proxy that folds trailers into
// the headers would take a cookie that no filter of the answer's headers
// saw.
func TestSetCookieTrailerDropped(t *testing.T) {
	for _, announced := range []bool{true, false} {
		url, _ := hijacker(t, func(conn net.Conn, brw *bufio.ReadWriter) {
			brw.WriteString("HTTP/1.1 200 OK\r\n")
			if announced {
				brw.WriteString("Trailer: Set-Cookie, X-Sum\r\n")
			}
			brw.WriteString("Transfer-Encoding: chunked\r\n\r\n" +
				"4\r\nbody\r\n0\r\nSet-Cookie: session=backend; Path=/\r\nX-Sum: 1\r\n\r\n")
			brw.Flush()
			conn.Close()
		})
		for _, tc := range []struct{ name, yaml string }{
			{"kept", minimal},
			{"streamed", minimal + "response: {buffer_bytes: 1}\n"},
		} {
			t.Run(fmt.Sprintf("%s, announced %v", tc.name, announced), func(t *testing.T) {
				gw := start(t, url, tc.yaml)
				c := dialRaw(t, gw.url)
				c.SetDeadline(time.Now().Add(bound))
				io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nX-Tenant: a\r\nConnection: close\r\n\r\n")
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				if _, ok := resp.Trailer["Set-Cookie"]; ok {
					t.Errorf("the Trailer header names Set-Cookie: %q", slices.Sorted(maps.Keys(resp.Trailer)))
				}
				body, err := io.ReadAll(resp.Body)
				if err != nil || string(body) != "body" {
					t.Fatalf("body %q, %v", body, err)
				}
				if got := resp.Trailer.Values("Set-Cookie"); len(got) != 0 {
					t.Errorf("Set-Cookie trailer %q passed on", got)
				}
				if got := resp.Trailer.Get("X-Sum"); got != "1" {
					t.Errorf("X-Sum trailer %q, want 1", got)
				}
				if got := resp.Header.Values("Set-Cookie"); len(got) != 0 {
					t.Errorf("Set-Cookie header %q", got)
				}
			})
		}
	}
}
