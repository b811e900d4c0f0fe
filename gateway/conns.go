package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/idna"

	"github.com/groupexec/groupexec/gateway/config"
)

// conns tracks the backend connections the transport dials, so that Close
// can close them all. Transport.CloseIdleConnections is not enough: a
// connection whose response body was just read goes back to the idle pool a
// moment later, on the transport's own goroutine, and would then outlive the
// gateway.
//
// It also closes the connections to a backend a reload removed (retire):
// net/http's transport would keep them in its pool for IdleConnTimeout
// (90 s), sockets to a backend the operator took out of the config, and
// has no way to close one host's idle connections but all of every host's.
// A connection is closed once no request uses it: at once if none does,
// else as the last one sent on it ends, its answer taken whole. One to an
// address no backend has any more that no request uses waits, to be
// closed, for the tries still in flight to that address to end
// (addrTries): the transport dials for a try a connection the try may
// not take (it takes one another request gave back first, or it is
// cancelled), which then goes to the pool unused, and one dialed before
// the reload may be on its way to the try that dialed it.
type conns struct {
	mu     sync.Mutex
	open   map[*trackedConn]struct{}
	closed bool
	dialer net.Dialer
	// tries are the tries in flight to each backend address (dialAddr)
	// and scheme any state has named: kept for the gateway's life, one
	// small entry each, as an old state's request may still set out to one.
	tries map[triesKey]*addrTries
	// kept are the addresses of the backends in force since the last
	// reload; nil before the first one, when none is retired.
	kept atomic.Pointer[keptAddrs]
}

// keptAddrs are the schemes each address (dialAddr) is kept for: the
// transport pools connections by both, and one to an address whose
// backend changed from http to https (or back) would not be used again.
type keptAddrs map[string]schemes

// schemes is a set of a connection's possible schemes; 0: none, or, for a
// connection, not known yet.
type schemes uint32

const (
	plain schemes = 1 << iota
	overTLS
)

// keeps reports whether c's address is kept, for its scheme if known.
func (k keptAddrs) keeps(c *trackedConn) bool {
	s := k[c.addr]
	if sc := schemes(c.scheme.Load()); sc != 0 {
		return s&sc != 0
	}
	return s != 0
}

func (cs *conns) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if _, ok := ctx.Deadline(); !ok {
		// net/http's transport dials on a context of its own, cut from
		// the request's cancellation and deadline so that a later request
		// may take the connection: a backend that never answers the dial
		// (a host down, its packets dropped) kept it, its goroutine and
		// its socket, until the system gave up (two minutes on Linux),
		// one more for each request sent it. It has the time of the
		// request it was made for, whose timeouts the context still
		// carries (withTimeouts).
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeoutsOf(ctx, &defaultDialTimeouts).Upstream)
		defer cancel()
	}
	c, err := cs.dialer.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, cs: cs, addr: strings.ToLower(addr)}
	if a, ok := ctx.Value(dialTryKey{}).(*addrTries); ok && a.addr == tc.addr {
		// Dialed for a try, whose scheme it has: the transport adds TLS
		// after the dial, and the connection would be of no scheme known
		// until a request took it, which one of a scheme a reload
		// dropped never does.
		tc.scheme.Store(uint32(a.scheme))
	}
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
	// Dialed for a request that set out before a reload removed its
	// backend: it is closed once that request is done with it.
	tc.retireUnkept()
	if tc.retired.Load() && !cs.triedLocked(tc) {
		// Its try ended while it was dialed (cancelled, or it took a
		// connection given back first), and no other is under way to the
		// address: no request will take it, and the pool would keep it
		// for its idle timeout.
		delete(cs.open, tc)
		c.Close()
		return nil, errRetiredDial
	}
	return tc, nil
}

// defaultDialTimeouts bound a dial whose context tells no request's
// timeouts: net/http's own dialer's 30 s.
var defaultDialTimeouts = config.Timeouts{Upstream: 30 * time.Second}

// errRetiredDial is the dial's error for a connection to an address no
// backend has any more, dialed once no try to it was under way.
var errRetiredDial = errors.New("gateway: backend removed by a reload while dialed")

