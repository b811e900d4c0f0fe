package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/gateway/config"
	"github.com/groupexec/groupexec/metrics/prom"
)

// Gateway is the admission gateway. It is an http.Handler (the proxy) with
// an admin handler beside it; Serve runs both and drains. It is safe for
// concurrent use. Create it with New; release it with Close.
type Gateway struct {
	cfg       *config.Config
	ex        *executor.Executor
	groups    *groups
	m         *metrics
	proxy     *httputil.ReverseProxy
	transport *http.Transport
	conns     conns
	backends  []*url.URL
	log       *slog.Logger
	health    *health
	inflight  tracker

	// abort cancels, with cause ErrAborted, every request still running at
	// the drain deadline.
	abortCtx context.Context
	abort    context.CancelCauseFunc
}

// An Option configures a Gateway.
type Option func(*Gateway)

// WithLogger sets the logger for the gateway's own messages. Default:
// slog.Default().
func WithLogger(l *slog.Logger) Option { return func(g *Gateway) { g.log = l } }

// New builds a Gateway from a parsed config.
func New(cfg *config.Config, opts ...Option) (*Gateway, error) {
	g := &Gateway{cfg: cfg, log: slog.Default(), groups: newGroups(cfg)}
	for _, o := range opts {
		o(g)
	}
	for _, b := range cfg.Backends {
		u, err := url.Parse(b)
		if err != nil {
			return nil, fmt.Errorf("gateway: backend %q: %w", b, err)
		}
		g.backends = append(g.backends, u)
	}
	if len(g.backends) == 0 {
		return nil, errors.New("gateway: no backends")
	}
	pol, err := cfg.Policy()
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	collector := prom.New(prom.Options{Labelled: g.groups.labelled})
	exOpts := []executor.Option{
		executor.WithListener(collector),
		// Idle groups keep their counters for a while, but no more of them
		// than tenants may be live: random keys cannot grow the executor.
		executor.WithMaxIdleGroups(min(cfg.Tenant.MaxGroups, executor.DefaultMaxIdleGroups)),
	}
	if bs, on := cfg.BreakerSettings(); on {
		bs.OnStateChange = func(group string, from, to breaker.State) {
			g.log.Warn("tenant breaker", "tenant", group, "from", from.String(), "to", to.String())
		}
		exOpts = append(exOpts, executor.WithGroupBreaker(bs))
	}
	g.ex, err = executor.New(pol, exOpts...)
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	collector.Observe(g.ex)
	g.health = newHealth(g.backends, &g.inflight)
	g.m = newMetrics(collector, g.health.degraded)
	g.abortCtx, g.abort = context.WithCancelCause(context.Background())

	g.transport = http.DefaultTransport.(*http.Transport).Clone()
	g.transport.Proxy = nil // the backends are named in the config, never reached through the environment's proxy
	g.transport.MaxIdleConnsPerHost = 256
	g.transport.DialContext = g.conns.dial
	errLog := slog.NewLogLogger(g.log.Handler(), slog.LevelWarn)
	g.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) { pr.SetXForwarded() }, // the transport picks the backend
		Transport: &transport{base: g.transport, backends: g.backends,
			retried: g.m.retries.WithLabelValues("upstream").Inc},
		ErrorHandler: g.proxyError,
		ErrorLog:     errLog,
	}
	return g, nil
}

// Close cancels every request, stops the executor and closes idle backend
// connections. Serve calls it after draining.
func (g *Gateway) Close() error {
	g.abort(ErrAborted)
	err := g.ex.Close()
	g.transport.CloseIdleConnections()
	g.conns.closeAll()
	return err
}

// Metrics returns the registry /metrics serves.
func (g *Gateway) Metrics() prometheus.Gatherer { return g.m.reg }

// Executor returns the executor requests run on, for stats.
func (g *Gateway) Executor() *executor.Executor { return g.ex }

// Group returns the executor group a request of tenant would run in now
// ("" for the default group): the tenant itself, or OverflowGroup when
// tenant.max_groups other tenants are live.
func (g *Gateway) Group(tenant string) string {
	if tenant == "" {
		return g.cfg.Tenant.Default
	}
	grp := g.groups.acquire(tenant)
	g.groups.release(grp)
	return grp
}

