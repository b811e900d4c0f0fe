package gateway_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// upgrader is a backend that switches every request to the "test" protocol
// and then echoes what it reads until the connection closes. It returns its
// URL and a function that closes the connections it holds, which runs at the
// end of the test too.
func upgrader(t *testing.T) (url string, closeAll func()) {
	return hijacker(t, func(conn net.Conn, brw *bufio.ReadWriter) {
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: test\r\n\r\n")
		brw.Flush()
		go func() {
			defer conn.Close()
			io.Copy(conn, brw)
		}()
	})
}

// hijacker is a backend that takes over every request's connection and
// hands it to serve. It returns its URL and a function that closes the
// connections it took, which runs at the end of the test too.
func hijacker(t *testing.T, serve func(net.Conn, *bufio.ReadWriter)) (url string, closeAll func()) {
	var mu sync.Mutex
	var held []net.Conn
	closeAll = func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	}
	t.Cleanup(closeAll)
	return backend(t, func(w http.ResponseWriter, r *http.Request) {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		mu.Lock()
		held = append(held, conn)
		mu.Unlock()
		serve(conn, brw)
	}).URL, closeAll
}

// upgradeRequest asks for the "test" protocol for tenant a.
const upgradeRequest = "GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: test\r\nX-Tenant: a\r\n\r\n"

// switched opens a connection to the gateway, sends req, and reads the
// answer, which must switch protocols; the connection is closed at the end
// of the test.
func switched(t *testing.T, url, req string) (*net.TCPConn, *bufio.Reader) {
	t.Helper()
	c := dialRaw(t, url).(*net.TCPConn)
	c.SetDeadline(time.Now().Add(bound))
	io.WriteString(c, req)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer to the upgrade: %v", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade answered %d", resp.StatusCode)
	}
	return c, br
}

// switchedInTime is switched for an upgrade whose deadline may pass
// before its switch: it reports false for an answer 504, the deadline's.
func switchedInTime(t *testing.T, url, req string) bool {
	t.Helper()
	c := dialRaw(t, url)
	c.SetDeadline(time.Now().Add(bound))
	io.WriteString(c, req)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	switch {
	case err != nil:
		t.Fatalf("no answer to the upgrade: %v", err)
	case resp.StatusCode == http.StatusGatewayTimeout:
		c.Close()
		return false
	case resp.StatusCode != http.StatusSwitchingProtocols:
		t.Fatalf("upgrade answered %d", resp.StatusCode)
	}
	return true
}

// upgrade opens a connection to the gateway and switches it to the "test"
// protocol for tenant; the connection is closed at the end of the test.
func upgrade(t *testing.T, url, tenant string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, br := switched(t, url, strings.Replace(upgradeRequest, "X-Tenant: a", "X-Tenant: "+tenant, 1))
	io.WriteString(c, "ping\n")
	if line, err := br.ReadString('\n'); line != "ping\n" {
		t.Fatalf("echo through the upgraded connection: %q, %v", line, err)
	}
	return c, br
}

// An upgraded connection is an in-flight request like any other for the
// drain: it has drain_timeout to finish, then it is cancelled, and Serve
// returns; the request's own deadline (timeouts.upstream, an hour here)
// does not hold the drain up.
func TestDrainCancelsUpgradedConnections(t *testing.T) {
	url, closeBackend := upgrader(t)
	gw := start(t, url, minimal+"timeouts: {upstream: 1h}\ndrain_timeout: 50ms\n")
	c, br := upgrade(t, gw.url, "a")
	stopped := make(chan error, 1)
	go func() { stopped <- gw.stop() }()
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(bound / 2):
		// Ending the upgraded connection at both ends lets the drain end
		// within stop's own bound, so that the test does.
		c.Close()
		closeBackend()
		<-stopped
		t.Fatalf("Serve did not return within %v of the drain starting, with drain_timeout 50ms: the upgraded connection held it up", bound/2)
	}
	if _, err := br.ReadByte(); err == nil {
		t.Error("the upgraded connection is still open after the drain")
	}
}

// An upgraded connection that ends normally is counted as answered with
// 101, not as a request whose client went away while it waited in the
// queue.
func TestUpgradeCountedAsAnswered(t *testing.T) {
	url, _ := upgrader(t)
	gw := start(t, url, minimal)
	c, _ := upgrade(t, gw.url, "a")
	c.Close()
	eventually(t, "the upgraded request to leave the gateway", func() bool {
		return metric(t, gw.gw.Metrics(), inGatewayGauge) == 0
	})
	if got := metric(t, gw.gw.Metrics(), "queue_dropped_total", "queue", "tenant"); got != 0 {
		t.Errorf("queue_dropped_total = %v after an upgraded connection that ran and ended, want 0", got)
	}
	if got := metric(t, gw.gw.Metrics(), "tasks_canceled_total", "kind", "queued"); got != 0 {
		t.Errorf("tasks_canceled_total{kind=queued} = %v, want 0", got)
	}
	if got := metric(t, gw.gw.Metrics(), requestsTotal, "code", "499"); got != 0 {
		t.Errorf("%s{code=499} = %v, want 0 (the upgrade was answered 101)", requestsTotal, got)
	}
}

