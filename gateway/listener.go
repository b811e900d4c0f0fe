package gateway

import (
	"container/list"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// listener caps the client connections open at once (max_conns). At the
// cap it closes the connection idle the longest (between requests, or
// before its first) once a new connection comes, as nginx reuses
// keep-alive connections when out of them; with none
// idle it stops accepting, so that
// new connections wait in the kernel's backlog rather than cost the
// gateway anything.
//
// It also caps the connections one client address holds
// (max_conns_per_client): connections busy sending a request are not
// idle, so without it one client sending its bodies slowly could hold
// every place while others wait in the backlog. A connection over the
// client's cap is answered 503 and closed as soon as it is accepted,
// before it takes a place or closes another client's idle connection (see
// refuse); the client's own
// connection idle the longest is closed for it first, if it has one, as
// at max_conns.
type listener struct {
	net.Listener

	mu      sync.Mutex
	max     int
	perMax  int // max_conns_per_client
	clients map[netip.Prefix]*clientConns
	exempt  func(netip.Addr) bool
	// local exempts, too, a connection from the address it reached: a
	// client on this host, where every process that does not pick its
	// own address comes from the same one. Set before the first Accept.
	local   bool
	open    int       // connections open, and the place kept for the one Accept waits for
	pending int       // 1 while Accept waits for a connection in a place kept for it
	idle    list.List // of *conn, idle the longest first
	waiting int       // Accept calls waiting for room
	free    chan struct{}
	done    chan struct{}
	closed  bool

	reclaimed func() // counts an idle connection closed to make room
	refused   func() // counts a connection closed over its client's cap

	// answer is written to a connection over its client's cap before it
	// is closed; nil over TLS, where it cannot be without a handshake.
	// Set before the first Accept.
	answer    []byte
	lingering map[net.Conn]struct{} // refused connections being answered; guarded by mu
	// conns are the connections accepted and not closed, for rejudge;
	// guarded by mu
	conns map[*conn]struct{}
	// prefaceWithin, over TLS, is how long from its accept an HTTP/2
	// connection has to send its preface (timeouts.read_header); 0: no
	// such bound but net/http's own. Set before the first Accept.
	prefaceWithin time.Duration
}

// maxLingering bounds the refused connections answered at once: beyond,
// one is closed without its answer, so that a client opening connections
// as fast as it can costs a goroutine per connection for refuseLinger at
// most this many times.
const maxLingering = 64

// refuseLinger is how long a refused connection has to take its answer,
// and to finish sending its request, before it is closed.
var refuseLinger = time.Second // a variable for tests

// connsRefusal is the answer to a connection over max_conns_per_client,
// as the gateway answers a refused request: 503 with the JSON body of
// its own answers, closing the connection.
var connsRefusal = func() []byte {
	body, _ := json.Marshal(refusal{Error: "too_many_connections", Reason: "this client address holds max_conns_per_client connections"})
	body = append(body, '\n')
	return fmt.Appendf(nil, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nX-Content-Type-Options: nosniff\r\n"+
		"Retry-After: 1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}()

// newListener caps l's connections at max, and those of one client at
// perMax, but for clients exempt says are not one client (trusted proxies).
func newListener(l net.Listener, max, perMax int, exempt func(netip.Addr) bool, reclaimed, refused func()) *listener {
	return &listener{Listener: l, max: max, perMax: perMax, clients: make(map[netip.Prefix]*clientConns), exempt: exempt,
		conns: make(map[*conn]struct{}), free: make(chan struct{}, 1), done: make(chan struct{}), reclaimed: reclaimed, refused: refused}
}

// clientOf returns the client a connection counts against: its IPv4
// address, or the /64 of its IPv6 address, which one host is given whole
// and can pick any address in. ok is false for a connection without an IP
// address, or from a client exempt from the cap.
func (l *listener) clientOf(nc net.Conn) (client netip.Prefix, ok bool) {
	ta, isTCP := nc.RemoteAddr().(*net.TCPAddr)
	if !isTCP {
		return netip.Prefix{}, false
	}
	a := ta.AddrPort().Addr().Unmap()
	if !a.IsValid() || l.exempt(a) || l.local && fromOwnAddr(nc, a) {
		return netip.Prefix{}, false
	}
	return clientPrefix(a)
}

// fromOwnAddr reports whether nc, from a, came from the address it
// reached: a connection from this host's own processes, which the kernel
// gives that address (127.0.0.1 reaching 127.0.0.1) when they pick none.
// A client elsewhere cannot pass for one: the answer to its handshake would
// go to this host, not to it.
func fromOwnAddr(nc net.Conn, a netip.Addr) bool {
	la, ok := nc.LocalAddr().(*net.TCPAddr)
	return ok && la.AddrPort().Addr().Unmap() == a
}

// clientConns are one client's connections.
type clientConns struct {
	n    int       // open
	idle list.List // of *conn, idle the longest first
}

// overCap reports whether client already holds its cap. l.mu is held.
func (l *listener) overCap(client netip.Prefix, ok bool) bool {
	cc := l.clients[client]
	return ok && cc != nil && cc.n >= l.perMax
}

// add counts a connection of client. l.mu is held.
func (l *listener) add(client netip.Prefix) {
	cc := l.clients[client]
	if cc == nil {
		cc = new(clientConns)
		l.clients[client] = cc
	}
	cc.n++
}

// uncount takes one connection of client off the count. l.mu is held.
func (l *listener) uncount(client netip.Prefix) {
	cc := l.clients[client]
	if cc.n--; cc.n == 0 {
		delete(l.clients, client)
	}
}

// unidle takes c off the idle lists. l.mu is held.
func (l *listener) unidle(c *conn) {
	if c.elem != nil {
		l.idle.Remove(c.elem)
		c.elem = nil
	}
	if c.celem != nil {
		l.clients[c.client].idle.Remove(c.celem)
		c.celem = nil
	}
}

// ownIdle takes client's connection idle the longest off the idle lists
// and returns it, or nil if it has none. l.mu is held.
func (l *listener) ownIdle(client netip.Prefix) *conn {
	e := l.clients[client].idle.Front()
	if e == nil {
		return nil
	}
	c := e.Value.(*conn)
	l.unidle(c)
	return c
}

// refuse closes nc, a connection over its client's cap. It answers first,
// if l has an answer: closed without a word, the connection would tell
// the client nothing of why (a browser shows a network error, a client
// retries at once). The answer is sent, and what the client sends read
// and dropped, for refuseLinger at most on a goroutine of its own, not
// Accept's: closed with its request unread, the connection would be
// reset, and the client could lose the answer to the reset.
func (l *listener) refuse(nc net.Conn) {
	l.refused()
	l.mu.Lock()
	linger := l.answer != nil && !l.closed && len(l.lingering) < maxLingering
	if linger {
		if l.lingering == nil {
			l.lingering = make(map[net.Conn]struct{})
		}
		l.lingering[nc] = struct{}{}
	}
	l.mu.Unlock()
	if !linger {
		nc.Close()
		return
	}
	go func() {
		defer func() {
			l.mu.Lock()
			delete(l.lingering, nc)
			l.mu.Unlock()
			nc.Close()
		}()
		_ = nc.SetDeadline(time.Now().Add(refuseLinger))
		if _, err := nc.Write(l.answer); err != nil {
			return
		}
		if cw, ok := nc.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(nc, 64<<10))
	}()
}

func (l *listener) Accept() (net.Conn, error) {
	// nc is a connection taken from the kernel at the cap, while an idle
	// one could make room for it: an idle connection is closed only for a
	// newcomer, never ahead of one, and never for a newcomer over its
	// client's cap.
	//
	// A connection is judged (clientOf), counted and listed in one hold of
	// l.mu, so that a reload's rejudge, which takes l.mu after the new
	// config is in force, judges again any connection judged before it.
	var nc net.Conn
	var client netip.Prefix
	var counted bool
	var accepted *conn
	for {
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			if nc != nil {
				nc.Close()
			}
			return nil, net.ErrClosed
		}
		if nc != nil {
			if client, counted = l.clientOf(nc); l.overCap(client, counted) {
				if c := l.ownIdle(client); c != nil {
					l.mu.Unlock()
					l.reclaimed()
					c.Close() // makes room under the client's cap
					continue
				}
				l.mu.Unlock()
				l.refuse(nc)
				nc = nil
				continue
			}
		}
		if l.open < l.max {
			l.open++
			if nc == nil {
				l.pending++
			} else {
				accepted = l.listLocked(nc, client, counted)
			}
			l.mu.Unlock()
			break
		}
		if e := l.idle.Front(); e != nil && nc != nil {
			c := e.Value.(*conn)
			l.unidle(c)
			l.mu.Unlock()
			l.reclaimed()
			c.Close() // makes room; the loop takes it
			continue
		}
		if l.idle.Len() > 0 {
			l.mu.Unlock()
			c, err := l.Listener.Accept()
			if err != nil {
				return nil, err
			}
			nc = c
			continue
		}
		l.waiting++
		l.mu.Unlock()
		select {
		case <-l.free:
		case <-l.done:
		}
		l.mu.Lock()
		l.waiting--
		l.mu.Unlock()
	}
	for nc == nil {
		c, err := l.Listener.Accept()
		if err != nil {
			l.mu.Lock()
			l.pending--
			l.mu.Unlock()
			l.release()
			return nil, err
		}
		for {
			l.mu.Lock()
			client, counted = l.clientOf(c)
			if !l.overCap(client, counted) {
				l.pending--
				accepted = l.listLocked(c, client, counted)
				l.mu.Unlock()
				nc = c
				break
			}
			if old := l.ownIdle(client); old != nil {
				l.mu.Unlock()
				l.reclaimed()
				old.Close() // makes room under the client's cap
				continue
			}
			l.mu.Unlock()
			l.refuse(c) // the place stays kept for the next
			break
		}
	}
	return accepted, nil
}

// listLocked makes the accepted nc a connection of l, counted against
// client if counted, and lists it for rejudge. l.mu is held.
func (l *listener) listLocked(nc net.Conn, client netip.Prefix, counted bool) *conn {
	if counted {
		l.add(client)
	}
	c := &conn{Conn: nc, l: l, client: client, counted: counted}
	l.conns[c] = struct{}{}
	return c
}

// Close stops accepting, and closes the connections that have not begun a
// request (fresh), then and as any still being accepted comes: the server
// closes the listener as it shuts down, and serves no request read after
// that, but takes such a connection for idle only once it is 5 seconds
// old (net/http's Shutdown), so that a client's preconnect, or a TLS
// handshake never begun, would hold the drain that long for nothing.
// Keep-alive connections are left to the server, which closes them
// itself (HTTP/1) or sends them GOAWAY and closes them once their streams
// are done (HTTP/2).
func (l *listener) Close() error {
	l.mu.Lock()
	if !l.closed {
		l.closed = true
		close(l.done)
	}
	for nc := range l.lingering {
		nc.Close() // ends its answer's goroutine
	}
	var fresh []*conn
	for e := l.idle.Front(); e != nil; e = e.Next() {
		if c := e.Value.(*conn); c.fresh {
			fresh = append(fresh, c)
		}
	}
	l.mu.Unlock()
	err := l.Listener.Close()
	for _, c := range fresh {
		c.Close()
	}
	return err
}

func (l *listener) release() {
	l.mu.Lock()
	l.open--
	l.mu.Unlock()
	select {
	case l.free <- struct{}{}:
	default:
	}
}

// setPerClient changes max_conns_per_client. Lowering it closes no
// connection: a client over the new cap gets no new one until it is under.
func (l *listener) setPerClient(n int) {
	l.mu.Lock()
	l.perMax = n
	l.mu.Unlock()
}

// rejudge counts each open connection as its address now says, once a
// reload has changed what exempt says (tenant.trusted_proxies): a
// connection from an address taken out of the trusted proxies counts
// against its client's cap from now on, as if it had just been accepted,
// and one from an address put in no longer does. Without it, a proxy
// taken out kept every connection it held uncounted until it closed them,
// and one put in kept its own counted. As when the cap is lowered, no
// connection is closed: a client over its cap gets no new one until it is
// under.
func (l *listener) rejudge() {
	l.mu.Lock()
	defer l.mu.Unlock()
	var moved bool
	for c := range l.conns {
		client, counted := l.clientOf(c.Conn)
		if counted == c.counted && client == c.client {
			continue
		}
		if c.counted {
			if c.celem != nil {
				l.clients[c.client].idle.Remove(c.celem)
				c.celem = nil
			}
			l.uncount(c.client)
		}
		c.client, c.counted = client, counted
		if counted {
			l.add(client)
			moved = moved || c.elem != nil
		}
	}
	if !moved {
		return
	}
	// The idle ones now counted join their clients' idle lists in the
	// order they went idle (l.idle's), so that a client's newcomer closes
	// its connection idle the longest, as ownIdle says.
	for e := l.idle.Front(); e != nil; e = e.Next() {
		if c := e.Value.(*conn); c.counted && c.celem == nil {
			c.celem = l.clients[c.client].idle.PushBack(c)
		}
	}
}

// count returns the connections open.
func (l *listener) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open - l.pending
}

