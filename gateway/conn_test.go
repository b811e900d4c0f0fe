package gateway_test

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/gateway"
)

// readResponse reads one response from br, its body included.
func readResponse(t *testing.T, br *bufio.Reader) *http.Response {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no response: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// A request with both Content-Length and Transfer-Encoding (a length on a
// folded line too) is served by the latter and its connection closed after
// the response (RFC 9112 6.1); so is one served by its length because its
// Transfer-Encoding was on a folded line. A chunked request alone keeps its
// connection.
func TestLengthWithChunkedClosesConnection(t *testing.T) {
	gw := start(t, echo(t), minimal)
	for _, tc := range []struct {
		name   string
		req    string
		closed bool
	}{
		{"both", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", true},
		{"both, other case and order", "POST / HTTP/1.1\r\nHost: x\r\ntransfer-encoding: chunked\r\ncontent-LENGTH: 40\r\n\r\n3\r\nabc\r\n0\r\n\r\n", true},
		// net/http joins the folded line to X-A's value; a front proxy may
		// take it for a length of its own.
		{"both, length folded", "POST / HTTP/1.1\r\nHost: x\r\nX-A: a\r\n Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", true},
		// net/http takes the folded line for part of X-A's value, and goes
		// by the length; a front proxy may go by the chunks.
		{"both, chunked folded", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nX-A: a\r\n Transfer-Encoding: chunked\r\n\r\nabc", true},
		{"chunked", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", false},
		{"length", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, gw.url)
			c.SetDeadline(time.Now().Add(bound))
			br := bufio.NewReader(c)
			// A request with a length first, so that the count of lengths
			// seen on the connection is not trivially zero.
			io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi")
			if resp := readResponse(t, br); resp.StatusCode != 200 || resp.Close {
				t.Fatalf("first request: %d, close %v", resp.StatusCode, resp.Close)
			}
			io.WriteString(c, tc.req)
			resp := readResponse(t, br)
			if resp.StatusCode != 200 || resp.Header.Get("X-Got") != "3," {
				t.Fatalf("%d, backend got %q", resp.StatusCode, resp.Header.Get("X-Got"))
			}
			if resp.Close != tc.closed {
				t.Errorf("Connection: close is %v, want %v", resp.Close, tc.closed)
			}
			if tc.closed {
				if _, err := br.ReadByte(); err != io.EOF {
					t.Errorf("the connection is still open: %v", err)
				}
			}
		})
	}
}

// net/http ignores an HTTP/1.0 request's Transfer-Encoding and frames it by
// its Content-Length (or as bodiless): what a front proxy that went by the
// chunks sent as this request's body must not reach the backend as a
// request of its own, with a tenant of the client's choosing. The
// connection is closed after the answer (RFC 9112 6.1), whatever the case
// of the header's name, a value folded onto the next line, a name on a
// folded line, and after earlier requests kept the connection.
func TestHTTP10TransferEncodingClosesConnection(t *testing.T) {
	be := recording(t, func(r *http.Request) string {
		io.Copy(io.Discard, r.Body)
		return r.URL.Path + " " + r.Header.Get("X-Tenant")
	})
	p := newPKI(t)
	plain := start(t, be.URL, minimal)
	tlsGW := start(t, be.URL, minimal+tlsConfig(p))
	const smuggled = "GET /smuggled HTTP/1.1\r\nHost: x\r\nX-Tenant: victim\r\n\r\n"
	const first = "POST /first HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\nX-Tenant: mallory\r\n"
	const kept = "GET /kept HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\nX-Tenant: mallory\r\n\r\n"
	for _, tc := range []struct {
		name, before, req string
		tls               bool
	}{
		{"length", "", first + "Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\nabc" + smuggled, false},
		{"no length", "", first + "Transfer-Encoding: chunked\r\n\r\n" + smuggled, false},
		{"lower case", "", first + "transfer-encoding: chunked\r\n\r\n" + smuggled, false},
		{"upper case", "", first + "TRANSFER-ENCODING: chunked\r\n\r\n" + smuggled, false},
		{"value folded", "", first + "Transfer-Encoding:\r\n chunked\r\n\r\n" + smuggled, false},
		{"name on a folded line", "", first + "X-A: a\r\n\tTransfer-Encoding: chunked\r\n\r\n" + smuggled, false},
		{"after a kept request", kept, first + "Transfer-Encoding: chunked\r\n\r\n" + smuggled, false},
		{"after a chunked request", "POST /kept HTTP/1.1\r\nHost: x\r\nX-Tenant: mallory\r\n" +
			"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", first + "Transfer-Encoding: chunked\r\n\r\n" + smuggled, false},
		{"tls", "", first + "Transfer-Encoding: chunked\r\n\r\n" + smuggled, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			be.reset()
			var c net.Conn
			if tc.tls {
				c = dialTLS1(t, tlsGW.url, p)
			} else {
				c = dialRaw(t, plain.url)
			}
			c.SetDeadline(time.Now().Add(bound))
			br := bufio.NewReader(c)
			want := []string{"/first mallory"}
			if tc.before != "" {
				io.WriteString(c, tc.before)
				if resp := readResponse(t, br); resp.StatusCode != 200 || resp.Close {
					t.Fatalf("request before: %d, close %v; want 200 keeping the connection", resp.StatusCode, resp.Close)
				}
				want = []string{"/kept mallory", "/first mallory"}
			}
			io.WriteString(c, tc.req)
			if resp := readResponse(t, br); resp.StatusCode != 200 || !resp.Close {
				t.Fatalf("%d, close %v; want 200 closing the connection", resp.StatusCode, resp.Close)
			}
			if b, err := io.ReadAll(br); err != nil || len(b) > 0 {
				t.Errorf("after the answer: %q, %v; want the connection closed", b, err)
			}
			got := be.got()
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("the backend got %q, want only %q", got, want)
			}
		})
	}
}

