package gateway

import (
	"context"
	"errors"
	"net"
	"sync"
)

// conns tracks the backend connections the transport dials, so that Close
// can close them all. Transport.CloseIdleConnections is not enough: a
// connection whose response body was just read goes back to the idle pool a
// moment later, on the transport's own goroutine, and would then outlive the
// gateway.
type conns struct {
	mu     sync.Mutex
	open   map[*trackedConn]struct{}
	closed bool
	dialer net.Dialer
}

func (cs *conns) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := cs.dialer.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, cs: cs}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.closed {
		c.Close()
		return nil, net.ErrClosed
	}
	if cs.open == nil {
		cs.open = make(map[*trackedConn]struct{})
	}
	cs.open[tc] = struct{}{}
	return tc, nil
}

// closeAll closes every open connection and makes later dials fail.
func (cs *conns) closeAll() {
	cs.mu.Lock()
	cs.closed = true
	open := cs.open
	cs.open = nil
	cs.mu.Unlock()
	for c := range open {
		c.Conn.Close()
	}
}

type trackedConn struct {
	net.Conn
	cs *conns
}

// CloseWrite half-closes the connection under it: the proxy passes a
// client's half-close of an upgraded connection on to the backend, and
// tears the upgrade down at once where the backend's connection cannot
// take it, the backend's answer to the client's last message lost.
func (c *trackedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

func (c *trackedConn) Close() error {
	c.cs.mu.Lock()
	delete(c.cs.open, c)
	c.cs.mu.Unlock()
	return c.Conn.Close()
}
