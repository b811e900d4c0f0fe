package gateway_test

import (
	"io"
	"testing"
)

// A request whose client goes away while the backend works on it is counted
// once, as cancelled while proxied: not also as one that left the queue
// without running.
func TestClientGoneWhileProxiedCountedOnce(t *testing.T) {
	g, gw := gated(t, minimal)
	c := dialRaw(t, gw.url)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nX-Tenant: a\r\n\r\n")
	g.await(t, 1)
	c.Close()
	eventually(t, "the request to leave the gateway", func() bool {
		return metric(t, gw.gw.Metrics(), inGatewayGauge) == 0
	})
	m := gw.gw.Metrics()
	if got := metric(t, m, "tasks_canceled_total", "kind", "request"); got != 1 {
		t.Errorf("tasks_canceled_total{kind=request} = %v, want 1", got)
	}
	if got := metric(t, m, "tasks_canceled_total", "kind", "queued"); got != 0 {
		t.Errorf("tasks_canceled_total{kind=queued} = %v, want 0: the request ran", got)
	}
	if got := metric(t, m, "queue_dropped_total", "queue", "tenant"); got != 0 {
		t.Errorf("queue_dropped_total = %v, want 0: the request ran", got)
	}
}
