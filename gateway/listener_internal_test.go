package gateway

import (
	"bufio"
	"context"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestLengthScanner(t *testing.T) {
	stream := "POST / HTTP/1.1\r\nHost: x\r\nCONTENT-length: 3\r\nTransfer-Encoding: chunked\r\n\r\n" +
		"3\r\nabc\r\n0\r\n\r\nGET / HTTP/1.1\r\ncontent-length:0\r\nX-Content-Length: 1\r\n" +
		"X-A: a\r\n \tContent-Length: 2\r\n\r\n"
	for size := 1; size <= len(stream); size++ {
		var s lineScanner
		n := 0
		for i := 0; i < len(stream); i += size {
			k, _ := s.count([]byte(stream[i:min(i+size, len(stream))]), lengthLine)
			n += k
		}
		if n != 3 {
			t.Fatalf("reads of %d bytes: %d Content-Length lines, want 3", size, n)
		}
	}
	// Random streams of header-like pieces, read in random sizes, against
	// a plain count.
	pieces := []string{"\n", "\r\n", "content-length:", "Content-Length: 1", "conTENT-LENGTH", "x", ":", "\ncontent", " ", "\t"}
	line := regexp.MustCompile(`\n[ \t]*content-length:`)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		var b strings.Builder
		for range rng.IntN(40) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		stream := b.String()
		want := len(line.FindAllStringIndex(strings.ToLower(stream), -1))
		var s lineScanner
		got := 0
		for i := 0; i < len(stream); {
			j := min(len(stream), i+1+rng.IntN(20))
			k, _ := s.count([]byte(stream[i:j]), lengthLine)
			got += k
			i = j
		}
		if got != want {
			t.Fatalf("%q: counted %d, want %d", stream, got, want)
		}
	}
}

// Transfer-Encoding lines are counted in any case, with blanks before the
// colon, on folded lines (told apart) and in a body, but not as part of
// another header's name.
func TestEncodingScanner(t *testing.T) {
	stream := "POST / HTTP/1.0\r\ntransfer-ENCODING: chunked\r\nX-Transfer-Encoding: x\r\n" +
		"Transfer-Encoding :chunked\r\nX-A: a\r\n\t Transfer-Encoding: chunked\r\n \r\n" +
		"Transfer-Encoding\r\n Transfer-Encoding"
	for size := 1; size <= len(stream); size++ {
		var s lineScanner
		n, folded := 0, 0
		for i := 0; i < len(stream); i += size {
			k, f := s.count([]byte(stream[i:min(i+size, len(stream))]), encodingLine)
			n, folded = n+k, folded+f
		}
		if n != 5 || folded != 2 {
			t.Fatalf("reads of %d bytes: %d Transfer-Encoding lines, %d folded; want 5, 2 folded", size, n, folded)
		}
	}
}

// readConn is a connection whose reads come from r.
type readConn struct {
	net.Conn
	r io.Reader
}