// setMax changes the cap. Lowering it closes no connection by itself:
// connections over the new cap are closed as at the cap, the next newcomer
// closing idle ones, the longest idle first, until it has a place under
// the cap. Busy connections are left to finish; with none idle, Accept
// waits until enough have closed.
func (l *listener) setMax(n int) {
	l.mu.Lock()
	l.max = n
	l.mu.Unlock()
	select {
	case l.free <- struct{}{}:
	default:
	}
}

// connState follows the server's connections between requests: an idle one
// may be closed to make room. A new connection is idle until its first
// request is in, as a keep-alive one is until its next: one that sends
// nothing (or its headers a byte at a time) would otherwise hold its place
// against newcomers until timeouts.read_header. nginx reuses such
// connections alike, and net/http's Shutdown counts them idle too.
func (l *listener) connState(nc net.Conn, st http.ConnState) {
	tc, overTLS := nc.(*tls.Conn)
	if overTLS {
		nc = tc.NetConn()
	}
	c, ok := nc.(*conn)
	if !ok {
		return
	}
	l.mu.Lock()
	if st == http.StateNew && l.closed {
		// Accepted as the listener closed: no request of it would be
		// served (see Close).
		l.mu.Unlock()
		c.Close()
		return
	}
	c.fresh = st == http.StateNew
	wake := false
	switch {
	case (st == http.StateNew || st == http.StateIdle) && c.elem == nil && !c.gone:
		c.elem = l.idle.PushBack(c)
		if c.counted {
			c.celem = l.clients[c.client].idle.PushBack(c)
		}
		wake = l.waiting > 0 // an Accept waiting for room can take this one's
	case st != http.StateIdle && c.elem != nil:
		l.unidle(c)
	}
	if overTLS && st == http.StateNew && !c.gone && l.prefaceWithin > 0 {
		c.preface = time.AfterFunc(l.prefaceWithin, func() { l.prefaceDue(c, tc) })
	} else if !c.fresh && c.preface != nil {
		c.preface.Stop()
		c.preface = nil
	}
	l.mu.Unlock()
	if wake {
		select {
		case l.free <- struct{}{}:
		default:
		}
	}
}

