package gateway_test

import (
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/groupexec/groupexec/gateway"
)

// A request asking to switch protocols goes to an https backend over
// HTTP/1, which alone has a switch, whatever the protocol. net/http's
// transport sends only a switch to "websocket" over HTTP/1 by itself: a
// switch to another protocol ("test", or "WebSocket/13") went over the
// HTTP/2 connection the backend's other requests use, where the transport
// refused to send it, an error counted as the backend's failure (502):
// any client could open a backend's breaker for every tenant with
// requests that never reached it, and no such switch was ever proxied.
func TestUpgradeToAnHTTP2BackendGoesOverHTTP1(t *testing.T) {
	var mu sync.Mutex
	var held []net.Conn
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	be := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") == "" {
			io.WriteString(w, r.Proto)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("a switch over %s: %v", r.Proto, err)
			return
		}
		mu.Lock()
		held = append(held, conn)
		mu.Unlock()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + r.Header.Get("Upgrade") + "\r\n\r\n")
		brw.Flush()
		go func() {
			defer conn.Close()
			io.Copy(conn, brw) // echoes until the gateway ends the switch
		}()
	}))
	be.EnableHTTP2 = true
	be.StartTLS()
	t.Cleanup(be.Close)
	roots := x509.NewCertPool()
	roots.AddCert(be.Certificate())
	gw := build(t, be.URL, minimal+"breaker: {consecutive_failures: 1, timeout: 1h}\n")
	gateway.TrustBackends(gw, roots)
	url := serve(t, gw).url
	get := func() {
		t.Helper()
		resp, body, err := rawExchange(t, url, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		if err != nil || resp.StatusCode != http.StatusOK || body != "HTTP/2.0" {
			t.Fatalf("a request: %v %v %q, want 200 over HTTP/2", err, resp, body)
		}
	}
	get() // the backend's HTTP/2 connection, which the switches must not take
	for _, proto := range []string{"test", "WebSocket/13", "websocket"} {
		c, br := switched(t, url, "GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: "+proto+"\r\n\r\n")
		io.WriteString(c, "ping\n")
		if line, err := br.ReadString('\n'); err != nil || line != "ping\n" {
			t.Errorf("%s: the switched connection echoed %q (%v), want %q", proto, line, err, "ping\n")
		}
		c.Close()
	}
	get() // the breaker is closed
	// A switch is counted as its handler returns, once the gateway has
	// seen its tunnel end, which may come after the client's close: wait
	// for the three, then check that there are no more.
	switches := func() float64 { return metric(t, gw.Metrics(), "gateway_requests_total", "code", "101") }
	eventually(t, "the three switches to be counted", func() bool { return switches() >= 3 })
	if got := switches(); got != 3 {
		t.Errorf("gateway_requests_total{code=101} = %v, want 3", got)
	}
}