func (c readConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// A request followed by a pipelined chunked one, read in the same read,
// keeps its connection: the next request's Transfer-Encoding line is seen
// before this one is served, but is net/http's own. Folded ones close.
func TestPipelinedChunkedKeepsConnection(t *testing.T) {
	const chunked = "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
	for _, tc := range []struct {
		name   string
		stream string
		want   []bool // smuggled, request by request
	}{
		{"plain", "GET / HTTP/1.1\r\nHost: x\r\n\r\n" + chunked + "GET / HTTP/1.1\r\nHost: x\r\n\r\n", []bool{false, false, false}},
		{"length", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi" + chunked, []bool{false, false}},
		{"folded", "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\r\n Transfer-Encoding: chunked\r\n\r\n" + chunked, []bool{true, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &conn{Conn: readConn{r: strings.NewReader(tc.stream)}}
			ctx := context.WithValue(context.Background(), connKey{}, c)
			br := bufio.NewReader(c) // one read takes the whole stream, as a server's can
			for i, want := range tc.want {
				r, err := http.ReadRequest(br)
				if err != nil {
					t.Fatal(err)
				}
				if got := smuggled(r.WithContext(ctx)); got != want {
					t.Errorf("request %d: smuggled %v, want %v", i+1, got, want)
				}
				io.Copy(io.Discard, r.Body)
			}
		})
	}
}

// fakeListener hands out pipe ends and counts its Accept calls.
type fakeListener struct {
	accepted atomic.Int32
	closed   chan struct{}
}

func (f *fakeListener) Accept() (net.Conn, error) {
	f.accepted.Add(1)
	c, _ := net.Pipe()
	return c, nil
}
func (f *fakeListener) Close() error   { close(f.closed); return nil }
func (f *fakeListener) Addr() net.Addr { return &net.TCPAddr{} }

// At the cap with no idle connection, Accept waits without accepting; a
// close makes room.
func TestListenerWaitsAtTheCap(t *testing.T) {
	inner := &fakeListener{closed: make(chan struct{})}
	l := newListener(inner, 1, 1, noneExempt, func() {}, func() {})
	first, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan net.Conn)
	go func() {
		c, _ := l.Accept()
		got <- c
	}()
	for {
		l.mu.Lock()
		w := l.waiting
		l.mu.Unlock()
		if w == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if n := inner.accepted.Load(); n != 1 {
		t.Fatalf("%d connections accepted at a cap of 1", n)
	}
	first.Close()
	second := <-got
	if n := inner.accepted.Load(); n != 2 || second == nil {
		t.Fatalf("after a close: %d accepted, %v", n, second)
	}
	second.Close()
	l.Close()
}

// blockingListener's Accept says it has been called, then waits for a
// connection to hand out.
type blockingListener struct {
	entered chan struct{}
	conns   chan net.Conn
	closed  chan struct{}
}

func (b *blockingListener) Accept() (net.Conn, error) {
	b.entered <- struct{}{}
	select {
	case c := <-b.conns:
		return c, nil
	case <-b.closed:
		return nil, net.ErrClosed
	}
}
func (b *blockingListener) Close() error   { close(b.closed); return nil }
func (b *blockingListener) Addr() net.Addr { return &net.TCPAddr{} }

// The connections counted (gateway_connections) are those open: not the
// place Accept keeps for the connection it is waiting for.
func TestListenerCountsOpenConnectionsOnly(t *testing.T) {
	inner := &blockingListener{entered: make(chan struct{}), conns: make(chan net.Conn), closed: make(chan struct{})}
	l := newListener(inner, 4, 4, noneExempt, func() {}, func() {})
	accepted := make(chan net.Conn)
	accept := func() {
		go func() {
			c, _ := l.Accept()
			accepted <- c
		}()
		<-inner.entered
	}
	accept()
	if n := l.count(); n != 0 {
		t.Errorf("waiting for the first connection: %d counted, want 0", n)
	}
	c, peer := net.Pipe()
	defer peer.Close()
	inner.conns <- c
	first := <-accepted
	accept()
	if n := l.count(); n != 1 {
		t.Errorf("one connection open, waiting for the next: %d counted, want 1", n)
	}
	first.Close()
	if n := l.count(); n != 0 {
		t.Errorf("none open, waiting for the next: %d counted, want 0", n)
	}
	l.Close()
	if c := <-accepted; c != nil {
		t.Errorf("Accept after Close: %v", c)
	}
}

// Lowering the cap closes no connection by itself. Connections over the
// new cap are closed as at the cap: the next newcomer closes idle ones,
// the longest idle first, until it has a place under the cap, and leaves
// the rest (and every busy one) open.
func TestListenerLoweredCap(t *testing.T) {
	inner := &fakeListener{closed: make(chan struct{})}
	var reclaimed int
	l := newListener(inner, 5, 5, noneExempt, func() { reclaimed++ }, func() {})
	var cs []*conn
	for range 5 {
		nc, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, nc.(*conn))
	}
	for _, c := range cs[:4] {
		l.connState(c, http.StateIdle) // cs[4] stays busy
	}
	l.setMax(3)
	if n := l.count(); n != 5 || reclaimed != 0 {
		t.Fatalf("after lowering the cap: %d open, %d closed; want 5 open, none closed", n, reclaimed)
	}
	nc, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	// 5 open under a cap of 3: a place for the newcomer takes 3 closed.
	if reclaimed != 3 || l.count() != 3 {
		t.Errorf("a newcomer after lowering the cap from 5 to 3: %d closed, %d open; want 3 closed, 3 open", reclaimed, l.count())
	}
	l.mu.Lock()
	for i, c := range cs {
		if want := i < 3; c.gone != want {
			t.Errorf("connection %d (idle: %v): closed %v, want %v", i, i < 4, c.gone, want)
		}
	}
	l.mu.Unlock()
	nc.Close()
	cs[3].Close()
	cs[4].Close()
	l.Close()
}

func noneExempt(netip.Addr) bool { return false }

// A client is an IPv4 address, or an IPv6 /64, which one host is given
// whole and can pick any address in; an exempt address (a trusted proxy)
// is no client.
func TestListenerClientOf(t *testing.T) {
	l := newListener(nil, 1, 1, func(a netip.Addr) bool { return a == netip.MustParseAddr("10.0.0.9") }, func() {}, func() {})
	for _, tc := range []struct {
		addr, want string
	}{
		{"192.0.2.7", "192.0.2.7/32"},
		{"::ffff:192.0.2.7", "192.0.2.7/32"},
		{"2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"},
		{"2001:db8:1:2:bbbb::2", "2001:db8:1:2::/64"},
		{"10.0.0.9", ""},
	} {
		nc := addrConn{addr: &net.TCPAddr{IP: net.ParseIP(tc.addr), Port: 1234}}
		p, ok := l.clientOf(nc)
		got := ""
		if ok {
			got = p.String()
		}
		if got != tc.want {
			t.Errorf("%s: client %q, want %q", tc.addr, got, tc.want)
		}
	}
}

// addrConn is a connection that has only its remote address.
type addrConn struct {
	net.Conn
	addr net.Addr
}

func (c addrConn) RemoteAddr() net.Addr { return c.addr }

// addrListener hands out pipe ends from the next address of addrs.
type addrListener struct {
	addrs []string
}

func (a *addrListener) Accept() (net.Conn, error) {
	c, _ := net.Pipe()
	addr := a.addrs[0]
	a.addrs = a.addrs[1:]
	return addrConn{Conn: c, addr: &net.TCPAddr{IP: net.ParseIP(addr), Port: 1}}, nil
}
func (a *addrListener) Close() error   { return nil }
func (a *addrListener) Addr() net.Addr { return &net.TCPAddr{} }

// Under max_conns, a client at max_conns_per_client that opens another
// connection has its own connection idle the longest closed for it; with
// none idle, the new one is closed, and the next connection, another
// client's, takes the place. Raising the cap (a reload) lets the client
// open more.
func TestListenerPerClientCap(t *testing.T) {
	inner := &addrListener{addrs: []string{"192.0.2.1", "192.0.2.1", "192.0.2.1", "192.0.2.2", "192.0.2.1", "192.0.2.1"}}
	var reclaimed, refused int
	l := newListener(inner, 10, 1, noneExempt, func() { reclaimed++ }, func() { refused++ })
	accept := func() *conn { t.Helper(); return acceptConn(t, l) }
	first := accept()
	l.connState(first, http.StateIdle)
	second := accept() // closes first, its client's idle one
	if reclaimed != 1 || refused != 0 || !first.gone || l.count() != 1 {
		t.Fatalf("a client's second connection at its cap, its first idle: %d reclaimed, %d refused, first closed %v, %d open; want 1, 0, true, 1",
			reclaimed, refused, first.gone, l.count())
	}
	l.connState(second, http.StateActive)
	other := accept() // 192.0.2.1's third is refused; 192.0.2.2's taken
	if refused != 1 || l.count() != 2 || other.client.Addr() != netip.MustParseAddr("192.0.2.2") {
		t.Fatalf("a busy client's third connection: %d refused, %d open, then %v; want 1, 2, 192.0.2.2", refused, l.count(), other.client)
	}
	l.setPerClient(2)
	more := accept()
	if refused != 1 || l.count() != 3 || more.client.Addr() != netip.MustParseAddr("192.0.2.1") {
		t.Fatalf("after raising the cap to 2: %d refused, %d open; want 1, 3", refused, l.count())
	}
	for _, c := range []*conn{second, other, more} {
		c.Close()
	}
	l.mu.Lock()
	if len(l.clients) != 0 {
		t.Errorf("after every connection closed, %d clients counted", len(l.clients))
	}
	l.mu.Unlock()
	l.Close()
}

// pipeListener hands out pipe ends from the next address of addrs, and
// keeps the other ends, the clients'.
type pipeListener struct {
	addrs   []string
	clients []net.Conn
}

func (p *pipeListener) Accept() (net.Conn, error) {
	s, c := net.Pipe()
	addr := p.addrs[0]
	p.addrs = p.addrs[1:]
	p.clients = append(p.clients, c)
	return addrConn{Conn: s, addr: &net.TCPAddr{IP: net.ParseIP(addr), Port: 1}}, nil
}
func (p *pipeListener) Close() error   { return nil }
func (p *pipeListener) Addr() net.Addr { return &net.TCPAddr{} }

// Refused connections are answered on goroutines of their own, at most
// maxLingering at once: beyond, one is closed without its answer, and
// Close ends those still being answered, so that a client opening
// connections as fast as it can, and reading none of its answers, holds
// no more than maxLingering goroutines, and none past the listener.
func TestListenerRefusalsBounded(t *testing.T) {
	defer func(d time.Duration) { refuseLinger = d }(refuseLinger)
	refuseLinger = time.Hour // the answers wait for their clients, not a clock
	inner := &pipeListener{addrs: []string{"192.0.2.1"}}
	for range maxLingering + 1 {
		inner.addrs = append(inner.addrs, "192.0.2.1")
	}
	inner.addrs = append(inner.addrs, "192.0.2.2")
	var refused int
	l := newListener(inner, 10, 1, noneExempt, func() {}, func() { refused++ })
	l.answer = connsRefusal
	busy, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	l.connState(busy, http.StateActive)
	if _, err := l.Accept(); err != nil { // refuses all but 192.0.2.2's
		t.Fatal(err)
	}
	lingering := func() int {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.lingering)
	}
	if refused != maxLingering+1 || lingering() != maxLingering {
		t.Fatalf("%d refused, %d being answered; want %d, %d", refused, lingering(), maxLingering+1, maxLingering)
	}
	// The first refused is answered; the last, over the bound, is not.
	first, last := inner.clients[1], inner.clients[maxLingering+1]
	got := make([]byte, len(connsRefusal))
	if _, err := io.ReadFull(first, got); err != nil || string(got) != string(connsRefusal) {
		t.Errorf("the first refused connection read %q, %v; want the answer", got, err)
	}
	if n, err := last.Read(got); err != io.EOF {
		t.Errorf("the refused connection over the bound read %q, %v; want it closed", got[:n], err)
	}
	l.Close()
	for _, c := range inner.clients[2 : maxLingering+1] {
		if n, err := c.Read(got); err != io.EOF {
			t.Errorf("a refused connection after Close read %q, %v; want it closed", got[:n], err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); lingering() > 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d refused connections still being answered after Close", lingering())
		}
	}
	busy.Close()
	for _, c := range inner.clients {
		c.Close()
	}
}

