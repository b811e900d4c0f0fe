package gateway_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// rawBackend serves each connection with serve, given the connection and a
// reader of it, as a backend that writes its answers byte for byte; it is
// closed at the end of the test.
func rawBackend(t *testing.T, serve func(c net.Conn, br *bufio.Reader)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				serve(c, bufio.NewReader(c))
			}()
		}
	}()
	return "http://" + l.Addr().String()
}

// lineBackend is a rawBackend that answers every request 200 "ok" and
// records its request line. It returns its URL and taken, which returns
// the lines recorded since its last call.
func lineBackend(t *testing.T) (url string, taken func() []string) {
	t.Helper()
	var mu sync.Mutex
	var lines []string
	url = rawBackend(t, func(c net.Conn, br *bufio.Reader) {
		for {
			head, ok := readHeadText(br)
			if !ok {
				return
			}
			mu.Lock()
			lines = append(lines, strings.SplitN(head, "\r\n", 2)[0])
			mu.Unlock()
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	return url, func() []string {
		mu.Lock()
		defer mu.Unlock()
		got := lines
		lines = nil
		return got
	}
}

// wantLine checks that the backend got the one request line line for the
// request sent as what, or, line being empty, no request at all.
func wantLine(t *testing.T, what string, got []string, line string) {
	t.Helper()
	if line == "" && len(got) > 0 || line != "" && (len(got) != 1 || got[0] != line) {
		t.Errorf("%q: the backend got %q, want %q", what, got, line)
	}
}

// readHead reads a request's line and headers from br, reporting whether
// it read them whole. The gateway sends a body's length, and none here.
func readHead(br *bufio.Reader) bool {
	_, ok := readHeadText(br)
	return ok
}

// readHeadText reads a request's line and headers from br, and reports
// whether it read them whole.
func readHeadText(br *bufio.Reader) (string, bool) {
	var head strings.Builder
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return "", false
		}
		if line == "\r\n" {
			return head.String(), true
		}
		head.WriteString(line)
	}
}

// A backend's answer is framed as net/http's transport reads it, as
// docs/gateway.md says: chunks before a Content-Length beside them, a
// length before the connection's close. One it frames wrong is the
// backend's failure, a 502 counted by its breaker: a body its close cuts
// short, a Transfer-Encoding other than chunked, two lengths that differ,
// a Trailer header naming Content-Length.
func TestBackendFraming(t *testing.T) {
	for _, tc := range []struct {
		name, answer string
		status       int // the client's
		body         string
	}{
		{"length", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", 200, "hello"},
		{"chunks over a length", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 200, "hello"},
		{"to the close", "HTTP/1.1 200 OK\r\n\r\nhello", 200, "hello"},
		{"bare line feeds", "HTTP/1.1 200 OK\nContent-Length: 5\n\nhello", 200, "hello"},
		{"a length twice", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello", 200, "hello"},
		{"cut short by the close", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello", 502, ""},
		{"two lengths", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", 502, ""},
		{"a negative length", "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\nhello", 502, ""},
		{"gzip, chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 502, ""},
		{"identity", "HTTP/1.1 200 OK\r\nTransfer-Encoding: identity\r\nContent-Length: 5\r\n\r\nhello", 502, ""},
		{"a length announced as a trailer", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: Content-Length\r\n\r\n5\r\nhello\r\n0\r\nContent-Length: 9\r\n\r\n", 502, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := rawBackend(t, func(c net.Conn, br *bufio.Reader) {
				if readHead(br) {
					io.WriteString(c, tc.answer)
				}
			})
			gw := start(t, url, minimal+"breaker: {consecutive_failures: 1, timeout: 1h}\n")
			resp, body := do(t, client(t), http.MethodGet, gw.url, "a", nil)
			if resp.StatusCode != tc.status {
				t.Fatalf("%d %q, want %d", resp.StatusCode, body, tc.status)
			}
			open := metric(t, gw.gw.Metrics(), "breaker_state", "backend", url)
			if tc.status == http.StatusBadGateway {
				if code, _, _ := refusal(t, body); code != "backend_error" || open != 1 {
					t.Errorf("%q, breaker_state %v: want backend_error and the breaker open", body, open)
				}
			} else if body != tc.body || open != 0 {
				t.Errorf("%q, breaker_state %v: want %q and the breaker closed", body, open, tc.body)
			}
		})
	}
}

// Bytes a backend sends past the end of an answer (more than its
// Content-Length), arriving with it, close its connection once net/http's
// transport sees them there, idle: the next request, another tenant's,
// gets its own answer on a new connection, never those bytes. The test
// waits for that close before each next request: one sent at once may
// take the connection first and read the bytes as its answer, as
// docs/gateway.md says.
func TestBackendBytesPastTheAnswerDropped(t *testing.T) {
	closed := make(chan struct{}, 4)
	url := rawBackend(t, func(c net.Conn, br *bufio.Reader) {
		for readHead(br) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nreal"+
				"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nforged")
		}
		closed <- struct{}{}
	})
	gw := start(t, url, minimal)
	c := &http.Client{} // keeps its connection to the gateway, as the gateway keeps its own
	defer c.CloseIdleConnections()
	for i, tenant := range []string{"a", "b", "a", "b"} {
		resp, body := do(t, c, http.MethodGet, gw.url, tenant, nil)
		if resp.StatusCode != 200 || body != "real" {
			t.Errorf("request %d, tenant %s: %d %q, want 200 real", i, tenant, resp.StatusCode, body)
		}
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			t.Fatalf("request %d: the backend's connection, bytes past its answer, still open after 10s", i)
		}
	}
}

// A body shorter than its length, the backend's connection left open, is
// waited for to the request's deadline: a 504, the backend's failure.
//
// The 1s runs from the request's arrival at the gateway, and a try that
// starts with less than half of it left is not the backend's failure
// (heldToDeadline): a stall of the machine before the try leaves the
// breaker rightly closed. A try is judged only if the backend had the
// request within half the timeout of its sending, and so within half of
// it of the try's start: else it is made again, with a backend and a
// gateway (and so a breaker) of its own.
func TestBackendShortBodyKeptOpen(t *testing.T) {
	const upstream = time.Second
	for try := 1; ; try++ {
		arrived := make(chan time.Time, 1)
		url := rawBackend(t, func(c net.Conn, br *bufio.Reader) {
			if readHead(br) {
				arrived <- time.Now()
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello")
				io.Copy(io.Discard, br) // until the gateway gives up and closes
			}
		})
		gw := start(t, url, minimal+"timeouts: {upstream: 1s}\nbreaker: {consecutive_failures: 1, timeout: 1h}\n")
		sent := time.Now()
		resp, body := do(t, client(t), http.MethodGet, gw.url, "a", nil)
		// The backend had the request, if at all, before the gateway gave
		// up on its answer.
		var held bool
		select {
		case at := <-arrived:
			held = at.Sub(sent) < upstream/2
		default:
		}
		if !held {
			if try == 10 {
				t.Fatalf("in %d tries the backend never had the request within %v of its sending", try, upstream/2)
			}
			continue
		}
		if resp.StatusCode != http.StatusGatewayTimeout {
			t.Fatalf("%d %q, want 504 upstream_timeout", resp.StatusCode, body)
		}
		if code, _, _ := refusal(t, body); code != "upstream_timeout" {
			t.Errorf("504 %q, want upstream_timeout", body)
		}
		if open := metric(t, gw.gw.Metrics(), "breaker_state", "backend", url); open != 1 {
			t.Errorf("breaker_state %v, want the breaker open", open)
		}
		return
	}
}
