package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/gateway/config"
	"github.com/groupexec/groupexec/metrics/prom"
)

// Gateway is the admission gateway. It is an http.Handler (the proxy) with
// an admin handler beside it; Serve runs both and drains. It is safe for
// concurrent use. Create it with New; release it with Close.
type Gateway struct {
	state     atomic.Pointer[state] // replaced whole by Reload
	start     *state                // the state New made: the executor's policy
	ex        *executor.Executor
	groups    *groups
	m         *metrics
	proxy     *httputil.ReverseProxy
	transport *http.Transport
	// switches is transport's HTTP/1-only twin, for the requests asking to
	// switch protocols (transport.RoundTrip), made at its first use.
	switches     *http.Transport
	switchesOnce sync.Once
	conns        conns                    // to the backends
	clients      atomic.Pointer[listener] // the proxy's listener, once Serve runs
	admins       atomic.Pointer[listener] // the admin listener, once Serve runs
	log          *slog.Logger
	clk          clock.Clock
	errLog       *log.Logger  // the servers' and the proxy's (newErrLog)
	failLog      *slog.Logger // the gateway's own failures a request meets, rated as errLog
	health       *health
	inflight     tracker
	svc          serviceTime // of admitted requests, for Retry-After
	spooled      spoolUse    // request bodies' bytes in spool files
	reload       reloader
	serving      chan struct{} // closed by Serve once it serves: Serving
	served       sync.Once
	// h2ByteTimeout is the HTTP/2 write byte timeout ProxyServer gave a
	// server over TLS (timeouts.write as it then was), which reloads do
	// not change; 0 before, or without TLS.
	h2ByteTimeout atomic.Int64
	// tlsHandshake is the bound net/http's server gives a TLS handshake,
	// the shortest of its read_header, read and write timeouts as
	// ProxyServer set them; 0 before, or without TLS.
	tlsHandshake atomic.Int64

	// abort cancels, with cause ErrAborted, every request still running at
	// the drain deadline.
	abortCtx context.Context
	abort    context.CancelCauseFunc
	baseCtx  context.Context // abortCtx, marked as the base of ProxyServer's requests
}

// servedKey marks the contexts of requests ProxyServer serves.
type servedKey struct{}

// An Option configures a Gateway.
type Option func(*Gateway)

// WithLogger sets the logger for the gateway's own messages. Default:
// slog.Default(). The lines net/http's servers and the proxy write (a
// client's failed TLS handshake, say) go to its handler at Warn, 10 a
// second at the most: the next line after a pause carries "suppressed",
// the count of those dropped.
func WithLogger(l *slog.Logger) Option { return func(g *Gateway) { g.log = l } }

// WithClock sets the clock the rate limits, breakers, bearer tokens, the
// drain delay, the error log's rate and the request latencies (the
// histogram, the mean behind Retry-After) read. Tests pass a *clock.Fake.
// Default: clock.Real.
func WithClock(c clock.Clock) Option { return func(g *Gateway) { g.clk = c } }

// ErrorLog returns the logger that net/http's servers and the proxy write
// their lines to: the gateway's logger's handler at Warn, 10 lines a
// second at the most (WithLogger). A program that runs the gateway may
// point the standard logger at it (log.SetFlags(0) and
// log.SetOutput(g.ErrorLog().Writer())): net/http's transport writes there
// what it finds on an idle connection to a backend (bytes after a
// response, an unsolicited one), which would otherwise reach the process's
// stderr as plain lines, outside the gateway's log format and rate. Only
// with a logger of the program's own (WithLogger) whose handler does not
// write through the standard logger: slog's default handler does, and the
// standard logger would then wait for itself.
func (g *Gateway) ErrorLog() *log.Logger { return g.errLog }