// "OPTIONS *" is checked for smuggling as any request: net/http would
// answer it itself, before the gateway's checks, and keep the connection,
// so that what a front proxy sent as its body reached the backend as a
// request of its own. One without is answered 200, keeping the connection.
func TestOptionsAsteriskSmuggling(t *testing.T) {
	be := recording(t, func(r *http.Request) string { return r.Method + " " + r.RequestURI })
	gw := start(t, be.URL, minimal)
	const smuggled = "GET /smuggled HTTP/1.1\r\nHost: x\r\nX-Tenant: victim\r\n\r\n"
	for _, tc := range []struct {
		name, req string
		closed    bool
	}{
		{"length and chunked", "OPTIONS * HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + smuggled, true},
		{"HTTP/1.0 chunked", "OPTIONS * HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n" + smuggled, true},
		{"plain", "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			be.reset()
			c := dialRaw(t, gw.url)
			c.SetDeadline(time.Now().Add(bound))
			br := bufio.NewReader(c)
			io.WriteString(c, tc.req)
			if resp := readResponse(t, br); resp.StatusCode != 200 || resp.Close != tc.closed {
				t.Fatalf("%d, close %v; want 200, close %v", resp.StatusCode, resp.Close, tc.closed)
			}
			if tc.closed {
				if b, err := io.ReadAll(br); err != nil || len(b) > 0 {
					t.Errorf("after the answer: %q, %v; want the connection closed", b, err)
				}
			} else {
				io.WriteString(c, "GET /next HTTP/1.1\r\nHost: x\r\n\r\n")
				if resp := readResponse(t, br); resp.StatusCode != 200 {
					t.Fatalf("next request: %d", resp.StatusCode)
				}
			}
			got := be.got()
			want := "[]"
			if !tc.closed {
				want = "[GET /next]"
			}
			if fmt.Sprint(got) != want {
				t.Errorf("the backend got %q, want %s", got, want)
			}
		})
	}
}

// An HTTP/1.0 client asking to keep its connection (ab -k, a load
// balancer's health check) keeps it when its requests carry no
// Transfer-Encoding: one after another, with bodies, pipelined, and
// followed by a chunked HTTP/1.1 request, whose framing the lengths of the
// HTTP/1.0 requests are accounted in.
func TestHTTP10KeepAlive(t *testing.T) {
	gw := start(t, echo(t), minimal)
	const get = "GET / HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\n\r\n"
	const post = "POST / HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\nContent-Length: 3\r\n\r\nabc"
	c := dialRaw(t, gw.url)
	c.SetDeadline(time.Now().Add(bound))
	br := bufio.NewReader(c)
	for i, req := range []string{get, post, get + post + get} {
		io.WriteString(c, req)
		for range strings.Count(req, "HTTP/1.0") {
			resp := readResponse(t, br)
			if resp.StatusCode != 200 || resp.Close {
				t.Fatalf("write %d: %d, close %v; want 200 keeping the connection", i+1, resp.StatusCode, resp.Close)
			}
		}
	}
	io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n")
	if resp := readResponse(t, br); resp.StatusCode != 200 || resp.Close || resp.Header.Get("X-Got") != "3," {
		t.Fatalf("chunked after: %d, close %v, backend got %q", resp.StatusCode, resp.Close, resp.Header.Get("X-Got"))
	}
	io.WriteString(c, get)
	if resp := readResponse(t, br); resp.StatusCode != 200 || resp.Close {
		t.Fatalf("last: %d, close %v; want 200 keeping the connection", resp.StatusCode, resp.Close)
	}
}

// A kept answer the backend chunked goes to the client with its length,
// which the gateway has: an HTTP/1.0 client keeps its connection, as it
// could not were the answer ended by closing it. An answer to HEAD gets no
// length of the gateway's.
func TestKeptChunkedAnswerGetsLength(t *testing.T) {
	body := strings.Repeat("x", 5000) // over the server's own buffer, under response.buffer_bytes
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, body[:10])
		w.(http.Flusher).Flush() // chunked from here
		io.WriteString(w, body[10:])
	})
	gw := start(t, be.URL, minimal)
	c := dialRaw(t, gw.url)
	c.SetDeadline(time.Now().Add(bound))
	br := bufio.NewReader(c)
	for i := range 2 {
		io.WriteString(c, "GET / HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(b) != body || resp.ContentLength != int64(len(body)) || resp.Close {
			t.Fatalf("request %d: %d bytes (%v), Content-Length %d, close %v; want %d bytes, their length, the connection kept",
				i+1, len(b), err, resp.ContentLength, resp.Close, len(body))
		}
	}
	io.WriteString(c, "HEAD / HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodHead})
	if err != nil {
		t.Fatal(err)
	}
	if cl := resp.Header.Get("Content-Length"); cl != "" {
		t.Errorf("HEAD: Content-Length %q, want none", cl)
	}
}

