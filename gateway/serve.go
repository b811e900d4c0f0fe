package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/groupexec/groupexec/gateway/config"
)

// adminDrainTimeout bounds the admin server's own shutdown, after the proxy
// has drained: scrapes are short.
const adminDrainTimeout = time.Second

// abortGrace is how long requests cancelled at the drain deadline have to
// send their 503 before their connections are closed.
const abortGrace = time.Second

// adminPerClient is the most connections one client address (an IPv6 /64)
// holds on the admin address: an eighth of admin_max_conns, rounded up
// (without adding 7 first, which would wrap the largest admin_max_conns
// the config takes to a negative share). The cap alone would let one
// client keep every admin connection busy, its answers read slowly, while
// the liveness probe waited in the backlog and timed out; the probes and
// the scraper each hold a connection or two, from addresses of their own.
// Clients on the gateway's host, which one address cannot tell apart, are
// not capped by it (listener.local).
func adminPerClient(maxConns int) int { return maxConns/8 + min(maxConns%8, 1) }

// adminBodyLinger bounds how long an admin request's body, which no
// admin endpoint reads, is read and dropped after the answer before the
// connection is closed: as long as a refused connection has (refuseLinger).
var adminBodyLinger = time.Second // a variable for tests

// adminConnsRefusal is the answer to an admin connection over its
// client's cap (adminPerClient), before it is closed.
var adminConnsRefusal = []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n" +
	"Retry-After: 1\r\nConnection: close\r\nContent-Length: 48\r\n\r\nthis address holds its share of admin_max_conns\n")

// ProxyServer returns the http.Server Serve runs the proxy with: the
// gateway as handler and the config's timeouts and header cap.
func (g *Gateway) ProxyServer() *http.Server {
	cfg := g.state.Load().cfg
	t := cfg.Timeouts
	if cfg.ServerTLS() != nil {
		g.h2ByteTimeout.Store(int64(t.Write))
		g.tlsHandshake.Store(int64(handshakeBound(t)))
	}
	return &http.Server{
		Handler:           g,
		ReadHeaderTimeout: t.ReadHeader,
		ReadTimeout:       t.Read,
		WriteTimeout:      t.Write, // extended per request past the upstream deadline: see ServeHTTP
		IdleTimeout:       t.Idle,
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
		// Each stream is a request with buffers of its own: without a cap
		// of the config's, net/http lets one connection carry 250 at once,
		// and max_conns would bound connections but not memory.
		//
		// WriteByteTimeout closes an HTTP/2 connection that takes no byte
		// of what is written to it for timeouts.write. A stream's own
		// write deadline resets the stream, but the reset is a frame,
		// queued behind the one being written: a client granting every
		// flow-control window and reading nothing off the connection
		// blocked that write for ever, and the stream, its handler and a
		// streamed answer's slot with it, never ended. net/http reads it
		// as each connection starts, from this config, which a reload
		// cannot change under the running server without a data race:
		// it keeps the value the server was made with (see reloadNotes).
		HTTP2:    &http.HTTP2Config{MaxConcurrentStreams: cfg.HTTP2MaxStreams, WriteByteTimeout: t.Write},
		ErrorLog: g.errLog,
		// Every request's context derives from the abort context, so that
		// the drain deadline cancels them all without a registration per
		// request.
		BaseContext: func(net.Listener) context.Context { return g.baseCtx },
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if c, ok := c.(*conn); ok {
				return context.WithValue(ctx, connKey{}, c)
			}
			return ctx
		},
		// "OPTIONS *" would be answered by the server itself, never
		// reaching ServeHTTP and its check for smuggled requests: what a
		// front proxy sent as its body would be read as the next request.
		// ServeHTTP answers it as the server would.
		DisableGeneralOptionsHandler: true,
	}
}

// handshakeBound is how long net/http's server, given t, lets a client's
// TLS handshake take: the shortest of its header, read and write timeouts.
func handshakeBound(t config.Timeouts) time.Duration {
	return min(t.ReadHeader, t.Read, t.Write)
}

// Listen opens the proxy and admin listeners at cfg.Listen and cfg.Admin, for
// Serve. A port of 0 lets the system pick one; the listeners' Addr tell which.
func Listen(cfg *config.Config) (proxy, admin net.Listener, err error) {
	proxy, err = net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, nil, fmt.Errorf("gateway: listen: %w", err)
	}
	admin, err = net.Listen("tcp", cfg.Admin)
	if err != nil {
		proxy.Close()
		return nil, nil, fmt.Errorf("gateway: admin listen: %w", err)
	}
	return proxy, admin, nil
}