// prefaceDue closes c, tc's, if it negotiated HTTP/2 and has not sent its
// preface yet (fresh), prefaceWithin after its accept. net/http's HTTP/2
// server waits 10 s for the preface, whatever the server's timeouts: a
// client could hold a connection, its TLS state and goroutines that long
// for each handshake, where one speaking HTTP/1 is closed once
// timeouts.read_header has passed without its request's headers. Such a
// connection is idle, and so closed for a newcomer at max_conns or at its
// client's cap as one yet to send its first request is; this bounds its
// cost where no newcomer comes. An HTTP/1 connection is left to
// net/http's own header deadline, which runs from the end of the
// handshake.
func (l *listener) prefaceDue(c *conn, tc *tls.Conn) {
	l.mu.Lock()
	silent := c.fresh && !c.gone
	l.mu.Unlock()
	// After the handshake, which has its own deadline (the shortest of
	// the server's timeouts): ConnectionState waits for it to end.
	if silent && tc.ConnectionState().NegotiatedProtocol == "h2" {
		c.Close()
	}
}

// conn is a client connection. It counts the Content-Length and
// Transfer-Encoding header lines that pass through it, so that a request
// with both, an HTTP/1.0 request with Transfer-Encoding, or one whose
// Transfer-Encoding or Content-Length was on a folded line can be
// recognised once net/http has dropped or joined the line it did not frame
// the request by (see lineScanner and smuggled).
type conn struct {
	net.Conn
	l    *listener
	once sync.Once
	elem *list.Element // in l.idle while idle; guarded by l.mu
	// in its client's idle list while idle; guarded by l.mu
	celem *list.Element
	gone  bool // closed; guarded by l.mu
	// fresh: it has begun no request yet (StateNew; over HTTP/2, until
	// the client's preface is in); guarded by l.mu
	fresh bool
	// preface closes it, over TLS, if it speaks HTTP/2 and is still
	// fresh prefaceWithin after its accept (prefaceDue); stopped once
	// it is not fresh, or closed. Guarded by l.mu.
	preface *time.Timer

	client  netip.Prefix // the client it counts against, if counted
	counted bool

	lengths  atomic.Int64 // Content-Length lines seen
	consumed int64        // of those, accounted for by requests; the handler's
	scan     lineScanner

	foldedLengths     atomic.Int64 // of lengths, those on folded lines
	foldedLenConsumed int64        // of those, accounted for by requests; the handler's

	encodings   atomic.Int64 // Transfer-Encoding lines seen
	encConsumed int64        // of those, accounted for by requests; the handler's
	encScan     lineScanner

	foldedEncodings atomic.Int64 // of encodings, those on folded lines
	foldedConsumed  int64        // of those, accounted for by requests; the handler's

	// writeTimedOut is set once a write has run past its deadline: the
	// connection's writing is over (see Write).
	writeTimedOut atomic.Bool
}