// A reload that takes an address out of the trusted proxies makes its open
// connections count against its client's cap, the idle ones among them
// on its idle list; one that puts it back in makes them count no more. No
// connection is closed by the change itself.
func TestListenerRejudgesOpenConnections(t *testing.T) {
	const proxy, other = "192.0.2.9", "192.0.2.1"
	var trusted atomic.Bool
	trusted.Store(true)
	exempt := func(a netip.Addr) bool { return trusted.Load() && a == netip.MustParseAddr(proxy) }
	inner := &addrListener{addrs: []string{proxy, proxy, proxy, proxy, other, proxy}}
	var reclaimed, refused int
	l := newListener(inner, 10, 2, exempt, func() { reclaimed++ }, func() { refused++ })
	accept := func() *conn { t.Helper(); return acceptConn(t, l) }
	counted := func() int {
		l.mu.Lock()
		defer l.mu.Unlock()
		if cc := l.clients[netip.MustParsePrefix(proxy+"/32")]; cc != nil {
			return cc.n
		}
		return 0
	}
	busy := []*conn{accept(), accept()}
	for _, c := range busy {
		l.connState(c, http.StateActive)
	}
	idle := accept()
	l.connState(idle, http.StateIdle)
	if n := counted(); n != 0 || refused != 0 {
		t.Fatalf("a trusted proxy's three connections: %d counted, %d refused; want 0, 0", n, refused)
	}

	trusted.Store(false) // the reload's config
	l.rejudge()
	if n := counted(); n != 3 || idle.gone || busy[0].gone || busy[1].gone {
		t.Fatalf("after the proxy was taken out: %d counted, closed %v %v %v; want 3, none closed", n, busy[0].gone, busy[1].gone, idle.gone)
	}
	// Over its cap of 2, the address's next connection closes its own
	// idle one, and is refused still: the next Accept returns another
	// client's.
	next := accept()
	if !idle.gone || reclaimed != 1 || refused != 1 || counted() != 2 || next.client.Addr() != netip.MustParseAddr(other) {
		t.Fatalf("a newcomer over the cap: its idle connection closed %v, %d reclaimed, %d refused, %d counted, then %v; want true, 1, 1, 2, %s",
			idle.gone, reclaimed, refused, counted(), next.client, other)
	}

	trusted.Store(true)
	l.rejudge()
	if n := counted(); n != 0 {
		t.Fatalf("after the proxy was put back in: %d counted, want 0", n)
	}
	third := accept()
	if refused != 1 || counted() != 0 || third.counted {
		t.Fatalf("a trusted proxy's next connection: %d refused, %d counted; want 1 (before), 0", refused, counted())
	}
	for _, c := range append(busy, next, third) {
		c.Close()
	}
	l.mu.Lock()
	if len(l.clients) != 0 || len(l.conns) != 0 {
		t.Errorf("after every connection closed: %d clients counted, %d connections listed", len(l.clients), len(l.conns))
	}
	l.mu.Unlock()
	l.Close()
}