// switcher is a backend that answers every request 101 Switching Protocols
// to protocol proto (no Upgrade header if proto is ""), whatever the
// request asked for, and then waits for the gateway to close the
// connection. Each close is reported on the channel it returns.
func switcher(t *testing.T, proto string) (url string, closed <-chan struct{}) {
	ch := make(chan struct{}, 16)
	url, _ = hijacker(t, func(_ net.Conn, brw *bufio.ReadWriter) {
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\n")
		if proto != "" {
			brw.WriteString("Connection: Upgrade\r\nUpgrade: " + proto + "\r\n")
		}
		brw.WriteString("\r\n")
		brw.Flush()
		go func() {
			io.Copy(io.Discard, brw) // until the gateway closes it
			ch <- struct{}{}
		}()
	})
	return url, ch
}

// A backend that switches protocols when the request asked for no switch,
// or for another protocol, has failed: the client gets 502, and the
// backend connection the switch handed to the gateway is closed at once,
// not left open until the gateway closes.
func TestUnaskedSwitchIsABackendError(t *testing.T) {
	for _, tc := range []struct{ name, asked, answered string }{
		{"plain request", "", "test"},
		{"plain request, no Upgrade header", "", ""},
		{"another protocol", "test", "other"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, closed := switcher(t, tc.answered)
			gw := start(t, url, minimal)
			c := dialRaw(t, gw.url)
			c.SetDeadline(time.Now().Add(bound))
			req := "GET / HTTP/1.1\r\nHost: x\r\nX-Tenant: a\r\n"
			if tc.asked != "" {
				req += "Connection: Upgrade\r\nUpgrade: " + tc.asked + "\r\n"
			}
			io.WriteString(c, req+"\r\n")
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadGateway {
				t.Errorf("answered %d, want 502", resp.StatusCode)
			}
			select {
			case <-closed:
			case <-time.After(bound):
				t.Errorf("the backend connection is still open %v after the gateway answered", bound)
			}
			eventually(t, "the request to leave the gateway", func() bool {
				return metric(t, gw.gw.Metrics(), inGatewayGauge) == 0
			})
		})
	}
}

// A request asking to switch to h2c is proxied as a plain request: were
// the switch passed on to a backend that takes it, the client would speak
// HTTP/2 to the backend through the connection, every stream a request
// the gateway never sees, never admits, and whose tenant header the client
// writes (h2c smuggling). The request is answered by the backend as any
// other, and the connection goes on serving HTTP/1.1.
func TestH2CUpgradeNotPassedOn(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(strings.ToLower(r.Header.Get("Upgrade")), "h2c") {
			conn, brw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			defer conn.Close()
			brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n")
			brw.Flush()
			return
		}
		io.WriteString(w, "plain")
	})
	gw := start(t, be.URL, minimal)
	for _, up := range []string{"h2c", "H2C", "websocket, h2c"} {
		c := dialRaw(t, gw.url)
		c.SetDeadline(time.Now().Add(bound))
		br := bufio.NewReader(c)
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: "+up+
			"\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n")
		for i := range 2 {
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("Upgrade: %s: no answer %d: %v", up, i+1, err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(b) != "plain" {
				t.Fatalf("Upgrade: %s: answer %d: %d %q, want 200 from the backend, unswitched", up, i+1, resp.StatusCode, b)
			}
			io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		}
	}
}