// addrTries counts the tries in flight to one backend address, from the
// moment one is handed to net/http's transport (transport.use) to the end
// of its hold on its connection (connUse.done), or its 101: while any is,
// a connection to the address may be on its way to one of them, and
// retire leaves it open.
type addrTries struct {
	cs     *conns
	addr   string
	scheme schemes
	n      atomic.Int32
	// gone: the last reload kept no backend at addr under scheme; the
	// last try to end closes the connections no request uses.
	gone atomic.Bool
}

// triesKey is the key of an addrTries in conns.tries: its address and
// scheme.
type triesKey struct {
	addr   string
	scheme schemes
}

// dialTryKey is the context key of the addrTries of the try a dial is
// made for (transport.use).
type dialTryKey struct{}

// triesTo returns the count of tries to u's address and scheme, made on
// first use.
func (cs *conns) triesTo(u *url.URL) *addrTries {
	k := triesKey{dialAddr(u), schemeOf(u)}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	a := cs.tries[k]
	if a == nil {
		if cs.tries == nil {
			cs.tries = make(map[triesKey]*addrTries)
		}
		a = &addrTries{cs: cs, addr: k.addr, scheme: k.scheme}
		if kept := cs.kept.Load(); kept != nil {
			a.gone.Store((*kept)[k.addr]&k.scheme == 0)
		}
		cs.tries[k] = a
	}
	return a
}

// schemeOf is the scheme a connection to u has.
func schemeOf(u *url.URL) schemes {
	if u.Scheme == "https" {
		return overTLS
	}
	return plain
}

// triedLocked reports whether a try is in flight that c may be on its way
// to: one to its address and scheme, or, its scheme not known, either.
// cs.mu is held.
func (cs *conns) triedLocked(c *trackedConn) bool {
	sc := schemes(c.scheme.Load())
	for _, s := range [...]schemes{plain, overTLS} {
		if sc == 0 || sc == s {
			if a := cs.tries[triesKey{c.addr, s}]; a != nil && a.n.Load() > 0 {
				return true
			}
		}
	}
	return false
}

func (a *addrTries) start() { a.n.Add(1) }

// end ends a try; the last one to a gone address closes the connections
// to it that no request uses.
func (a *addrTries) end() {
	if a.n.Add(-1) == 0 && a.gone.Load() {
		a.cs.sweep(a)
	}
}