// dialTLS1 opens a TLS connection to the gateway at url, served with a
// certificate of p's CA, offering only HTTP/1.1; it is closed at the end of
// the test.
func dialTLS1(t *testing.T, url string, p *pki) *tls.Conn {
	t.Helper()
	c, err := tls.Dial("tcp", strings.TrimPrefix(url, "http://"), &tls.Config{RootCAs: poolOf(p), NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// At max_conns, a new connection is taken in by closing the connection idle
// the longest.
func TestMaxConnsReclaimsIdle(t *testing.T) {
	gw := start(t, echo(t), minimal+"max_conns: 2\n")
	var idle []*bufio.Reader
	for i := range 3 {
		c := dialRaw(t, gw.url) // kept open: a connection that closed would make room itself
		c.SetDeadline(time.Now().Add(bound))
		br := bufio.NewReader(c)
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		if resp := readResponse(t, br); resp.StatusCode != 200 {
			t.Fatalf("connection %d: %d", i+1, resp.StatusCode)
		}
		idle = append(idle, br)
		if i == 0 {
			// The server marks a connection idle after its response is
			// out: the first must be idle before the second comes, so
			// that it is the one idle the longest.
			eventually(t, "the first connection idle", func() bool { return gateway.IdleConns(gw.gw) == 1 })
		}
	}
	if _, err := idle[0].ReadByte(); err != io.EOF {
		t.Errorf("the connection idle the longest was not closed: %v", err)
	}
	if got := metric(t, gw.gw.Metrics(), "gateway_connections_reclaimed_total"); got < 1 {
		t.Errorf("gateway_connections_reclaimed_total = %v", got)
	}
	if got := metric(t, gw.gw.Metrics(), "gateway_connections"); got > 2 {
		t.Errorf("gateway_connections = %v, over max_conns", got)
	}
}

// At max_conns, a connection that has sent nothing is idle as a keep-alive
// one between requests is: a newcomer takes its place at once, instead of
// waiting for timeouts.read_header to close it.
func TestMaxConnsReclaimsSilentConnection(t *testing.T) {
	gw := start(t, echo(t), minimal+"max_conns: 1\ntimeouts: {read_header: 1h}\n")
	silent := dialRaw(t, gw.url)
	silent.SetDeadline(time.Now().Add(bound))
	eventually(t, "the silent connection accepted", func() bool {
		return metric(t, gw.gw.Metrics(), "gateway_connections") == 1
	})
	c := dialRaw(t, gw.url)
	c.SetDeadline(time.Now().Add(bound))
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp := readResponse(t, bufio.NewReader(c)); resp.StatusCode != 200 {
		t.Fatalf("the newcomer: %d", resp.StatusCode)
	}
	if _, err := silent.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("the silent connection was not closed: %v", err)
	}
	if got := metric(t, gw.gw.Metrics(), "gateway_connections_reclaimed_total"); got != 1 {
		t.Errorf("gateway_connections_reclaimed_total = %v, want 1", got)
	}
}

// At max_conns, an idle keep-alive connection stays open while no new
// connection needs its place.
func TestMaxConnsKeepsIdleWithoutNewcomer(t *testing.T) {
	gw := start(t, echo(t), minimal+"max_conns: 1\n")
	c := dialRaw(t, gw.url)
	c.SetDeadline(time.Now().Add(bound))
	br := bufio.NewReader(c)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp := readResponse(t, br); resp.StatusCode != 200 {
		t.Fatalf("first request: %d", resp.StatusCode)
	}
	eventually(t, "the connection idle or reclaimed", func() bool {
		return gateway.IdleConns(gw.gw) == 1 || metric(t, gw.gw.Metrics(), "gateway_connections_reclaimed_total") > 0
	})
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("second request on the idle connection: %v", err)
	}
	resp.Body.Close()
	if got := metric(t, gw.gw.Metrics(), "gateway_connections_reclaimed_total"); got != 0 {
		t.Errorf("gateway_connections_reclaimed_total = %v with no new connection", got)
	}
}

// A request refused with its body unread has its connection shut down for
// writing after the answer, as net/http does on a bare TCP connection: the
// client reads the answer and then the end of the stream, not a reset.
func TestRefusedBodyConnectionEndsCleanly(t *testing.T) {
	gw := start(t, echo(t), minimal+"body: {max_bytes: 1000}\n")
	c := dialRaw(t, gw.url)
	c.SetDeadline(time.Now().Add(bound))
	io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\n\r\n")
	go c.Write(make([]byte, 64<<10)) // more than the gateway reads; fails once it closes
	br := bufio.NewReader(c)
	if resp := readResponse(t, br); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("%d, want 413", resp.StatusCode)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("after the answer: %v, want EOF", err)
	}
}

// The admin server closes a keep-alive connection idle for timeouts.idle,
// as the proxy does: idle admin connections cannot pile up for ever.
func TestAdminIdleConnectionsClosed(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {})
	gw := start(t, be.URL, minimal+"timeouts: {idle: 50ms}\n")
	wantAdminClosed(t, gw.admin, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
}

