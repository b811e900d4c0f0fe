package gateway_test

import (
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// An HTTP/1 client whose connection ends while it sends its body (it
// closes the connection, or half-closes it: net/http tells neither from
// the other, and ends the request's context for both) went away: the
// request is counted as 499 and gets no answer, as a client that goes away
// later does, and as an HTTP/2 client that resets its stream while sending
// its body (TestHTTP2StreamResetDuringBodyIsClientGone). It is not a body
// the client got wrong (400 bad_body, counted in rejected_total). No
// backend sees it, and no breaker is told of it.
func TestHTTP1ClientGoneDuringBodyIsClientGone(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			t.Errorf("the backend got a %s request", r.Method)
		}
	})
	gw := start(t, be.URL, minimal+"breaker: {per: tenant, consecutive_failures: 1, timeout: 1h}\n")
	m := gw.gw.Metrics()
	for i, tc := range []struct {
		name      string
		raw       string
		halfClose bool
	}{
		{"length, closed", "POST / HTTP/1.1\r\nHost: x\r\nX-Tenant: a\r\nContent-Length: 100\r\n\r\nabc", false},
		{"chunked, closed", "POST / HTTP/1.1\r\nHost: x\r\nX-Tenant: a\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nabc", false},
		{"length, half-closed", "POST / HTTP/1.1\r\nHost: x\r\nX-Tenant: a\r\nContent-Length: 100\r\n\r\nabc", true},
		{"chunked, half-closed", "POST / HTTP/1.1\r\nHost: x\r\nX-Tenant: a\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nabc", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, gw.url).(*net.TCPConn)
			c.SetDeadline(time.Now().Add(bound))
			io.WriteString(c, tc.raw)
			eventually(t, "the request to arrive", func() bool { return metric(t, m, inGatewayGauge) == 1 })
			if tc.halfClose {
				c.CloseWrite()
				got, err := io.ReadAll(c) // until the gateway closes the connection
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					t.Fatalf("the connection still open %v after the half-close", bound)
				}
				if len(got) != 0 {
					t.Errorf("the client that half-closed was answered %q, want nothing", got)
				}
			} else {
				c.Close()
			}
			eventually(t, "the request to be counted", func() bool { return counted(t, m) == float64(i+1) })
			if got := metric(t, m, requestsTotal, "code", "499"); got != float64(i+1) {
				t.Errorf("%s{code=499} = %v, want %d", requestsTotal, got, i+1)
			}
			if got := metric(t, m, requestsTotal, "code", "400"); got != 0 {
				t.Errorf("%s{code=400} = %v, want 0", requestsTotal, got)
			}
			if got := metric(t, m, "rejected_total", "reason", "bad-body"); got != 0 {
				t.Errorf("rejected_total{reason=bad-body} = %v, want 0", got)
			}
		})
	}
	if resp, body := do(t, client(t), http.MethodGet, gw.url, "a", nil); resp.StatusCode != 200 {
		t.Errorf("the tenant's next request: %d %q, want 200", resp.StatusCode, body)
	}
}
