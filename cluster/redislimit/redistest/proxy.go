package redistest

import (
	"net"
	"sync"
	"testing"
)

// Proxy forwards TCP connections to a Redis, and can stop forwarding
// without closing them (Stall): the client's connections stay open and
// nothing is answered, as behind a network partition that drops packets.
// Its methods are safe for concurrent use.
type Proxy struct {
	l      net.Listener
	target string

	mu      sync.Mutex
	stalled bool
	resume  chan struct{} // closed by Resume; replaced by Stall
	conns   map[net.Conn]struct{}
	closed  bool
	wg      sync.WaitGroup
}

// StartProxy starts a proxy on a free loopback port forwarding to target
// (host:port). It is closed when tb's test ends.
func StartProxy(tb testing.TB, target string) *Proxy {
	tb.Helper()
	p, err := NewProxy(target)
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	tb.Cleanup(p.Close)
	return p
}

// NewProxy is StartProxy without a testing.TB: the caller must Close it.
func NewProxy(target string) (*Proxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{l: l, target: target, resume: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	close(p.resume)
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr returns the proxy's host:port: point the client here.
func (p *Proxy) Addr() string { return p.l.Addr().String() }

// Stall stops forwarding in both directions: bytes already on their way
// wait in the proxy, and new connections are accepted but not connected
// onwards until Resume.
func (p *Proxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.stalled {
		p.stalled = true
		p.resume = make(chan struct{})
	}
}

// Resume forwards again, bytes held during the stall first.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stalled {
		p.stalled = false
		close(p.resume)
	}
}

// gate returns a channel that is closed once the proxy forwards.
func (p *Proxy) gate() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.resume
}

// Close closes the listener and every connection, and waits for the
// proxy's goroutines.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	if p.stalled {
		p.stalled = false
		close(p.resume)
	}
	p.mu.Unlock()
	_ = p.l.Close()
	p.wg.Wait()
}

// track records c so that Close closes it; it reports false (and closes c)
// once the proxy is closed.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// serve connects c onwards once the proxy forwards, and copies both ways.
func (p *Proxy) serve(c net.Conn) {
	defer p.wg.Done()
	defer c.Close()
	<-p.gate()
	up, err := net.Dial("tcp", p.target)
	if err != nil || !p.track(up) {
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	p.wg.Add(2)
	go p.pipe(up, c, done)
	go p.pipe(c, up, done)
	<-done
	_ = c.Close()
	_ = up.Close()
	<-done
}

// pipe copies from src to dst, holding each chunk while the proxy is
// stalled.
func (p *Proxy) pipe(dst, src net.Conn, done chan<- struct{}) {
	defer p.wg.Done()
	defer func() { done <- struct{}{} }()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			<-p.gate()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF or a closed connection: the other direction ends too
		}
	}
}