// The admin address caps its connections at admin_max_conns, as the proxy's
// does at max_conns: each connection past the cap closes the one idle the
// longest (here, connections that sent nothing), so that clients opening
// connections to it hold admin_max_conns at most, and a scrape still gets
// in. Each connection comes from an address of its own: from one, the
// client's own cap (an eighth of admin_max_conns) would close them as
// well, and the test would pass with admin_max_conns itself not applied.
func TestAdminConnectionsCapped(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {})
	gw := start(t, be.URL, minimal+"admin_max_conns: 2\ntimeouts: {read_header: 1h}\n")
	var silent []net.Conn
	for i := range 5 {
		silent = append(silent, dialFrom(t, gw.admin, fmt.Sprintf("127.0.0.%d", 2+i)))
	}
	// Each of the last three closed the one idle the longest.
	for i, c := range silent[:3] {
		if _, err := c.Read(make([]byte, 1)); err != io.EOF {
			t.Errorf("silent admin connection %d of 5 is still open past admin_max_conns 2: %v", i+1, err)
		}
	}
	c := dialFrom(t, gw.admin, "127.0.0.7")
	io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp := readResponse(t, bufio.NewReader(c)); resp.StatusCode != 200 {
		t.Fatalf("a scrape past the silent connections: %d", resp.StatusCode)
	}
	if _, err := silent[3].Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("the scrape did not take the place of the silent connection idle the longest: %v", err)
	}
}

// A reload changes admin_max_conns in place, and the cap of one client
// address with it: lowered to 8, a client holds one connection (its second
// closes its first), and the ninth connection from other addresses closes
// the one idle the longest.
func TestAdminConnectionsCapFollowsReload(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {})
	gw, write := reloadable(t, be.URL, "backends: [%s]\ntimeouts: {read_header: 1h}\n")
	write("backends: [%s]\nadmin_max_conns: 8\ntimeouts: {read_header: 1h}\n")
	if err := gw.gw.ReloadFile(); err != nil {
		t.Fatal(err)
	}
	first := dialFrom(t, gw.admin, "127.0.0.2")
	second := dialFrom(t, gw.admin, "127.0.0.2")
	if _, err := first.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("a client's first silent admin connection is still open past its second, its cap reloaded to 1: %v", err)
	}
	for i := range 8 {
		dialFrom(t, gw.admin, fmt.Sprintf("127.0.0.%d", 3+i))
	}
	if _, err := second.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("the silent admin connection idle the longest is still open past admin_max_conns 8, reloaded: %v", err)
	}
}

// One client address cannot keep every admin connection busy: it holds an
// eighth of admin_max_conns at most, a connection over that answered 503
// and closed, so that a probe from another address is served while the
// client's requests hold as many connections as it can open (here reloads
// held up, as under the reload lock behind a slow one). Capped at
// admin_max_conns alone, the probe waited in the backlog until a
// connection closed, and a liveness probe gives up in a second.
func TestAdminSlowClientCannotHoldEveryConnection(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {})
	gw, _ := reloadable(t, be.URL, "backends: [%s]\nadmin_max_conns: 8\n")
	reloading := holdReloads(t, gw.gw)
	const reload = "POST /reload HTTP/1.1\r\nHost: x\r\n\r\n"
	busy := dialFrom(t, gw.admin, "127.0.0.2")
	io.WriteString(busy, reload)
	reloading()
	for i := 2; i <= 8; i++ {
		c := dialFrom(t, gw.admin, "127.0.0.2")
		c.SetDeadline(time.Now().Add(bound))
		io.WriteString(c, reload)
		if resp := readResponse(t, bufio.NewReader(c)); resp.StatusCode != http.StatusServiceUnavailable || !resp.Close {
			t.Fatalf("connection %d, over its client's share: %d, want 503 closing", i, resp.StatusCode)
		}
	}
	probe := dialRaw(t, gw.admin)
	probe.SetDeadline(time.Now().Add(bound))
	io.WriteString(probe, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp := readResponse(t, bufio.NewReader(probe)); resp.StatusCode != 200 {
		t.Fatalf("a probe beside the busy client: %d", resp.StatusCode)
	}
}

// Every process on the gateway's host that reaches the admin address
// (127.0.0.1 by default) comes from that same address: it tells none of
// them apart. Capped as one client, they shared an eighth of
// admin_max_conns, and one of them holding that many connections busy (a
// scraper's parallel scrapes, a script polling /readyz while the backends
// are down) had a liveness probe on the same host refused 503 at once. A
// connection from the address it reached is not capped per client:
// admin_max_conns caps them all.
func TestAdminLocalClientsNotCappedAsOne(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {})
	gw, _ := reloadable(t, be.URL, "backends: [%s]\nadmin_max_conns: 8\n")
	reloading := holdReloads(t, gw.gw)
	// From 127.0.0.1, as the probe: the address both reach.
	busy := dialRaw(t, gw.admin)
	io.WriteString(busy, "POST /reload HTTP/1.1\r\nHost: x\r\n\r\n")
	reloading()
	probe := dialRaw(t, gw.admin)
	probe.SetDeadline(time.Now().Add(bound))
	io.WriteString(probe, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp := readResponse(t, bufio.NewReader(probe)); resp.StatusCode != 200 {
		t.Fatalf("a local probe beside a local client holding its share of admin_max_conns: %d", resp.StatusCode)
	}
}