// New builds a Gateway from a config made by config.Parse or config.Load:
// its executor, with one group per tenant under cfg's limits, its breakers,
// rate limits and backend transport. It opens no listener and does not
// block. Listen opens the listeners and Serve serves them until its
// context ends, then drains and closes the Gateway; a Gateway served
// otherwise (it is an http.Handler) is released with Close. New's errors
// are of configs Parse refuses already, with their lines: no backend, a
// backend URL that does not parse, limits policy.New refuses. A Config
// built by hand gets neither Parse's defaults nor its checks.
func New(cfg *config.Config, opts ...Option) (*Gateway, error) {
	g := &Gateway{log: slog.Default(), clk: clock.Real, serving: make(chan struct{})}
	for _, o := range opts {
		o(g)
	}
	g.errLog = newErrLog(g.log.Handler(), g.clk)
	g.failLog = slog.New(rated(g.log.Handler(), g.clk))
	if len(cfg.Backends) == 0 {
		return nil, errors.New("gateway: no backends")
	}
	pol, err := cfg.Policy()
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	st, err := g.build(cfg, nil, pol)
	if err != nil {
		return nil, err
	}
	g.start = st
	g.state.Store(st)
	g.groups = newGroups(st, nil)
	collector := prom.New(prom.Options{Namespace: cfg.Metrics.Namespace, Labelled: g.groups.labelled})
	exOpts := []executor.Option{
		executor.WithListener(collector),
		// Idle groups keep their counters for a while, but no more of them
		// than tenants may be live: random keys cannot grow the executor.
		executor.WithMaxIdleGroups(min(cfg.Tenant.MaxGroups, executor.DefaultMaxIdleGroups)),
	}
	if bs, on := cfg.BreakerSettings(); on && cfg.Breaker.Per == config.PerTenant {
		bs.Clock = g.clk
		bs.OnStateChange = func(group string, from, to breaker.State) {
			g.log.Warn("tenant breaker", "tenant", group, "from", from.String(), "to", to.String())
		}
		exOpts = append(exOpts, executor.WithGroupBreaker(bs))
	}
	g.ex, err = executor.New(pol, exOpts...)
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	g.groups.ex = g.ex
	collector.Observe(g.ex)
	g.abortCtx, g.abort = context.WithCancelCause(context.Background())
	g.baseCtx = context.WithValue(g.abortCtx, servedKey{}, true)
	g.health = newHealth(g.state.Load, &g.inflight, g.abortCtx)
	g.m = newMetrics(cfg.Metrics.Namespace, collector, gauges{
		degraded:  g.health.degraded,
		inGateway: g.inflight.count,
		conns: func() int {
			if l := g.clients.Load(); l != nil {
				return l.count()
			}
			return 0
		},
		breakers: func() []*backendBreaker { return g.state.Load().breakers },
		spooled:  g.spooled.total.Load,
	})

	g.transport = http.DefaultTransport.(*http.Transport).Clone()
	g.transport.Proxy = nil // the backends are named in the config, never reached through the environment's proxy
	// The client's Accept-Encoding, or none, goes to the backend as sent,
	// and the answer comes back as the backend coded it: left to itself,
	// the transport asks for gzip for a client that named no coding and
	// decodes the answer, which then reached the client without its
	// Content-Encoding and length but with the ETag of the gzip-coded
	// representation, on other bytes, decoded on the gateway's CPU.
	g.transport.DisableCompression = true
	g.transport.MaxIdleConnsPerHost = 256
	// A backend's headers, those of each informational answer too, are
	// held to what a client's are: net/http's default, 10 MiB, kept for
	// as long as a slow client takes the answer, would leave memory
	// bounded by no buffer the config sets.
	g.transport.MaxResponseHeaderBytes = int64(cfg.MaxHeaderBytes)
	g.transport.DialContext = g.conns.dial
	g.transport.HTTP2 = &http.HTTP2Config{MaxReceiveBufferPerStream: backendStreamWindow}
	g.proxy = &httputil.ReverseProxy{
		Rewrite: rewrite, // the transport picks the backend
		Transport: &transport{base: g.transport, switches: g.http1Only, state: g.state.Load, conns: &g.conns,
			retried: g.m.retries.WithLabelValues("upstream").Inc},
		ModifyResponse: dropForbiddenTrailers,
		ErrorHandler:   g.proxyError,
		ErrorLog:       g.errLog,
		BufferPool:     bufferPool{},
	}
	return g, nil
}

// Close cancels every request, ends a readiness probe in progress, stops
// the executor and closes the backend connections. Serve calls it after
// draining. Reloads from then on return ErrClosed.
func (g *Gateway) Close() error {
	// Under the reloads' lock: one under way finishes first, so that none
	// sets limits on an executor half closed, and each one after is
	// refused as a whole, not by the executor halfway through.
	g.reload.mu.Lock()
	g.reload.closed = true
	g.reload.mu.Unlock()
	g.abort(ErrAborted) // ends a readiness probe in progress: health.close waits for it
	g.health.close()
	err := g.ex.Close()
	g.transport.CloseIdleConnections()
	g.http1Only().CloseIdleConnections()
	g.conns.closeAll()
	return err
}