// LiveTenants returns how many unconfigured tenants have requests in the
// gateway (at most tenant.max_groups).
func (g *Gateway) LiveTenants() int { return g.groups.count() }

// exchange is one request on its way through the gateway: it records the
// status the client got, and why the body could not be read, if it could not.
type exchange struct {
	http.ResponseWriter
	tenant string
	status int
	body   bodyError
	// verdict is set when the gateway answered for the proxy (proxyError):
	// what the task returns, so the tenant's breaker counts backend failures
	// only, never the client's faults or a drain.
	verdict  error
	answered bool
}

func (x *exchange) WriteHeader(code int) {
	// An informational answer (the backend's 100 Continue, a 103) is not
	// the request's status; 101 Switching Protocols is final.
	if x.status == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) {
		x.status = code
	}
	x.ResponseWriter.WriteHeader(code)
}

func (x *exchange) Write(p []byte) (int, error) {
	if x.status == 0 {
		x.status = http.StatusOK
	}
	return x.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController (the proxy's flushes) reach the
// connection.
func (x *exchange) Unwrap() http.ResponseWriter { return x.ResponseWriter }

type exchangeKey struct{}

// ServeHTTP proxies r through its tenant's executor group.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	x := &exchange{ResponseWriter: w, tenant: g.cfg.Tenant.Default}
	tenant := x.tenant
	defer func() { g.observe(tenant, x.status, start) }()
	if !g.inflight.enter() {
		w.Header().Set("Connection", "close")
		g.refuse(x, http.StatusServiceUnavailable, "draining", "the gateway is shutting down", tenant, time.Second)
		return
	}
	defer g.inflight.leave()

	key, err := ExtractTenant(g.cfg.Tenant, r)
	if err != nil {
		g.refuse(x, http.StatusBadRequest, "invalid_tenant", err.Error(), "", 0)
		return
	}
	if key != "" {
		tenant = key
	}
	group := g.groups.acquire(tenant)
	defer g.groups.release(group)
	tenant, x.tenant = group, group // metrics and responses name the group actually used

	// One deadline bounds everything downstream: queueing, tries, backoff.
	// The drain's abort cancels it with its own cause.
	cctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	stop := context.AfterFunc(g.abortCtx, func() {
		g.m.aborted.WithLabelValues("request").Inc()
		cancel(ErrAborted)
	})
	defer stop()
	ctx, cancelT := context.WithTimeout(cctx, g.cfg.Timeouts.Upstream)
	defer cancelT()
	// The server's write timeout runs from the end of the request headers;
	// the response cannot start before the backend answers, so it is moved
	// to the request deadline plus timeouts.write.
	_ = http.NewResponseController(w).SetWriteDeadline(start.Add(g.cfg.Timeouts.Upstream + g.cfg.Timeouts.Write))

	if err := limitBody(w, r, g.cfg.Body, &x.body); err != nil {
		g.refuse(x, http.StatusRequestEntityTooLarge, "body_too_large", err.Error(), tenant, 0)
		return
	}
	ctx = context.WithValue(ctx, exchangeKey{}, x) // for proxyError
	// Do runs forward in this goroutine once the request is admitted, and
	// re-raises its panics after releasing its permits: the proxy's
	// http.ErrAbortHandler, for a response it could not finish copying,
	// reaches the server, which alone can cut the connection so that the
	// client sees the response is incomplete.
	err = g.ex.Do(ctx, group, func(tctx context.Context) error { return g.forward(tctx, x, r) })
	if x.status != 0 {
		return // forward ran and answered
	}
	if errors.Is(err, errProxyPanic) {
		g.refuse(x, http.StatusBadGateway, "backend_error", "the gateway failed to proxy the request", tenant, 0)
		return
	}
	g.notRun(x, ctx, tenant, err)
}

// errProxyPanic is forward's error when the proxy panicked with anything but
// http.ErrAbortHandler.
var errProxyPanic = errors.New("gateway: the proxy panicked")

// forward runs as the request's task: it proxies r and returns an error for
// the outcomes that count against the tenant's breaker.
func (g *Gateway) forward(ctx context.Context, x *exchange, r *http.Request) (err error) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				g.log.Debug("response cut short", "tenant", x.tenant)
				panic(v)
			}
			g.log.Error("proxy panicked", "tenant", x.tenant, "panic", v, "stack", string(debug.Stack()))
			err = errProxyPanic
		}
	}()
	g.proxy.ServeHTTP(x, r.WithContext(ctx))
	if x.answered {
		return x.verdict
	}
	if x.status >= 500 {
		return errBackendStatus
	}
	return nil
}

