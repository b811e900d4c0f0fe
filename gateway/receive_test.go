package gateway_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// rawExchange sends raw on a new connection to addr (a base URL) and
// returns the response the gateway sent back, or an error if none could be
// read.
func rawExchange(t *testing.T, url, raw string) (*http.Response, string, error) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(bound))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return nil, "", err
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b), nil
}

// A request whose body's framing is malformed gets 400, never 200, and no
// backend sees a complete request. A body cut short by the end of the
// client's connection is a client gone instead
// (TestHTTP1ClientGoneDuringBodyIsClientGone).
func TestBrokenBody400(t *testing.T) {
	var complete atomic.Int32
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err == nil {
			complete.Add(1)
		}
	})
	gw := start(t, be.URL, minimal)
	for _, tc := range []struct {
		name string
		raw  string
	}{
		{"malformed chunk size", "POST / HTTP/1.1\r\nHost: x\r\nX-Tenant: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"},
		{"chunk without its CRLF", "POST / HTTP/1.1\r\nHost: x\r\nX-Tenant: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabczz\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body, err := rawExchange(t, gw.url, tc.raw)
			if err != nil {
				t.Fatalf("no response: %v", err)
			}
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("status %d (%q), want 400", resp.StatusCode, body)
			}
			if code, _, _ := refusal(t, body); code != "bad_body" {
				t.Errorf("body %q", body)
			}
		})
	}
	if n := complete.Load(); n != 0 {
		t.Errorf("the backend read %d complete bodies", n)
	}
}

// A request that waits in its tenant's queue longer than timeouts.read is
// served: its body was received on arrival, so the wait is not a slow client.
func TestQueuedBodyDoesNotTimeOut(t *testing.T) {
	// The body must arrive within the read timeout, then the request
	// waits past it: a second gives the first part a margin on a loaded
	// machine, where 100ms did not.
	const read = time.Second
	g, gw := gated(t, minimal+fmt.Sprintf("limits: {max_concurrency_per_group: 1}\ntimeouts: {read: %s}\n", read), "pass")
	c := client(t)
	first := goDo(t, c, gw.url, "a")
	g.await(t, 1)

	payload := bytes.Repeat([]byte("x"), 64<<10) // more than the server's read buffer
	done := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, gw.url, bytes.NewReader(payload))
		req.Header.Set("X-Tenant", "a")
		resp, err := c.Do(req)
		if err != nil {
			t.Errorf("queued request: %v", err)
			done <- 0
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	eventually(t, "the second request to queue", func() bool {
		s, _ := gw.gw.Executor().GroupStats("a")
		return s.Waiting == 1
	})
	// Let the read timeout pass while it waits: time passing is the point
	// of the test, not a way to synchronise. It runs from the request's
	// arrival, before it queued.
	time.Sleep(read + 100*time.Millisecond)
	close(g.release)
	if code := <-first; code != 200 {
		t.Errorf("first request: %d", code)
	}
	if code := <-done; code != 200 {
		t.Errorf("queued request with its whole body sent: %d, want 200", code)
	}
}
