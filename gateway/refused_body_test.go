package gateway_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// rateLimitedConn starts a gateway whose tenant a has spent its one token,
// and returns a connection to it.
func rateLimitedConn(t *testing.T) net.Conn {
	t.Helper()
	be := backend(t, func(http.ResponseWriter, *http.Request) {})
	gw := start(t, be.URL, minimal+"rate_limit: {rps: 1e-11, burst: 1}\ntimeouts: {read: 1m}\n")
	if resp, _ := do(t, client(t), http.MethodGet, gw.url, "a", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("the first request: status %d, want 200", resp.StatusCode)
	}
	c, err := net.Dial("tcp", strings.TrimPrefix(gw.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(bound))
	return c
}

// A request refused before its body is read (here by its tenant's rate
// limit) whose client goes on sending the body slowly is answered within
// a second, not at timeouts.read (a minute here), and its connection
// closed after the answer: net/http reads what is left of a body the
// handler did not read before it answers, to keep the connection, up to
// 256 KiB for as long as the request's read deadline lets it.
func TestRefusedRequestsSlowBodyBounded(t *testing.T) {
	c := rateLimitedConn(t)
	io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nX-Tenant: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
	// The rest of the body never comes.
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer within %v to a refused request whose body is still coming: %v", bound, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || !resp.Close {
		t.Errorf("status %d, closing %v: want 429 closing the connection", resp.StatusCode, resp.Close)
	}
	if _, err := io.Copy(io.Discard, c); errors.Is(err, os.ErrDeadlineExceeded) {
		t.Error("the connection is still open after the answer")
	}
}

// A refused request whose body has come whole keeps its connection.
func TestRefusedRequestsWholeBodyKeepsTheConnection(t *testing.T) {
	c := rateLimitedConn(t)
	br := bufio.NewReader(c)
	for i := range 2 {
		io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nX-Tenant: a\r\nContent-Length: 5\r\n\r\nhello")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusTooManyRequests || resp.Close {
			t.Fatalf("request %d: status %d, closing %v: want 429 keeping the connection", i+1, resp.StatusCode, resp.Close)
		}
	}
}