// errWriteTimedOut is what a write gets once an earlier one timed out.
var errWriteTimedOut = fmt.Errorf("gateway: an earlier write to the client timed out: %w", os.ErrDeadlineExceeded)

// Write writes to the client, unless an earlier write ran past its
// deadline: whatever protocol the connection carries, what that write
// left half written ends it, and a later write, which could only wait on a
// client that takes nothing, fails at once. TLS, closing the connection,
// sends its close alert first under a deadline of its own, 5 s: an HTTP/2
// connection closed for the client taking nothing (WriteByteTimeout) held
// its streams' handlers, and a streamed answer's slot, that much longer.
func (c *conn) Write(p []byte) (int, error) {
	if c.writeTimedOut.Load() {
		return 0, errWriteTimedOut
	}
	n, err := c.Conn.Write(p)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		c.writeTimedOut.Store(true)
	}
	return n, err
}

func (c *conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		if k, folded := c.scan.count(p[:n], lengthLine); k > 0 {
			c.lengths.Add(int64(k))
			c.foldedLengths.Add(int64(folded))
		}
		if k, folded := c.encScan.count(p[:n], encodingLine); k > 0 {
			c.encodings.Add(int64(k))
			c.foldedEncodings.Add(int64(folded))
		}
	}
	return n, err
}

// CloseWrite shuts down the writing side of the connection under it.
// net/http calls it when it closes a connection whose request it left
// partly unread (a refused body, headers over the cap): the client then
// sees the answer end before the close resets the connection. Without it,
// a wrapped connection would go straight to the reset.
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		c.gone = true
		if c.preface != nil {
			c.preface.Stop()
			c.preface = nil
		}
		c.l.unidle(c)
		if c.counted {
			c.l.uncount(c.client)
		}
		delete(c.l.conns, c)
		c.l.mu.Unlock()
		c.l.release()
	})
	return err
}