// acceptConn returns l's next connection, failing the test if Accept
// fails.
func acceptConn(t *testing.T, l *listener) *conn {
	t.Helper()
	nc, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	return nc.(*conn)
}

// The idle connections a reload makes counted join their client's idle
// list in the order they went idle: the client's newcomer over its cap
// closes its connections idle the longest first, as at any other time.
// (The listener visits its connections in no set order: each round of
// three has a chance of one in three to pass by luck alone.)
func TestListenerRejudgeKeepsIdleOrder(t *testing.T) {
	const proxy = "192.0.2.9"
	for round := range 10 {
		var trusted atomic.Bool
		trusted.Store(true)
		exempt := func(a netip.Addr) bool { return trusted.Load() && a == netip.MustParseAddr(proxy) }
		l := newListener(&addrListener{addrs: []string{proxy, proxy, proxy, proxy}}, 10, 2, exempt, func() {}, func() {})
		idle := []*conn{acceptConn(t, l), acceptConn(t, l), acceptConn(t, l)}
		for _, c := range idle {
			l.connState(c, http.StateIdle)
		}
		trusted.Store(false)
		l.rejudge()
		next := acceptConn(t, l) // the proxy's fourth closes two of its own, to come under its cap of 2
		if !idle[0].gone || !idle[1].gone || idle[2].gone {
			t.Fatalf("round %d: closed %v %v %v; want the two idle the longest closed, the last one open", round, idle[0].gone, idle[1].gone, idle[2].gone)
		}
		next.Close()
		idle[2].Close()
		l.Close()
	}
}