// Serve serves the proxy on proxyLn and the admin endpoints on adminLn until
// ctx ends, then drains, closes the gateway and returns nil. It returns early
// with an error if a listener fails.
//
// The drain, in order: /readyz starts failing, and for drain_delay the
// gateway goes on serving as usual, so that load balancers stop sending it
// requests before it stops taking them; then requests still arriving on
// open connections get 503; the proxy listener closes; in-flight requests
// have drain_timeout to finish; those still running are cancelled (cause
// ErrAborted, counted in tasks_aborted_total{kind="request"}) and their
// connections closed; the executor and the admin server stop last, so the
// final metrics can still be scraped during the drain. The admin server's
// requests have 1s to finish; then its connections are closed, and Serve
// returns once its handlers have.
func (g *Gateway) Serve(ctx context.Context, proxyLn, adminLn net.Listener) error {
	proxy := g.ProxyServer()
	cfg := g.state.Load().cfg
	// A trusted proxy's connection carries many clients (carriesMany).
	exempt := func(a netip.Addr) bool { return carriesMany(&g.state.Load().cfg.Tenant, a) }
	if g.reload.configRead != nil {
		g.reload.configRead()
	}
	ln := newListener(proxyLn, cfg.MaxConns, cfg.MaxConnsPerClient, exempt, g.m.reclaimed.Inc, g.m.refused.Inc)
	g.clients.Store(ln)
	// The admin address is capped as the proxy's is, at admin_max_conns:
	// uncapped, anyone who reaches it could open connections until the
	// process has no descriptors left for the proxy's. The proxy's
	// connection metrics are not its.
	al := newListener(adminLn, cfg.AdminMaxConns, adminPerClient(cfg.AdminMaxConns),
		func(netip.Addr) bool { return false }, func() {}, func() {})
	al.answer = adminConnsRefusal
	// The processes on the gateway's host (a scraper, probes, sidecars)
	// reach the default admin address, 127.0.0.1, from that address
	// alike: capped as one client, they would share an eighth of
	// admin_max_conns, and one of them holding that many busy would have
	// the others, a liveness probe among them, refused at once.
	// admin_max_conns caps them.
	al.local = true
	g.admins.Store(al)
	// A reload since cfg was read found no listener to give its caps to:
	// they are taken again here, under the lock reloads hold, so that
	// whichever of this and a concurrent reload comes second sets them
	// from the config in force.
	g.reload.mu.Lock()
	now := g.state.Load().cfg
	ln.setMax(now.MaxConns)
	ln.setPerClient(now.MaxConnsPerClient)
	al.setMax(now.AdminMaxConns)
	al.setPerClient(adminPerClient(now.AdminMaxConns))
	g.reload.mu.Unlock()
	proxy.ConnState = ln.connState
	proxyLn = ln
	if tc := cfg.ServerTLS(); tc != nil {
		tc.NextProtos = []string{"h2", "http/1.1"}
		proxy.TLSConfig = tc
		// An HTTP/2 client's preface is bounded as an HTTP/1 client's
		// request headers are, not by net/http's fixed 10 s.
		ln.prefaceWithin = cfg.Timeouts.ReadHeader
		proxyLn = tls.NewListener(proxyLn, tc)
	} else {
		ln.answer = connsRefusal
	}
	var adminBusy tracker // the admin handlers running, waited for at the end
	adminH := g.AdminHandler()
	admin := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			t := g.state.Load().cfg.Timeouts
			if r.Body != nil && r.Body != http.NoBody {
				// No admin endpoint reads a body. net/http reads one
				// left unread before it answers, to keep the
				// connection: a client declaring a body it never sends
				// would have its answer (a reload already applied) held
				// for timeouts.read. The connection is closed after the
				// answer instead, which then goes out at once; what the
				// client sends meanwhile is read and dropped for
				// adminBodyLinger at most (timeouts.read if shorter,
				// as a reload left it: the server's ReadTimeout keeps
				// the value it started with), so that the close does
				// not reset the connection under the answer. Only a
				// request with a body gets a deadline: for one without,
				// the server is already reading ahead, and a deadline
				// would cut it.
				w.Header().Set("Connection", "close")
				defer func() {
					_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(min(t.Read, adminBodyLinger)))
				}()
			}
			w = newAdminWriter(w, t.Write)
			if !adminBusy.enter() {
				w.Header().Set("Connection", "close")
				http.Error(w, "shutting down", http.StatusServiceUnavailable)
				return
			}
			defer adminBusy.leave()
			adminH.ServeHTTP(w, r)
		}),
		// The proxy's limits on reading a request: without a read
		// timeout, a request declaring a body it never sends would hold
		// its connection for ever (net/http reads an unread body before
		// answering), and without an idle timeout a keep-alive connection
		// would wait for its next request for ever. The handler answers
		// a request with a body without waiting for it, and bounds what
		// is read of it after the answer (adminBodyLinger). The
		// proxy's limit on writing an answer is adminWriter's: not
		// WriteTimeout, which runs from the end of the request's headers
		// and so would count the handler's own work (a readiness probe's
		// dials, a reload) against the client's time to take the answer.
		ReadHeaderTimeout: cfg.Timeouts.ReadHeader,
		ReadTimeout:       sumDurations(cfg.Timeouts.ReadHeader, cfg.Timeouts.Read),
		IdleTimeout:       cfg.Timeouts.Idle,
		// The proxy's header cap too: net/http's default is 1 MiB a
		// connection, and the admin requests' headers are short.
		MaxHeaderBytes: cfg.MaxHeaderBytes,
		ErrorLog:       g.errLog,
		// A connection idle, or yet to send its request, may be closed
		// for a newcomer at admin_max_conns.
		ConnState: al.connState,
	}
	adminLn = al
	errc := make(chan error, 2)
	go func() { errc <- proxy.Serve(proxyLn) }()
	go func() { errc <- admin.Serve(adminLn) }()
	g.log.Info("gateway serving", "proxy", proxyLn.Addr().String(), "admin", adminLn.Addr().String())
	g.served.Do(func() { close(g.serving) })

	var failed error
	select {
	case <-ctx.Done():
	case failed = <-errc:
		g.log.Error("server failed", "err", failed)
	}
	g.drain(proxy, admin, &adminBusy)
	for range 2 - boolInt(failed != nil) {
		if err := <-errc; !errors.Is(err, http.ErrServerClosed) && failed == nil {
			failed = err
		}
	}
	return failed
}

