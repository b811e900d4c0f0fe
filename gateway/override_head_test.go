package gateway_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// A method override naming HEAD (X-HTTP-Method-Override: HEAD,
// ?_method=head on a POST) has a backend that takes it (Express with
// method-override) answer as to a HEAD, its Content-Length and no body,
// while its server frames the answer for the method it saw:
// the gateway's transport, reading the declared body of a POST's answer,
// waited for bytes that never come until the request's deadline, holding
// the slot, and the 504 was counted against the backend's breaker. Any
// client could so open a backend's breaker for every tenant. Such a
// request is refused 501 method_not_supported, as an override to TRACE is,
// and never reaches a backend; a HEAD's own override to HEAD passes.
func TestMethodOverrideToHeadRefused(t *testing.T) {
	var hits atomic.Int32
	url, _ := hijacker(t, func(conn net.Conn, brw *bufio.ReadWriter) {
		hits.Add(1)
		// As such a backend answers an override to HEAD: headers, and the
		// connection kept for the next request.
		brw.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n")
		brw.Flush()
		io.Copy(io.Discard, brw)
	})
	// The deadline is a failure bound, not a pace: a HEAD's answer read as
	// a POST's waits it out (504), one read as a HEAD's is in at once. At
	// 1s, a stall of the machine as long before the backend answered was
	// taken for the first. Half of bound, so that the client, which waits
	// bound, gets the 504.
	gw := start(t, url, minimal+fmt.Sprintf("timeouts: {upstream: %s}\nbreaker: {consecutive_failures: 1, timeout: 1h}\n", bound/2))
	c := client(t)
	for _, tc := range []struct {
		query string
		hdr   []string
	}{
		{"", []string{"X-HTTP-Method-Override", "HEAD"}},
		{"", []string{"X-Method-Override", " head"}},
		{"?_method=HEAD", nil},
	} {
		resp, body := do(t, c, http.MethodPost, gw.url+"/x"+tc.query, "acme", strings.NewReader("a"), tc.hdr...)
		if resp.StatusCode != http.StatusNotImplemented {
			t.Errorf("%s %q: %d %q, want 501 method_not_supported", tc.query, tc.hdr, resp.StatusCode, body)
		} else if code, _, _ := refusal(t, body); code != "method_not_supported" {
			t.Errorf("%s %q: 501 %q, want method_not_supported", tc.query, tc.hdr, body)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the backend got %d requests overridden to HEAD", n)
	}
	// A HEAD overridden to HEAD is a HEAD: its answer is read as one.
	if resp, body := do(t, c, http.MethodHead, gw.url+"/x?_method=HEAD", "acme", nil); resp.StatusCode != http.StatusOK {
		t.Errorf("HEAD with _method=HEAD: %d %q, want 200", resp.StatusCode, body)
	}
}