// holdReloads holds g's reloads, once they have given the executor their
// limits, until the test ends; the function it returns waits until a
// reload is held on its connection, busy. Its connection accepted is not
// enough: one the server has yet to start on is idle (StateNew), and
// its client's next connection would close it to take its place.
func holdReloads(t *testing.T, g *gateway.Gateway) (held func()) {
	t.Helper()
	release, reloading := make(chan struct{}), make(chan struct{}, 1)
	gateway.OnLimitsSet(g, func() {
		select {
		case reloading <- struct{}{}:
		default:
		}
		<-release
	})
	t.Cleanup(func() { close(release) }) // before the gateway is stopped, which waits for the admin handlers
	return func() {
		t.Helper()
		select {
		case <-reloading:
		case <-time.After(bound):
			t.Fatal("no reload was held")
		}
		eventually(t, "the reload's connection busy", func() bool { return gateway.BusyAdminConns(g) == 1 })
	}
}

// wantAdminClosed sends request on a connection of its own to the admin
// address, reads the answer, and fails the test unless the server then
// closes the connection within bound.
func wantAdminClosed(t *testing.T, admin, request string) {
	t.Helper()
	c := dialRaw(t, admin)
	c.SetDeadline(time.Now().Add(bound))
	io.WriteString(c, request)
	br := bufio.NewReader(c)
	readResponse(t, br)
	if _, err := br.ReadByte(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("the admin connection is still open after %v (read: %v)", bound, err)
	}
}

// An admin request whose body never comes (its length declared, nothing
// sent) does not hold its connection for ever: the answer goes out at once
// (TestAdminAnswersWithoutWaitingForABody), and what the client sends is
// then read and dropped for timeouts.read at most (or a second, if
// shorter), before the connection is closed.
func TestAdminRequestBodyTimesOut(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {})
	gateway.SetAdminBodyLinger(t, time.Hour) // timeouts.read, not the second, ends the wait
	// The header timeout runs from the server's first read, which may come
	// before the test, descheduled between its dial and its write, has
	// sent the headers: it is long enough for them to arrive. The wait for
	// the body, the point here, ends timeouts.read after them.
	gw := start(t, be.URL, minimal+"timeouts: {read_header: 2s, read: 50ms}\n")
	wantAdminClosed(t, gw.admin, "GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n")
}

// A reload that shortens timeouts.read reaches the admin address as it
// reaches the proxy: a request whose body never comes has its connection
// closed under the new value, not held for the hour the gateway started
// with.
func TestAdminRequestBodyTimeoutFollowsReload(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {})
	gateway.SetAdminBodyLinger(t, time.Hour) // timeouts.read, not the second, ends the wait
	// reloadable returns once the admin server runs with the config the
	// gateway started with: the reload does not reach its server's own
	// read timeout.
	gw, write := reloadable(t, be.URL, "backends: [%s]\ntimeouts: {read_header: 2s, read: 1h}\n")
	write("backends: [%s]\ntimeouts: {read_header: 2s, read: 50ms}\n")
	if err := gw.gw.ReloadFile(); err != nil {
		t.Fatal(err)
	}
	wantAdminClosed(t, gw.admin, "GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n")
}

// No admin endpoint reads a body, and none waits for one: a request
// declaring a body it never sends (a length, or chunks without their end)
// is answered at once, and its connection closed after the answer. Had
// net/http read the unread body before answering, as it does to keep the
// connection, the answer (a reload applied) would have waited for
// timeouts.read, an hour here.
func TestAdminAnswersWithoutWaitingForABody(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {})
	gw, _ := reloadable(t, be.URL, "backends: [%s]\ntimeouts: {read_header: 2s, read: 1h}\n")
	for _, tc := range []struct{ name, request, answer string }{
		{"reload, length", "POST /reload HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n", "reloaded\n"},
		{"reload, chunked", "POST /reload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", "reloaded\n"},
		{"reload, part of the body", "POST /reload HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n{}", "reloaded\n"},
		{"health, length", "GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n", "ok\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, gw.admin)
			c.SetDeadline(time.Now().Add(bound))
			io.WriteString(c, tc.request)
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer within %v: %v", bound, err)
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 || string(body) != tc.answer || !resp.Close {
				t.Errorf("answer %d %q (closing: %v), want 200 %q closing", resp.StatusCode, body, resp.Close, tc.answer)
			}
			if _, err := br.ReadByte(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("the admin connection is still open after %v (read: %v)", bound, err)
			}
		})
	}
}

// An admin client that sends requests and never reads the answers (a large
// /metrics, pipelined) does not hold its connection for ever: an answer has
// timeouts.write from the moment it starts to reach the client, as the
// proxy's do, and then the admin server closes the connection. The client's
// writes end with the close, or with bound if it never comes.
func TestAdminUnreadAnswerTimesOut(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {})
	gw := start(t, be.URL, minimal+"timeouts: {write: 50ms}\n")
	c := dialRaw(t, gw.admin)
	// A small receive buffer, so that the answers fill it soon.
	if err := c.(*net.TCPConn).SetReadBuffer(4 << 10); err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(bound))
	requests := strings.Repeat("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 64)
	var err error
	for err == nil {
		_, err = io.WriteString(c, requests)
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("the admin connection of a client not reading is still open after %v", bound)
	}
}

