package gateway_test

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http/httpguts"
)

// A request listing several protocols in Upgrade (RFC 9110 section 7.8:
// in order of preference, on one line or several) is proxied offering the
// backend the first alone: the proxy carries a switch only to the
// protocol the request names as a whole, and a backend that picked
// another listed one, as RFC 9110 lets it and as WebSocket servers that
// look for their token in the list do, was answered 502 and counted a
// failure of its breaker. Any client could so open a backend's breaker
// for every tenant with requests the backend served correctly.
func TestUpgradeListOffersTheFirstProtocol(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {
		if !httpguts.HeaderValuesContainsToken(r.Header["Upgrade"], "test") {
			io.WriteString(w, "plain "+strings.Join(r.Header.Values("Upgrade"), "|"))
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: test\r\n\r\n")
		brw.Flush()
	})
	gw := start(t, be.URL, minimal+"breaker: {consecutive_failures: 1, timeout: 1h}\n")
	for _, tc := range []struct{ up, want string }{
		{"Upgrade: other, test\r\n", "plain other"},
		{"Upgrade: other\r\nUpgrade: test\r\n", "plain other"},
		{"Upgrade: ,  other , test\r\n", "plain other"},
	} {
		c := dialRaw(t, gw.url)
		c.SetDeadline(time.Now().Add(bound))
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\n"+tc.up+"X-Tenant: a\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("%q: no answer: %v", tc.up, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(b) != tc.want {
			t.Errorf("%q: answered %d %q, want 200 %q from the backend", tc.up, resp.StatusCode, b, tc.want)
		}
	}
	if resp, body := do(t, client(t), http.MethodGet, gw.url, "b", nil); resp.StatusCode != http.StatusOK {
		t.Errorf("another tenant's request: %d %q, want 200: the backend's breaker counted a switch it was asked for", resp.StatusCode, body)
	}
}
