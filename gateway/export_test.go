package gateway

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"syscall"
	"time"
)

// IdleConns returns the number of client connections idle between
// requests, or 0 before Serve runs.
func IdleConns(g *Gateway) int {
	l := g.clients.Load()
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.idle.Len()
}

// BusyAdminConns returns the number of admin connections open and not
// idle (a request being read or answered), or 0 before Serve runs.
func BusyAdminConns(g *Gateway) int {
	l := g.admins.Load()
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open - l.pending - l.idle.Len()
}

// OnBackendAnswer makes f run each time a backend's answer (its status and
// headers) is in, before the proxy reads its body. It must be called before
// g serves.
func OnBackendAnswer(g *Gateway, f func()) {
	base := g.proxy.Transport
	g.proxy.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := base.RoundTrip(r)
		if err == nil {
			f()
		}
		return resp, err
	})
}

// WrapBackendConns makes g's transport use each connection it dials to a
// backend through wrap. It must be called before g serves.
func WrapBackendConns(g *Gateway, wrap func(net.Conn) net.Conn) {
	dial := g.transport.DialContext
	g.transport.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return wrap(c), nil
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// OnLimitsSet makes f run in each reload once it has given the executor
// the new limits, before the reload returns.
func OnLimitsSet(g *Gateway, f func()) { g.reload.limitsSet = f }

// TrustBackends makes g's transport trust the backend certificates roots
// signed. It must be called before g serves.
func TrustBackends(g *Gateway, roots *x509.CertPool) {
	g.transport.TLSClientConfig = &tls.Config{RootCAs: roots}
}

// OnTenantLimits makes f run each time the executor is given an
// unconfigured tenant's limits as it becomes live, or has them dropped as
// it leaves. It must be called before g serves.
func OnTenantLimits(g *Gateway, f func(tenant string)) { g.groups.tenantLimits = f }

// SpoolClients returns how many client addresses have request body bytes
// counted in spool files.
func SpoolClients(g *Gateway) int {
	g.spooled.mu.Lock()
	defer g.spooled.mu.Unlock()
	return len(g.spooled.clients)
}

// SetAdminBodyLinger sets how long an admin request's unread body is
// drained after the answer (adminBodyLinger) until the test ends.
func SetAdminBodyLinger(t interface{ Cleanup(func()) }, d time.Duration) {
	old := adminBodyLinger
	adminBodyLinger = d
	t.Cleanup(func() { adminBodyLinger = old })
}

// BackendStreamWindow is how much of an answer an HTTP/2 backend may send
// ahead of what the gateway has read of it.
const BackendStreamWindow = backendStreamWindow

// OnBackendDial makes f run as each backend connection is dialed, with the
// dial's context and the address dialed, before it connects: the dial
// waits for f, and fails with its error. It must be called before g
// serves.
func OnBackendDial(g *Gateway, f func(ctx context.Context, addr string) error) {
	g.conns.dialer.ControlContext = func(ctx context.Context, _, addr string, _ syscall.RawConn) error {
		return f(ctx, addr)
	}
}