// dialFrom is dialRaw from the local address ip (any of 127.0.0.0/8 on
// loopback), so that a test can be several clients.
func dialFrom(t *testing.T, url, ip string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	c, err := d.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(bound))
	return c
}

// A connection sending its body slowly is busy, not idle: max_conns cannot
// reclaim it for a newcomer. max_conns_per_client keeps one client address
// sending slowly on every connection from holding every place: its
// connection over the cap is refused as accepted, and another client is
// served at once. A trusted proxy's connections carry many clients, and are
// not capped.
func TestSlowClientCannotHoldEveryConnection(t *testing.T) {
	const slowClient = "127.0.0.2"
	for _, tc := range []struct {
		name, tenant string
		capped       bool
	}{
		{"untrusted", "", true},
		{"trusted proxy", "tenant: {trusted_proxies: [" + slowClient + "]}\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gw := start(t, echo(t), minimal+tc.tenant+
				"max_conns: 3\nmax_conns_per_client: 2\ntimeouts: {read_header: 1h, read: 1h}\n")
			m := gw.gw.Metrics()
			for i := 1; i <= 3; i++ {
				c := dialFrom(t, gw.url, slowClient)
				io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nx")
				eventually(t, fmt.Sprintf("slow connection %d refused, or its request in", i), func() bool {
					return metric(t, m, "gateway_connections_refused_total")+metric(t, m, inGatewayGauge) == float64(i)
				})
			}
			refused := metric(t, m, "gateway_connections_refused_total")
			if want := float64(boolInt(tc.capped)); refused != want {
				t.Errorf("%v slow connections refused, want %v", refused, want)
			}
			if tc.capped {
				c := dialRaw(t, gw.url)
				c.SetDeadline(time.Now().Add(bound))
				io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
				if resp := readResponse(t, bufio.NewReader(c)); resp.StatusCode != 200 {
					t.Fatalf("another client beside the slow one: %d", resp.StatusCode)
				}
			}
		})
	}
}

// A reload that takes an address out of tenant.trusted_proxies caps the
// connections it holds open from then on: they count against its
// max_conns_per_client, and its next connection is refused. Before, a
// proxy taken out (found compromised, say) kept every connection it held
// uncounted until it closed them, and opened one more beside them.
func TestReloadCapsAProxyTakenOutOfTrust(t *testing.T) {
	const proxy = "127.0.0.2"
	const limits = "max_conns: 8\nmax_conns_per_client: 2\ntimeouts: {read_header: 1h, read: 1h}\n"
	gw, write := reloadable(t, echo(t), minimal+"tenant: {trusted_proxies: ["+proxy+"]}\n"+limits)
	m := gw.gw.Metrics()
	for i := 1; i <= 2; i++ {
		c := dialFrom(t, gw.url, proxy)
		io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nx")
		eventually(t, fmt.Sprintf("the proxy's slow request %d in", i), func() bool { return metric(t, m, inGatewayGauge) == float64(i) })
	}
	write(minimal + limits)
	if err := gw.gw.ReloadFile(); err != nil {
		t.Fatal(err)
	}
	c := dialFrom(t, gw.url, proxy)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("the third connection: no answer: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if code, _, _ := refusal(t, string(body)); resp.StatusCode != http.StatusServiceUnavailable || code != "too_many_connections" {
		t.Fatalf("the third connection of an address taken out of trusted_proxies, two of its own open: %d %q; want 503 too_many_connections", resp.StatusCode, body)
	}
}

// A connection over its client's max_conns_per_client is answered before
// it is closed, as a refused request is: 503 with the gateway's JSON body
// and Retry-After, closing the connection, whether its request came
// before the answer or none came at all; and the client reads the answer
// and the end of the stream, not a reset.
func TestConnectionOverClientCapAnswered(t *testing.T) {
	const slowClient = "127.0.0.2"
	gw := start(t, echo(t), minimal+"max_conns: 4\nmax_conns_per_client: 1\ntimeouts: {read_header: 1h, read: 1h}\n")
	m := gw.gw.Metrics()
	busy := dialFrom(t, gw.url, slowClient)
	io.WriteString(busy, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nx")
	eventually(t, "the slow request in", func() bool { return metric(t, m, inGatewayGauge) == 1 })
	for i, request := range []string{"", "GET / HTTP/1.1\r\nHost: x\r\n\r\n"} {
		c := dialFrom(t, gw.url, slowClient)
		io.WriteString(c, request)
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("connection %d over the cap: no answer: %v", i+1, err)
		}
		body, _ := io.ReadAll(resp.Body)
		if code, _, _ := refusal(t, string(body)); resp.StatusCode != http.StatusServiceUnavailable || code != "too_many_connections" ||
			!resp.Close || resp.Header.Get("Retry-After") == "" || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("connection %d over the cap: %d %v %q; want 503 too_many_connections, Retry-After, closing", i+1, resp.StatusCode, resp.Header, body)
		}
		if b, err := io.ReadAll(br); err != nil || len(b) > 0 {
			t.Errorf("connection %d over the cap, after the answer: %q, %v; want the end of the stream", i+1, b, err)
		}
		if got := metric(t, m, "gateway_connections_refused_total"); got != float64(i+1) {
			t.Errorf("gateway_connections_refused_total = %v, want %d", got, i+1)
		}
	}
}