// sweep closes the retired connections to a's address that no request
// uses and no try in flight may be on its way to.
func (cs *conns) sweep(a *addrTries) {
	var idle []*trackedConn
	cs.mu.Lock()
	for c := range cs.open {
		if c.addr == a.addr && c.retired.Load() && c.users.Load() == 0 && !cs.triedLocked(c) {
			idle = append(idle, c)
		}
	}
	cs.mu.Unlock()
	for _, c := range idle {
		c.Close()
	}
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

// retire closes the connections to every address but those of backends,
// the backends a reload put in force: now, those no request uses; the
// others once the requests using them end.
func (cs *conns) retire(backends []*url.URL) {
	kept := make(keptAddrs, len(backends))
	for _, u := range backends {
		kept[dialAddr(u)] |= schemeOf(u)
	}
	var idle []*trackedConn
	cs.mu.Lock()
	cs.kept.Store(&kept)
	// Before the connections are judged: a try to a gone address ending
	// from here closes them if none is left (addrTries.end), one ending
	// before leaves none, which the loop below then sees.
	for k, a := range cs.tries {
		a.gone.Store(kept[k.addr]&k.scheme == 0)
	}
	for c := range cs.open {
		if kept.keeps(c) {
			// Its backend is in force again, put back by this reload
			// after an earlier one removed it: the connection is the
			// backend's as any other, not closed as its requests end.
			c.retired.Store(false)
			continue
		}
		c.retired.Store(true)
		if c.users.Load() == 0 && !cs.triedLocked(c) {
			// No request uses it, nor may one be on its way to a try
			// still in flight to its address and scheme: else it is
			// closed as the last such try ends.
			idle = append(idle, c)
		}
	}
	cs.mu.Unlock()
	for _, c := range idle {
		c.Close()
	}
}

// dialAddr is the address net/http's transport dials for a request to u
// (its canonicalAddr: a host name not in ASCII in its IDNA form),
// lower-cased as trackedConn.addr is.
func dialAddr(u *url.URL) string {
	host, port, _ := net.SplitHostPort(addr(u))
	if !isASCII(host) {
		if h, err := idna.Lookup.ToASCII(host); err == nil {
			host = h
		}
	}
	return strings.ToLower(net.JoinHostPort(host, port))
}

func isASCII(s string) bool {
	for i := range len(s) {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

type trackedConn struct {
	net.Conn
	cs   *conns
	addr string // as dialed, lower-cased
	// users counts the requests sent on the connection whose answers are
	// not yet done with (connUse): an HTTP/1 connection has one at most,
	// an HTTP/2 one a request per stream.
	users atomic.Int32
	// retired: its backend is out of the config in force; it is closed
	// once users is 0.
	retired atomic.Bool
	// scheme is what the first request on it found it to be (schemes):
	// the transport dials an https backend's connection as plainly as
	// an http one's, and adds TLS after.
	scheme atomic.Uint32
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

// connUse is one try's hold on the backend connection the transport sends
// it on, from the moment the transport has the connection (its GotConn)
// to the end of the answer (done), so that retire knows which connections
// no request uses.
type connUse struct {
	trace httptrace.ClientTrace
	conn  *trackedConn
	// to counts the try among those in flight to its backend's address
	// until done, or end; nil once it has ended (or never counted).
	to *addrTries
	// body is the answer's body, ending the hold once closed (until):
	// kept here, not allocated beside it, as every try with an answer
	// has one.
	body usedBody
}

// traced returns ctx, for one try, with u tracing the connection the try
// gets.
func (u *connUse) traced(ctx context.Context) context.Context {
	u.trace.GotConn = u.got
	return httptrace.WithClientTrace(ctx, &u.trace)
}

func (u *connUse) got(info httptrace.GotConnInfo) {
	// A connection the transport gave up on, to try another, is released
	// once the new one is held: net/http's HTTP/2 transport sends a
	// refused stream again on the same connection, which a release
	// first would close under it, were it retired and this its last
	// request.
	prev := u.conn
	defer prev.release()
	u.conn = nil
	nc := info.Conn
	scheme := plain
	if _, ok := nc.(*tls.Conn); ok {
		scheme = overTLS
	}
	for {
		if tc, ok := nc.(*trackedConn); ok {
			tc.users.Add(1)
			u.conn = tc
			if tc.scheme.CompareAndSwap(0, uint32(scheme)) {
				// Dialed for a scheme the reload since did not keep at
				// its address: closed once done with, as at the reload.
				tc.retireUnkept()
			}
			return
		}
		// A TLS connection, or a test's wrapper: the one under it.
		under, ok := nc.(interface{ NetConn() net.Conn })
		if !ok {
			return
		}
		nc = under.NetConn()
	}
}

// done ends the hold, closing a retired connection it was the last
// request on. It must be called once the answer is done with: its body
// closed (read to its end or not), so that a connection going back to the
// transport's pool goes there, or the try failed.
func (u *connUse) done() {
	c := u.conn
	u.conn = nil
	c.release()
	u.end()
}

// end ends the try's count among those in flight to its address, leaving
// its hold on its connection: an upgraded connection is the proxy's, and
// in use until the proxy closes it, but no other connection is on its way
// to this try any more.
func (u *connUse) end() {
	if a := u.to; a != nil {
		u.to = nil
		a.end()
	}
}

// retireUnkept retires c if the last reload did not keep its address,
// for its scheme once that is known (keptAddrs.keeps).
func (c *trackedConn) retireUnkept() {
	if k := c.cs.kept.Load(); k != nil && !k.keeps(c) {
		c.retired.Store(true)
	}
}

// release ends one request's hold on c (nil: none), closing c if it is
// retired and that was the last.
func (c *trackedConn) release() {
	if c != nil && c.users.Add(-1) == 0 && c.retired.Load() {
		c.Close()
	}
}