// An upgraded connection whose client neither sends nor reads ends at the
// request's deadline (timeouts.upstream), at both ends, and the request
// leaves the gateway, its slot and its tenant's place free: whether the
// backend has closed its end (the copy from the client waits on the
// client) or keeps sending (the copy to the client waits on the client).
// Closing only the backend's connection, as the proxy does at the
// deadline, freed neither copy, and the request stayed in the gateway for
// as long as its client kept the connection open.
func TestUpgradeWithASilentClientEndsAtTheDeadline(t *testing.T) {
	for _, tc := range []struct {
		name  string
		serve func(net.Conn, *bufio.ReadWriter)
	}{
		{"backend closed", func(conn net.Conn, brw *bufio.ReadWriter) {
			brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: test\r\n\r\nbye")
			brw.Flush()
			conn.Close()
		}},
		{"backend sending", func(conn net.Conn, brw *bufio.ReadWriter) {
			brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: test\r\n\r\n")
			brw.Flush()
			go func() {
				defer conn.Close()
				chunk := make([]byte, 64<<10)
				for {
					if _, err := conn.Write(chunk); err != nil {
						return // the gateway closed the connection
					}
				}
			}()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, _ := hijacker(t, tc.serve)
			// The 1s runs from the request's arrival: a stall of the
			// machine past it before the backend's 101 is through has the
			// request answered 504, with no upgrade to end. Such a try is
			// made again, with a gateway of its own: the try judged is
			// one switched within its deadline, whatever the machine's pace.
			var gw *running
			for try := 1; ; try++ {
				gw = start(t, url, minimal+"timeouts: {upstream: 1s}\n")
				if switchedInTime(t, gw.url, upgradeRequest) {
					break
				}
				if try == 10 {
					t.Fatalf("in %d tries no upgrade was switched within its 1s deadline", try)
				}
			}
			// The client now neither reads nor sends, and keeps the
			// connection open.
			eventually(t, "the upgraded request to leave the gateway", func() bool {
				return metric(t, gw.gw.Metrics(), inGatewayGauge) == 0
			})
			if got := gw.gw.Executor().Stats().Running; got != 0 {
				t.Errorf("%d requests running after the upgrade's deadline, want 0", got)
			}
		})
	}
}

// What a client sends right after its upgrade request, in the protocol it
// asked for, reaches the backend first, before what it sends once
// switched: RFC 9110 7.8 lets it start as soon as its request is sent.
// net/http had read those bytes with the request, and the proxy, copying
// from the connection alone, dropped them.
func TestUpgradeKeepsWhatFollowsTheRequest(t *testing.T) {
	url, _ := upgrader(t)
	gw := start(t, url, minimal)
	c, br := switched(t, gw.url, upgradeRequest+"early\n")
	io.WriteString(c, "late\n")
	for _, want := range []string{"early\n", "late\n"} {
		if line, err := br.ReadString('\n'); line != want {
			t.Fatalf("echoed %q (%v), want %q", line, err, want)
		}
	}
}

// A client that ends its side of an upgraded connection (a half-close,
// after its last message) still gets the backend's answer to it: the
// half-close is passed on to the backend, which answers once it has read
// everything, and the connection ends when both sides have. The backend
// connection could not be half-closed, and the proxy tore the upgrade
// down at the client's half-close, the answer lost.
func TestUpgradeHalfClosePassedOn(t *testing.T) {
	url, _ := hijacker(t, func(conn net.Conn, brw *bufio.ReadWriter) {
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: test\r\n\r\n")
		brw.Flush()
		go func() {
			defer conn.Close()
			got, _ := io.ReadAll(brw) // until the client's half-close
			io.WriteString(conn, "got "+string(got))
		}()
	})
	gw := start(t, url, minimal)
	c, br := switched(t, gw.url, upgradeRequest)
	io.WriteString(c, "ping")
	c.CloseWrite()
	if got, err := io.ReadAll(br); string(got) != "got ping" {
		t.Errorf("after its half-close the client read %q (%v), want %q", got, err, "got ping")
	}
}

// switchingBackend is a backend that switches a request asking for an
// upgrade to "test" and echoes what follows, and answers any other with
// the text plain gives. It returns its URL.
func switchingBackend(t *testing.T, plain func(*http.Request) string) string {
	return backend(t, switchOnUpgrade(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, plain(r))
	})).URL
}

// switchOnUpgrade is a backend's handler that switches a request asking
// for an upgrade to "test" and echoes what follows, and serves any other
// with plain.
func switchOnUpgrade(plain http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") == "" {
			plain(w, r)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: test\r\n\r\n")
		brw.Flush()
		io.Copy(conn, brw)
	}
}

// An HTTP/1.0 request's Upgrade is ignored (RFC 9110 7.8: a server MUST
// ignore it), and the request proxied as if it had not asked: HTTP/1.0
// has no protocol switch, and a front proxy speaking it to the gateway,
// which took the connection for one still carrying requests, would send
// its next clients' requests into the switched connection, straight to
// the backend, never admitted, with tenant headers of their own.
func TestHTTP10UpgradeIgnored(t *testing.T) {
	url := switchingBackend(t, func(r *http.Request) string { return "plain " + r.Header.Get("Connection") })
	gw := start(t, url, minimal)
	c := dialRaw(t, gw.url)
	c.SetDeadline(time.Now().Add(bound))
	io.WriteString(c, "GET / HTTP/1.0\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: test\r\nX-Tenant: a\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "plain " {
		t.Errorf("answered %d %q, want 200 from the backend, unswitched", resp.StatusCode, b)
	}
}