// The HTTP/2 connection preface on a plain connection, which net/http
// hands to the handler as a request, is refused 505, its connection
// closed, and never reaches a backend.
func TestPlainHTTP2PrefaceRefused(t *testing.T) {
	var reached atomic.Int64
	be := backend(t, func(w http.ResponseWriter, r *http.Request) { reached.Add(1) })
	gw := start(t, be.URL, minimal)
	c := dialRaw(t, gw.url)
	c.SetDeadline(time.Now().Add(bound))
	br := bufio.NewReader(c)
	io.WriteString(c, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if code, _, _ := refusal(t, string(body)); resp.StatusCode != http.StatusHTTPVersionNotSupported || code != "method_not_supported" || !resp.Close {
		t.Errorf("%d %q, close %v; want 505 method_not_supported closing the connection", resp.StatusCode, body, resp.Close)
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("%d requests reached the backend", n)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// CONNECT is refused 501, its connection closed, and never reaches a
// backend: proxied, it reached the backend as a request for "/", and the
// backend's 2xx would tell a front proxy that forwarded it to switch to a
// blind tunnel, through which the client's requests would reach the
// gateway with a tenant header of its own.
func TestConnectRefused(t *testing.T) {
	be := recording(t, func(r *http.Request) string { return r.Method + " " + r.RequestURI })
	gw := start(t, be.URL, minimal)
	c := dialRaw(t, gw.url)
	c.SetDeadline(time.Now().Add(bound))
	br := bufio.NewReader(c)
	io.WriteString(c, "CONNECT victim.internal:22 HTTP/1.1\r\nHost: victim.internal:22\r\nX-Tenant: a\r\n\r\n"+
		"GET /tunnelled HTTP/1.1\r\nHost: x\r\nX-Tenant: victim\r\n\r\n")
	if resp := readResponse(t, br); resp.StatusCode != http.StatusNotImplemented || !resp.Close {
		t.Errorf("%d, close %v; want 501 closing the connection", resp.StatusCode, resp.Close)
	}
	if b, err := io.ReadAll(br); err != nil || len(b) > 0 {
		t.Errorf("after the answer: %q, %v; want the connection closed", b, err)
	}
	if got := be.got(); len(got) > 0 {
		t.Errorf("the backend got %q, want nothing", got)
	}
	if n := metric(t, gw.gw.Metrics(), "rejected_total", "reason", "method"); n != 1 {
		t.Errorf("rejected_total{reason=method} = %v, want 1", n)
	}
}

// TRACE, and TRACK, IIS's name for it, are refused 501 and never reach a
// backend, which would echo the request it got: the headers the gateway
// set included. With Max-Forwards 0 too, which would have the gateway
// answer TRACE itself.
func TestTraceRefused(t *testing.T) {
	var reached atomic.Int64
	be := backend(t, func(w http.ResponseWriter, r *http.Request) { reached.Add(1) })
	gw := start(t, be.URL, minimal)
	c := client(t)
	for _, method := range []string{http.MethodTrace, "TRACK"} {
		for _, mf := range []string{"", "0", "5"} {
			resp, body := do(t, c, method, gw.url+"/x", "acme", nil, "Max-Forwards", mf)
			if resp.StatusCode != http.StatusNotImplemented {
				t.Errorf("%s, Max-Forwards %q: %d %q, want 501 method_not_supported", method, mf, resp.StatusCode, body)
			} else if code, _, _ := refusal(t, body); code != "method_not_supported" {
				t.Errorf("%s, Max-Forwards %q: 501 %q, want method_not_supported", method, mf, body)
			}
		}
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("%d requests reached the backend", n)
	}
	if n := metric(t, gw.gw.Metrics(), "rejected_total", "reason", "method"); n != 6 {
		t.Errorf("rejected_total{reason=method} = %v, want 6", n)
	}
}

// OPTIONS with Max-Forwards 0 is the gateway's to answer (RFC 9110 section
// 7.6.2): 200 with no body, never proxied. With more, the backend gets it
// less the gateway's hop; a value that is no number is proxied as sent.
func TestOptionsMaxForwards(t *testing.T) {
	be := recording(t, func(r *http.Request) string { return fmt.Sprintf("%q", r.Header.Values("Max-Forwards")) })
	gw := start(t, be.URL, minimal)
	c := client(t)
	for _, mf := range []string{"0", " 0", "3", "x", ""} {
		hdr := []string{"Max-Forwards", mf}
		if mf == "" {
			hdr = nil
		}
		resp, body := do(t, c, http.MethodOptions, gw.url+"/x", "acme", nil, hdr...)
		if resp.StatusCode != 200 || body != "" {
			t.Errorf("Max-Forwards %q: %d %q, want 200 and no body", mf, resp.StatusCode, body)
		}
	}
	got := be.got()
	if want := `[["2"] ["x"] []]`; fmt.Sprint(got) != want {
		t.Errorf("the backend got Max-Forwards %v, want %s", got, want)
	}
}

// Methods are case-sensitive (RFC 9110 section 9.1), but net/http takes
// "trace" or "Connect" as sent, and a backend may not: Symfony and
// Werkzeug upper-case the method. TRACE, TRACK and CONNECT are refused in
// any case, CONNECT's connection closed, and none reaches a backend.
func TestRefusedMethodsInAnyCase(t *testing.T) {
	be := recording(t, func(r *http.Request) string { return r.Method + " " + r.RequestURI })
	gw := start(t, be.URL, minimal)
	for _, tc := range []struct {
		req   string
		close bool
	}{
		{"trace /x HTTP/1.1\r\nHost: x\r\nX-Tenant: a\r\n\r\n", false},
		{"Trace /x HTTP/1.1\r\nHost: x\r\nX-Tenant: a\r\n\r\n", false},
		{"track /x HTTP/1.1\r\nHost: x\r\nX-Tenant: a\r\n\r\n", false},
		{"connect victim.internal:22 HTTP/1.1\r\nHost: victim.internal:22\r\nX-Tenant: a\r\n\r\n", true},
		{"Connect /x HTTP/1.1\r\nHost: x\r\nX-Tenant: a\r\n\r\n", true},
	} {
		c := dialRaw(t, gw.url)
		c.SetDeadline(time.Now().Add(bound))
		io.WriteString(c, tc.req)
		resp := readResponse(t, bufio.NewReader(c))
		if resp.StatusCode != http.StatusNotImplemented || tc.close && !resp.Close {
			t.Errorf("%q: %d, close %v; want 501, closing the connection %v", tc.req, resp.StatusCode, resp.Close, tc.close)
		}
		c.Close()
	}
	if got := be.got(); len(got) > 0 {
		t.Errorf("the backend got %q, want nothing", got)
	}
	if n := metric(t, gw.gw.Metrics(), "rejected_total", "reason", "method"); n != 5 {
		t.Errorf("rejected_total{reason=method} = %v, want 5", n)
	}
}

// A method override (X-HTTP-Method-Override and its kin, in any spelling,
// or a _method query parameter as PHP reads its name) to TRACE, TRACK or
// CONNECT is refused as the method itself is: a backend honouring it runs
// the method it names. An override to another method is proxied as sent.
func TestMethodOverrideToRefusedMethodRefused(t *testing.T) {
	be := recording(t, func(r *http.Request) string { return r.RequestURI + " " + r.Header.Get("X-Http-Method-Override") })
	gw := start(t, be.URL, minimal)
	c := client(t)
	refused := []struct {
		query string
		hdr   []string
	}{
		{"", []string{"X-HTTP-Method-Override", "TRACE"}},
		{"", []string{"X-HTTP-Method", " trace "}},
		{"", []string{"X-Method-Override", "Track"}},
		{"", []string{"X_HTTP_Method_Override", "CONNECT"}},
		{"?a=1&_method=TRACE", nil},
		{"?.method=trace", nil},
		{"?+_method=track", nil},
		{"?%5Fmethod=connect", nil},
		{"?_method[]=TRACE", nil},
		{"?_method=GET&_method=TRACE", nil},
	}
	for _, tc := range refused {
		resp, body := do(t, c, http.MethodPost, gw.url+"/x"+tc.query, "acme", nil, tc.hdr...)
		if resp.StatusCode != http.StatusNotImplemented {
			t.Errorf("%s %q: %d %q, want 501 method_not_supported", tc.query, tc.hdr, resp.StatusCode, body)
		} else if code, _, _ := refusal(t, body); code != "method_not_supported" {
			t.Errorf("%s %q: 501 %q, want method_not_supported", tc.query, tc.hdr, body)
		}
	}
	for _, tc := range []struct {
		query string
		hdr   []string
	}{
		{"", []string{"X-HTTP-Method-Override", "PATCH"}},
		{"?_method=DELETE&x_method=TRACE&method=TRACE", nil},
	} {
		if resp, body := do(t, c, http.MethodPost, gw.url+"/x"+tc.query, "acme", nil, tc.hdr...); resp.StatusCode != 200 {
			t.Errorf("%s %q: %d %q, want 200", tc.query, tc.hdr, resp.StatusCode, body)
		}
	}
	got := be.got()
	if want := `["/x PATCH" "/x?_method=DELETE&x_method=TRACE&method=TRACE "]`; fmt.Sprintf("%q", got) != want {
		t.Errorf("the backend got %q, want %s", got, want)
	}
	if n := metric(t, gw.gw.Metrics(), "rejected_total", "reason", "method"); n != float64(len(refused)) {
		t.Errorf("rejected_total{reason=method} = %v, want %d", n, len(refused))
	}
}

// The admin address caps a request's line and headers at max_header_bytes,
// as the proxy does (431 beyond it plus net/http's 4 KiB): it read up to
// net/http's default of 1 MiB, sixteen times the proxy's default cap, for
// each connection a client opened to it.
func TestAdminHeadersCapped(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {})
	gw := start(t, be.URL, minimal+"max_header_bytes: 1024\n")
	for _, addr := range []string{gw.url, gw.admin} {
		req, err := http.NewRequest(http.MethodGet, addr+"/healthz", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Big", strings.Repeat("b", 16<<10))
		resp, err := client(t).Do(req)
		if err != nil {
			t.Fatalf("%s: %v", addr, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("%s: 16 KiB of headers over max_header_bytes 1024: %d, want 431", addr, resp.StatusCode)
		}
	}
}