// Serving returns a channel that Serve closes once it serves: it has read
// the config in force, put its listeners' caps in place and started its
// servers. A Reload from then on reaches the running servers (one before
// may be applied before Serve reads the config, or after; either way the
// last one is in force). A caller that starts Serve and then reloads, or
// counts on the config Serve started with (a test, a supervisor that
// reports the gateway up), waits for it. It is never closed if Serve is
// not called.
func (g *Gateway) Serving() <-chan struct{} { return g.serving }

// Metrics returns the registry /metrics serves.
func (g *Gateway) Metrics() prometheus.Gatherer { return g.m.reg }

// Executor returns the executor requests run on, for stats.
func (g *Gateway) Executor() *executor.Executor { return g.ex }

// Group returns the executor group a request of tenant would run in now
// ("" for the default group): the tenant itself, or OverflowGroup when
// tenant.max_groups other tenants are live. It only looks: the tenant takes
// no place among the live ones, and the executor's limits are left alone.
func (g *Gateway) Group(tenant string) string {
	if tenant == "" {
		return g.state.Load().cfg.Tenant.Default
	}
	return g.groups.lookup(tenant)
}

// Config returns the config in force: the one New was given, or the last
// one Reload applied. It must not be changed.
func (g *Gateway) Config() *config.Config { return g.state.Load().cfg }

// LiveTenants returns how many unconfigured tenants have requests being
// admitted or run (at most tenant.max_groups): a request's body being
// received, or its kept answer being sent, does not count.
func (g *Gateway) LiveTenants() int { return g.groups.count() }

// backendStreamWindow is the flow-control window the transport grants an
// HTTP/2 backend's answer: how much of it the backend may send ahead of
// what the proxy has read, which the transport holds in memory meanwhile.
// net/http's 4 MiB a stream, 64 times response.buffer_bytes's default,
// was held for each streamed answer its client took slowly. The
// connection's window is left at net/http's 1 GiB: a smaller one, shared
// by every stream on the connection, would let a few clients not taking
// their answers stop the backend's answers to every other tenant.
const backendStreamWindow = 256 << 10

// http1Only returns g.transport's twin that speaks HTTP/1 only, made from it
// at its first use (once the test hooks that change g.transport have run):
// a switch of protocols is HTTP/1's alone, and net/http's transport sends
// only a switch to "websocket" over HTTP/1 by itself, any other over the
// HTTP/2 connection an https backend offers, where it refuses to send it.
func (g *Gateway) http1Only() *http.Transport {
	g.switchesOnce.Do(func() {
		t := g.transport.Clone()
		var p http.Protocols
		p.SetHTTP1(true)
		t.Protocols = &p
		// The TLS config the clone shares offers h2 once the transport
		// has set HTTP/2 up: a backend taking it would read HTTP/1 as a
		// bad HTTP/2 preface.
		tc := &tls.Config{}
		if t.TLSClientConfig != nil {
			tc = t.TLSClientConfig.Clone()
		}
		tc.NextProtos = []string{"http/1.1"}
		t.TLSClientConfig = tc
		g.switches = t
	})
	return g.switches
}

// rewrite sets the headers that tell the backend who the client is: the
// X-Forwarded ones, and X-Real-IP, which nginx's realip module and many
// frameworks read instead of X-Forwarded-For. Each is the gateway's own,
// whatever the client sent: the proxy drops the client's X-Forwarded
// headers and X-Forwarded-For names the connection's peer alone, so
// X-Real-IP names it too. Passed on as sent, X-Real-IP named an address of
// the client's choice to a backend that trusts the gateway to set it.
func rewrite(pr *httputil.ProxyRequest) {
	pr.SetXForwarded()
	if ip, _, err := net.SplitHostPort(pr.In.RemoteAddr); err == nil {
		pr.Out.Header.Set("X-Real-Ip", ip)
	} else {
		pr.Out.Header.Del("X-Real-Ip") // as SetXForwarded drops X-Forwarded-For
	}
}
