package gateway

import (
	"container/list"
	"crypto/tls"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
)

// listener caps the client connections open at once (max_conns). At the
// cap it closes the connection idle the longest (between requests, or
// before its first) once a new connection comes, as nginx reuses
// keep-alive connections when out of them; with none
// idle it stops accepting, so that
// new connections wait in the kernel's backlog rather than cost the
// gateway anything.
type listener struct {
	net.Listener

	mu      sync.Mutex
	max     int
	open    int       // connections open, and the place kept for the one Accept waits for
	pending int       // 1 while Accept waits for a connection in a place kept for it
	idle    list.List // of *conn, idle the longest first
	waiting int       // Accept calls waiting for room
	free    chan struct{}
	done    chan struct{}
	closed  bool

	reclaimed func() // counts an idle connection closed to make room
}

func newListener(l net.Listener, max int, reclaimed func()) *listener {
	return &listener{Listener: l, max: max, free: make(chan struct{}, 1), done: make(chan struct{}), reclaimed: reclaimed}
}

func (l *listener) Accept() (net.Conn, error) {
	// nc is a connection taken from the kernel at the cap, while an idle
	// one could make room for it: an idle connection is closed only for a
	// newcomer, never ahead of one.
	var nc net.Conn
	for {
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			if nc != nil {
				nc.Close()
			}
			return nil, net.ErrClosed
		}
		if l.open < l.max {
			l.open++
			if nc == nil {
				l.pending++
			}
			l.mu.Unlock()
			break
		}
		if e := l.idle.Front(); e != nil && nc != nil {
			c := l.idle.Remove(e).(*conn)
			c.elem = nil
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
	if nc == nil {
		c, err := l.Listener.Accept()
		l.mu.Lock()
		l.pending--
		l.mu.Unlock()
		if err != nil {
			l.release()
			return nil, err
		}
		nc = c
	}
	return &conn{Conn: nc, l: l}, nil
}

func (l *listener) Close() error {
	l.mu.Lock()
	if !l.closed {
		l.closed = true
		close(l.done)
	}
	l.mu.Unlock()
	return l.Listener.Close()
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
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	c, ok := nc.(*conn)
	if !ok {
		return
	}
	l.mu.Lock()
	wake := false
	switch {
	case (st == http.StateNew || st == http.StateIdle) && c.elem == nil && !c.gone:
		c.elem = l.idle.PushBack(c)
		wake = l.waiting > 0 // an Accept waiting for room can take this one's
	case st != http.StateIdle && c.elem != nil:
		l.idle.Remove(c.elem)
		c.elem = nil
	}
	l.mu.Unlock()
	if wake {
		select {
		case l.free <- struct{}{}:
		default:
		}
	}
}

// conn is a client connection. It counts the Content-Length header lines
// that pass through it, so that a request with both Content-Length and
// Transfer-Encoding can be recognised once net/http has dropped the former
// (see lengthScanner).
type conn struct {
	net.Conn
	l    *listener
	once sync.Once
	elem *list.Element // in l.idle while idle; guarded by l.mu
	gone bool          // closed; guarded by l.mu

	lengths  atomic.Int64 // Content-Length lines seen
	consumed int64        // of those, accounted for by requests; the handler's
	scan     lengthScanner
}

func (c *conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		if k := c.scan.count(p[:n]); k > 0 {
			c.lengths.Add(int64(k))
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
		if c.elem != nil {
			c.l.idle.Remove(c.elem)
			c.elem = nil
		}
		c.l.mu.Unlock()
		c.l.release()
	})
	return err
}