// notRun answers a request whose task never ran: refused, timed out in the
// queue, or cancelled while waiting.
func (g *Gateway) notRun(x *exchange, ctx context.Context, tenant string, err error) {
	var re *executor.RejectedError
	switch {
	case errors.Is(err, breaker.ErrOpenState), errors.Is(err, breaker.ErrTooManyRequests):
		g.refuse(x, http.StatusServiceUnavailable, "breaker_open", "the tenant's circuit breaker is open", tenant, g.cfg.Breaker.Timeout)
	case errors.Is(err, executor.ErrShutdown), errors.Is(err, executor.ErrGroupShutdown),
		errors.Is(context.Cause(ctx), ErrAborted):
		g.refuse(x, http.StatusServiceUnavailable, "draining", "the gateway is shutting down", tenant, time.Second)
	case errors.As(err, &re) && !errors.Is(err, context.DeadlineExceeded):
		g.m.busy.WithLabelValues(endpointProxy).Inc()
		g.refuse(x, http.StatusTooManyRequests, "rejected", string(re.Limit)+" full", tenant, time.Second)
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		g.refuse(x, http.StatusGatewayTimeout, "deadline", "the request's deadline passed while it waited", tenant, 0)
	default: // the client went away while the request waited: no one to answer
		x.status = statusClientClosed
	}
}

// statusClientClosed is recorded (never sent) for a request whose client
// went away first, as nginx's 499.
const statusClientClosed = 499

// proxyError answers what the proxy could not: the backend failed or missed
// the deadline, the client's body broke a limit, or the drain aborted the
// request. It sets the exchange's verdict for the tenant's breaker.
func (g *Gateway) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	x := r.Context().Value(exchangeKey{}).(*exchange)
	x.answered = true
	ctx := r.Context()
	var ne net.Error
	var oe *net.OpError
	switch berr := x.body.get(); {
	case berr == ErrBodyTooLarge:
		g.refuse(x, http.StatusRequestEntityTooLarge, "body_too_large", berr.Error(), x.tenant, 0)
	case berr == errReadTimeout:
		g.m.ioTimeouts.WithLabelValues("read").Inc()
		g.refuse(x, http.StatusRequestTimeout, "read_timeout", berr.Error(), x.tenant, 0)
	case berr == errBadGzip:
		g.refuse(x, http.StatusBadRequest, "bad_gzip", berr.Error(), x.tenant, 0)
	case berr != nil:
		x.status = statusClientClosed
	case errors.Is(context.Cause(ctx), ErrAborted):
		x.verdict = context.Canceled // says nothing of the backend
		g.refuse(x, http.StatusServiceUnavailable, "draining", "the gateway is shutting down", x.tenant, time.Second)
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		x.verdict = err
		g.m.ioTimeouts.WithLabelValues("upstream").Inc()
		g.refuse(x, http.StatusGatewayTimeout, "upstream_timeout", "the backend did not answer within the request's deadline", x.tenant, 0)
	case ctx.Err() != nil:
		x.verdict = context.Canceled
		x.status = statusClientClosed
	default:
		x.verdict = err
		if errors.As(err, &oe) && oe.Op == "dial" && errors.As(err, &ne) && ne.Timeout() {
			g.m.ioTimeouts.WithLabelValues("connect").Inc()
		}
		g.log.Debug("backend error", "tenant", x.tenant, "err", err)
		g.refuse(x, http.StatusBadGateway, "backend_error", "the backend failed", x.tenant, 0)
	}
	_ = w // x wraps w
}

// observe records a finished request.
func (g *Gateway) observe(tenant string, code int, start time.Time) {
	if !g.groups.labelled(tenant) {
		tenant = prom.OtherGroup
	}
	if code == 0 {
		code = http.StatusOK
	}
	g.m.requests.WithLabelValues(tenant, strconv.Itoa(code)).Inc()
	g.m.latency.WithLabelValues(tenant).Observe(time.Since(start).Seconds())
}