func (g *Gateway) drain(proxy, admin *http.Server, adminBusy *tracker) {
	start := time.Now()
	if d := g.state.Load().cfg.DrainDelay; d > 0 {
		// Load balancers see /readyz fail and stop sending requests; those
		// they send meanwhile are served as usual.
		delayed := make(chan struct{})
		g.clk.AfterFunc(d, func() { close(delayed) })
		g.health.unready.Store(true)
		g.log.Info("draining: readiness fails, still serving", "drain_delay", d.String())
		<-delayed
	}
	idle := g.inflight.close() // readiness fails from here on, if it did not already
	// Read after the delay: a reload during it changes drain_timeout too.
	timeout := g.state.Load().cfg.DrainTimeout
	g.log.Info("draining", "timeout", timeout.String())
	dctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	// Shutdown closes the listener and idle connections, and returns once
	// every connection has finished its response and closed. Waiting for
	// the handlers alone is not enough: the server flushes a response after
	// its handler returns, and closing the connection in between loses it.
	err := proxy.Shutdown(dctx)
	if err == nil {
		// Shutdown does not wait for hijacked connections (protocol
		// upgrades): their requests are still in flight, and have what is
		// left of drain_timeout too.
		select {
		case <-idle:
		case <-dctx.Done():
			err = dctx.Err()
		}
	}
	if err != nil {
		g.abort(ErrAborted)
		g.log.Warn("drain deadline passed: cancelling the requests still running")
		// Cancelled requests answer 503 promptly (the transport honours the
		// context); give those answers a moment to reach their clients.
		gctx, gcancel := context.WithTimeout(context.Background(), abortGrace)
		proxy.Shutdown(gctx)
		gcancel()
		proxy.Close()
	}
	<-idle
	g.Close()
	actx, acancel := context.WithTimeout(context.Background(), adminDrainTimeout)
	defer acancel()
	if admin.Shutdown(actx) != nil {
		// Shutdown leaves what it did not see finish open: a client
		// still sending its request (as late as the header timeout), or
		// one not taking its answer (for ever). Nothing of the admin
		// server outlives Serve: its connections are closed, and its
		// handlers, whose writes then fail and whose readiness probe
		// Close has ended, are waited for.
		admin.Close()
	}
	<-adminBusy.close()
	g.log.Info("drained", "took", time.Since(start).Round(time.Millisecond).String())
}

// adminWriter gives an admin answer timeouts.write to reach the client from
// the moment it starts, as the proxy gives its answers: a client that does
// not read (a large /metrics, requests pipelined and their answers left
// unread) has its connection closed then, instead of holding it and its
// goroutine for ever.
type adminWriter struct {
	http.ResponseWriter
	write   time.Duration
	started bool
}

// newAdminWriter wraps w for one admin request. The deadline the previous
// answer on the connection had is cleared: the server's own WriteTimeout,
// which would reset it per request, is not set.
func newAdminWriter(w http.ResponseWriter, write time.Duration) *adminWriter {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	return &adminWriter{ResponseWriter: w, write: write}
}

func (w *adminWriter) start() {
	if !w.started {
		w.started = true
		_ = http.NewResponseController(w.ResponseWriter).SetWriteDeadline(time.Now().Add(w.write))
	}
}

func (w *adminWriter) WriteHeader(code int) {
	w.start()
	w.ResponseWriter.WriteHeader(code)
}

func (w *adminWriter) Write(p []byte) (int, error) {
	w.start()
	return w.ResponseWriter.Write(p)
}

func (w *adminWriter) Flush() {
	w.start()
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap gives http.ResponseController the server's writer.
func (w *adminWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