// A request asking to switch to a protocol whose name is not printable
// ASCII is proxied as if it had not asked (RFC 9110 7.8 lets a server
// ignore Upgrade): the proxy refuses such a switch before any backend
// sees the request, through the gateway's answer for a failed backend,
// so that the client's malformed header was a 502 backend_error, and a
// failure of its tenant's breaker.
func TestUpgradeToAnInvalidProtocolIgnored(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "plain "+r.Header.Get("Upgrade"))
	})
	gw := start(t, be.URL, minimal+"breaker: {per: tenant, consecutive_failures: 1}\n")
	for _, tc := range []struct{ up, want string }{
		{"t\xe9st", "plain "},
		{"a\tb", "plain "},
		{"t\x80\r\nUpgrade: test", "plain test"}, // the valid one is passed on, and this backend does not switch
	} {
		c := dialRaw(t, gw.url)
		c.SetDeadline(time.Now().Add(bound))
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: "+tc.up+"\r\nX-Tenant: a\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("Upgrade: %q: no answer: %v", tc.up, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != tc.want {
			t.Errorf("Upgrade: %q: answered %d %q, want 200 %q from the backend", tc.up, resp.StatusCode, b, tc.want)
		}
	}
	if resp, body := do(t, client(t), http.MethodGet, gw.url, "a", nil); resp.StatusCode != 200 {
		t.Errorf("the tenant's next request: %d %q, want 200", resp.StatusCode, body)
	}
}

// A request whose connection must be closed after its answer (both
// Content-Length and Transfer-Encoding, RFC 9112 6.1) does not switch
// protocols: it is proxied as if it had not asked, and its connection
// closed. Switched, the connection stayed open, and what a front proxy
// took for part of the request's body went on to the backend, past the
// gateway, in the switched protocol.
func TestUpgradeOfASmuggledRequestIgnored(t *testing.T) {
	url := switchingBackend(t, func(*http.Request) string { return "plain" })
	gw := start(t, url, minimal)
	c := dialRaw(t, gw.url)
	c.SetDeadline(time.Now().Add(bound))
	const next = "GET /x HTTP/1.1\r\nHost: x\r\nX-Tenant: b\r\n\r\n"
	io.WriteString(c, fmt.Sprintf("GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: test\r\nX-Tenant: a\r\n"+
		"Content-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n%s", 5+len(next), next))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "plain" {
		t.Fatalf("answered %d %q, want 200 from the backend, unswitched", resp.StatusCode, b)
	}
	if rest, err := io.ReadAll(br); len(rest) != 0 {
		t.Errorf("after the answer the connection gave %q (%v), want its close", rest, err)
	}
}

// goneClient is a client's writer whose connection, once taken over for
// a switch, takes no write: the client went away as the backend switched.
type goneClient struct{ h http.Header }

func (w *goneClient) Header() http.Header         { return w.h }
func (w *goneClient) Write(p []byte) (int, error) { return len(p), nil }
func (w *goneClient) WriteHeader(int)             {}

func (w *goneClient) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, peer := net.Pipe()
	peer.Close() // writes to c fail: io.ErrClosedPipe
	return c, bufio.NewReadWriter(bufio.NewReader(c), bufio.NewWriter(c)), nil
}

// A client that goes away as the backend switches protocols, so that the
// 101 cannot be written to it, is counted as gone (499), not as a failed
// backend: with breaker.per: tenant, its tenant's breaker does not open.
// net/http no longer ends the request's context for a connection the proxy
// has taken over, and the proxy's error writing the 101 was answered as a
// backend's, 502 and a failure of the tenant's breaker.
func TestClientGoneAtTheSwitchIsNoBackendFailure(t *testing.T) {
	url := switchingBackend(t, func(*http.Request) string { return "plain" })
	g := build(t, url, minimal+"breaker: {per: tenant, consecutive_failures: 1, timeout: 1h}\n")
	t.Cleanup(func() { g.Close() })
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("Connection", "Upgrade")
	r.Header.Set("Upgrade", "test")
	r.Header.Set("X-Tenant", "a")
	func() {
		defer func() {
			// The gateway has the server cut a request whose client went away.
			if v := recover(); v != nil && v != http.ErrAbortHandler {
				panic(v)
			}
		}()
		g.ServeHTTP(&goneClient{h: http.Header{}}, r)
	}()
	if got := metric(t, g.Metrics(), requestsTotal, "code", "502"); got != 0 {
		t.Errorf("%s{code=502} = %v, want 0", requestsTotal, got)
	}
	if got := metric(t, g.Metrics(), requestsTotal, "code", "499"); got != 1 {
		t.Errorf("%s{code=499} = %v, want 1", requestsTotal, got)
	}
	rec := httptest.NewRecorder()
	next := httptest.NewRequest(http.MethodGet, "/", nil)
	next.Header.Set("X-Tenant", "a")
	g.ServeHTTP(rec, next)
	if rec.Code != http.StatusOK || rec.Body.String() != "plain" {
		t.Errorf("the tenant's next request: %d %q, want 200 \"plain\"", rec.Code, rec.Body)
	}
}
