package gateway_test

import (
	"io"
	"net"
	"testing"
	"time"
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

// A request waiting in its tenant's queue whose client goes away leaves the
// queue at once, with or without a body: the gateway reads the body whole
// before admission, after which net/http watches the connection (a
// request whose body no one has read yet is not watched).
func TestClientGoneWhileQueuedLeavesTheQueue(t *testing.T) {
	for _, req := range []string{
		"GET / HTTP/1.1\r\nHost: x\r\nX-Tenant: a\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: x\r\nX-Tenant: a\r\nContent-Length: 5\r\n\r\nhello",
		"POST / HTTP/1.1\r\nHost: x\r\nX-Tenant: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
	} {
		g, gw := gated(t, minimal+"limits: {max_concurrency_per_group: 1}\n")
		m := gw.gw.Metrics()
		held := dialRaw(t, gw.url)
		io.WriteString(held, "GET / HTTP/1.1\r\nHost: x\r\nX-Tenant: a\r\n\r\n")
		g.await(t, 1)
		c := dialRaw(t, gw.url)
		io.WriteString(c, req)
		eventually(t, "the second request queued", func() bool {
			s, ok := gw.gw.Executor().GroupStats("a")
			return ok && s.Waiting == 1
		})
		c.Close()
		// The handler counts the cancel after the executor has taken the
		// request off the queue: wait for it to leave the gateway, not
		// only the queue.
		eventually(t, "the queued request to leave the gateway", func() bool {
			return metric(t, m, inGatewayGauge) == 1
		})
		if s, _ := gw.gw.Executor().GroupStats("a"); s.Waiting != 0 {
			t.Errorf("%q: %d waiting once it left, want 0", req, s.Waiting)
		}
		if got := metric(t, m, "tasks_canceled_total", "kind", "queued"); got != 1 {
			t.Errorf("%q: tasks_canceled_total{kind=queued} = %v, want 1", req, got)
		}
		held.Close()
	}
}

// A request given up because its client's connection ended (499) gets no
// answer: its connection is closed without one. net/http ends a request's
// context when its client half-closes the connection, as some clients do
// once their request is sent, and such a client, still reading, was sent
// an empty 200 for a request the gateway had abandoned: at the backend,
// whose request was aborted, or in the queue, where it never ran.
func TestClientGoneGetsNoAnswer(t *testing.T) {
	for _, queued := range []bool{false, true} {
		g, gw := gated(t, minimal+"limits: {max_concurrency_per_group: 1}\n")
		m := gw.gw.Metrics()
		if queued {
			held := dialRaw(t, gw.url)
			io.WriteString(held, "GET / HTTP/1.1\r\nHost: x\r\nX-Tenant: a\r\n\r\n")
			g.await(t, 1)
		}
		c := dialRaw(t, gw.url).(*net.TCPConn)
		c.SetDeadline(time.Now().Add(bound))
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nX-Tenant: a\r\n\r\n")
		if queued {
			eventually(t, "the request queued", func() bool {
				s, ok := gw.gw.Executor().GroupStats("a")
				return ok && s.Waiting == 1
			})
		} else {
			g.await(t, 1)
		}
		c.CloseWrite()
		got, err := io.ReadAll(c) // until the gateway closes the connection
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("queued %v: the connection still open %v after the half-close", queued, bound)
		}
		if len(got) != 0 {
			t.Errorf("queued %v: the client that half-closed was answered %q, want nothing", queued, got)
		}
		eventually(t, "the request to leave the gateway", func() bool {
			return metric(t, m, requestsTotal, "code", "499") == 1
		})
	}
}
