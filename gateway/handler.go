package gateway

import (
	"context"
	"errors"
	"math"
	"net"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/gateway/config"
	"github.com/groupexec/groupexec/internal/adapt"
)

// exchange is one request on its way through the gateway. Exchanges are
// pooled: a request allocates none of this.
type exchange struct {
	resp  response // what the backend answered, kept until the slot is released
	spool spool    // the request body, received before admission
	code  int      // the status the gateway answered itself, if it did
	group string
	g     *Gateway
	req   *http.Request
	run   func(context.Context) error // x.proxy, made once per exchange
	// verdict is set when the gateway answered for the proxy (proxyError):
	// what the proxy call returns, so that a breaker counts backend
	// failures only, never the client's faults or a drain.
	verdict  error
	answered bool
	// aborted is set when the proxy gave up an answer part of which was
	// out (forward): ServeHTTP cuts the connection once Do has returned.
	aborted bool
	// drained is set when the drain cancelled or refused the request
	// (drained, notRun), by either cause: ServeHTTP counts it aborted
	// though its own context may not be cancelled yet.
	drained bool
	// timeout is timeouts.upstream as the request's config sets it, and
	// held whether its backend is held to its deadline, as judged when it
	// was admitted (heldToDeadline): else the deadline passing is no
	// failure of the tenant's breaker.
	timeout time.Duration
	held    bool
	// unread is set while an HTTP/1 request's body has not been received
	// whole, and readBy is the request's read deadline once set: see
	// lingerUnread.
	unread bool
	readBy time.Time
}

var exchanges = sync.Pool{New: func() any {
	x := new(exchange)
	x.resp.x = x
	x.run = x.proxy
	return x
}}

// proxy is what Do runs once the request is admitted.
func (x *exchange) proxy(ctx context.Context) error {
	g := x.g
	g.m.spawned.Inc()
	begin := g.clk.Now()
	defer func() { g.svc.observe(x.resp.answeredBy(g.clk.Now()).Sub(begin)) }()
	x.held = heldToDeadline(ctx, x.timeout)
	return g.forward(ctx, x, x.req)
}

// status is the status the client was given.
func (x *exchange) status() int {
	if x.code != 0 {
		return x.code
	}
	return x.resp.status
}

// ServeHTTP proxies r through its tenant's executor group. The request is
// received whole before it is admitted, and its answer is kept after, so
// that it holds an execution slot, and its tenant's place among the
// tracked groups (admit), only while the backend works on it.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	arrived := g.clk.Now() // for the latency histogram, on the clock the Retry-After mean reads
	st := g.state.Load()
	cfg := st.cfg
	x := exchanges.Get().(*exchange)
	x.g, x.req, x.group = g, r, cfg.Tenant.Default
	hasBody := r.Body != nil && r.Body != http.NoBody
	x.unread = r.ProtoMajor == 1 && hasBody
	defer func() {
		if x.unread {
			lingerUnread(w, x.readBy)
		}
		g.observe(x.group, x.status(), x.resp.answeredBy(g.clk.Now()).Sub(arrived))
		x.spool.release()
		x.resp.finish()
		x.resp.reset(nil, 0, 0) // nothing of this request's answer is left for the next
		*x = exchange{resp: x.resp, spool: x.spool, run: x.run}
		exchanges.Put(x)
	}()
	if !g.inflight.enter() {
		g.refuseDraining(w, x)
		return
	}
	defer g.inflight.leave()

	closeAfter := smuggled(r)
	if closeAfter {
		// Both Content-Length and Transfer-Encoding (served by the latter),
		// or HTTP/1.0 with a Transfer-Encoding, which net/http ignores (or
		// any HTTP/1.0 request where the bytes cannot be scanned): the
		// connection is closed after (RFC 9112 6.1), so that what a front
		// proxy took for part of this request goes nowhere.
		w.Header().Set("Connection", "close")
	}
	if !httpguts.ValidHeaderFieldName(r.Method) {
		// A method is a token (RFC 9110 9.1), as a header name is. net/http
		// refuses one that is not as it reads an HTTP/1 request line, but
		// serves it over HTTP/2 ("G T"): the transport would refuse to
		// send it, an error counted against the backend's breaker, which
		// any client could so open for every tenant. Refused as net/http
		// refuses it over HTTP/1, before the tenant is read.
		g.m.rejected.WithLabelValues("method").Inc()
		g.refuse(w, x, http.StatusBadRequest, "bad_method", "the method is not a token (RFC 9110 9.1)", 0)
		return
	}
	if r.ProtoMajor == 2 && strings.IndexByte(r.URL.RawQuery, ' ') >= 0 {
		// A space ends an HTTP/1 request-target: net/http refuses one in
		// it as it reads the request line, but serves it in an HTTP/2
		// :path, and the transport writes the query as it is into the
		// backend's request line ("GET /?x HTTP/1.0 y HTTP/1.1"), which
		// each backend splits its own way. (A space in the path is
		// escaped.) Refused as net/http refuses it over HTTP/1.
		g.m.rejected.WithLabelValues("target").Inc()
		g.refuse(w, x, http.StatusBadRequest, "bad_target", "the query has a space (RFC 3986 3.4)", 0)
		return
	}
	if r.Method == http.MethodOptions && r.RequestURI == "*" {
		// About the server, not a resource of a backend's: answered here,
		// as net/http would, once the check above has run.
		w.Header().Set("Content-Length", "0")
		return
	}
	// Methods are case-sensitive (RFC 9110 9.1), but net/http serves
	// "trace" or "Connect" as sent, and a backend that upper-cases the
	// method (Symfony, Werkzeug) runs TRACE or CONNECT: they are refused
	// in any case.
	if strings.EqualFold(r.Method, http.MethodTrace) || strings.EqualFold(r.Method, "TRACK") {
		// A backend answers TRACE with the request it got: the headers
		// the gateway set (the tenant, the client's address as the
		// gateway saw it) and any credential a browser added (cross-site
		// tracing), echoed to the client. IIS answers TRACK, its own
		// name for it, alike. Refused before the tenant is read, as
		// nginx refuses them; Max-Forwards, which would have the gateway
		// answer TRACE itself (RFC 9110 7.6.2), is then moot.
		g.m.rejected.WithLabelValues("method").Inc()
		g.refuse(w, x, http.StatusNotImplemented, "method_not_supported", r.Method+" is not proxied", 0)
		return
	}
	if r.Method == http.MethodOptions && !forwardable(r.Header) {
		// Max-Forwards: 0 asks the first recipient to answer (RFC 9110
		// 7.6.2): a backend must not see it. Answered as "OPTIONS *".
		w.Header().Set("Content-Length", "0")
		return
	}
	if strings.EqualFold(r.Method, http.MethodConnect) {
		// A tunnel is a forward proxy's to open, not a backend's: proxied,
		// CONNECT reached the backend as a request for "/", and its 2xx
		// told a front proxy that forwarded it to switch to a blind
		// tunnel, through which the client's own requests would then reach
		// the gateway with a tenant header of its choosing. Refused before
		// the tenant is read, and the connection closed, whatever a front
		// proxy made of the answer.
		w.Header().Set("Connection", "close")
		g.m.rejected.WithLabelValues("method").Inc()
		g.refuse(w, x, http.StatusNotImplemented, "method_not_supported", r.Method+" is not proxied", 0)
		return
	}
	if anyOverride(r.Header, r.URL.RawQuery, refusedMethod) {
		// A method override (X-HTTP-Method-Override: TRACE, ?_method=trace)
		// has a backend run the method it names, one the gateway refuses
		// when it is the request's own.
		g.m.rejected.WithLabelValues("method").Inc()
		g.refuse(w, x, http.StatusNotImplemented, "method_not_supported", "a method override to TRACE, TRACK or CONNECT is not proxied", 0)
		return
	}
	if r.Method != http.MethodHead && headMethod(r.Method) {
		// "head" or "Head" is no HEAD to the transport, which reads the
		// body the answer's Content-Length announces; a backend that
		// upper-cases the method (gunicorn with casefold_http_method,
		// Symfony behind Apache) answers it as a HEAD, without the body:
		// the transport waited for it to the deadline, as for an override
		// to HEAD below.
		g.m.rejected.WithLabelValues("method").Inc()
		g.refuse(w, x, http.StatusNotImplemented, "method_not_supported", "HEAD in another case than HEAD is not proxied", 0)
		return
	}
	if r.Method != http.MethodHead && anyOverride(r.Header, r.URL.RawQuery, headMethod) {
		// A backend running the request as a HEAD (Express with
		// method-override) answers its Content-Length without the body,
		// framed by a server that saw another method: the transport
		// waited for the body to the request's deadline, holding the
		// slot, and counted the 504 against the backend's breaker, which
		// any client could so open for every tenant.
		g.m.rejected.WithLabelValues("method").Inc()
		g.refuse(w, x, http.StatusNotImplemented, "method_not_supported", "a method override to HEAD is not proxied", 0)
		return
	}
	if r.ProtoMajor == 2 && r.Method == "PRI" {
		// The HTTP/2 connection preface ("PRI * HTTP/2.0") on an HTTP/1
		// connection, which net/http hands to the handler (a real HTTP/2
		// connection, negotiated over TLS, never shows it): proxied, it
		// reached a backend as a request of the default tenant, and was
		// answered 200 to a client then expecting HTTP/2 frames.
		w.Header().Set("Connection", "close")
		g.m.rejected.WithLabelValues("method").Inc()
		g.refuse(w, x, http.StatusHTTPVersionNotSupported, "method_not_supported", "HTTP/2 is served over TLS only, negotiated by ALPN", 0)
		return
	}
	if r.URL.Opaque != "" {
		// A target with a scheme and no authority ("http:t/acme/x"),
		// which net/http parses as an opaque URL, without a path: the
		// transport sent the opaque part as the backend's request-target
		// ("GET t/acme/x HTTP/1.1"), no origin-form (RFC 9112 3.2.1),
		// and with tenant.from path under the default tenant, while a
		// backend taking it and decoding it before it routes
		// ("%2Ft%2Facme") would serve another tenant's path; to an
		// https backend speaking HTTP/2 it was no :path, which the
		// transport refused to send, an error counted against the
		// backend's breaker, which any client could so open. An
		// http URI has an authority (RFC 9110 4.2.1): refused as no
		// target the gateway can proxy, before the tenant is read (after
		// the methods refused whatever their target: "connect host:22" is
		// opaque too, and refused as a CONNECT).
		g.m.rejected.WithLabelValues("target").Inc()
		g.refuse(w, x, http.StatusBadRequest, "bad_target", "the request-target is neither a path nor an absolute URI with an authority (RFC 9112 3.2)", 0)
		return
	}
	rc := http.NewResponseController(w)
	if hasBody {
		// Only a request with a body gets a read deadline: for one without,
		// the server is already reading ahead, and a deadline would cut it.
		x.readBy = start.Add(cfg.Timeouts.Read)
		_ = rc.SetReadDeadline(x.readBy)
	}
	// The response cannot start before the backend answers: the write
	// deadline covers the whole exchange, and is moved to timeouts.write
	// from the moment the answer is sent.
	_ = rc.SetWriteDeadline(start.Add(sumDurations(cfg.Timeouts.Read, cfg.Timeouts.Upstream, cfg.Timeouts.Write)))

	key, err := extractTenant(&cfg.Tenant, r, g.clk.Now())
	if err != nil {
		if errors.Is(err, ErrUnauthenticated) {
			g.m.rejected.WithLabelValues("unauthenticated").Inc()
			// A challenge names the scheme the client should answer with:
			// with client_cert that is the TLS handshake, which no HTTP
			// scheme names, so the 401 carries none.
			if cfg.Tenant.From == config.FromBearer {
				w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			}
			g.refuse(w, x, http.StatusUnauthorized, "unauthenticated", err.Error(), 0)
			return
		}
		g.m.rejected.WithLabelValues("invalid-tenant").Inc()
		g.refuse(w, x, http.StatusBadRequest, "invalid_tenant", err.Error(), 0)
		return
	}
	if key == "" && cfg.Tenant.Require {
		// Served as the default tenant, a request naming none would take
		// that tenant's capacity: a tenant over its limits could move its
		// requests onto it by leaving its key out, or by sending other
		// credentials a backend accepts (Basic, a cookie) than the token.
		g.m.rejected.WithLabelValues("missing-tenant").Inc()
		if cfg.Tenant.From == config.FromBearer {
			// RFC 6750 3.1: a request without a token is challenged
			// without an error code.
			w.Header().Set("WWW-Authenticate", "Bearer")
			g.refuse(w, x, http.StatusUnauthorized, "missing_tenant", "no bearer token, and tenant.require refuses a request without one", 0)
			return
		}
		g.refuse(w, x, http.StatusBadRequest, "missing_tenant", "the request names no tenant, or not from an address in tenant.trusted_proxies, and tenant.require refuses it", 0)
		return
	}
	if key != "" && st.caseTwin(key) {
		g.m.rejected.WithLabelValues("invalid-tenant").Inc()
		g.refuse(w, x, http.StatusBadRequest, "invalid_tenant", ErrInvalidTenant.Error()+": a configured tenant's in another case", 0)
		return
	}
	tenant := x.group
	if key != "" {
		tenant = key
	}
	// The backend is told the tenant the gateway admitted the request as,
	// whatever the client claimed.
	if hv := r.Header[cfg.Tenant.Header]; len(hv) != 1 || hv[0] != tenant {
		r.Header.Set(cfg.Tenant.Header, tenant)
	}
	dropAliases(r.Header, &cfg.Tenant)
	if cs := r.Header["Connection"]; len(cs) > 0 {
		// The proxy drops from the proxied request every header the
		// client's Connection names: naming the tenant header there
		// would keep the backend from being told the tenant.
		if cs = withoutToken(cs, cfg.Tenant.Header); len(cs) > 0 {
			r.Header["Connection"] = cs
		} else {
			delete(r.Header, "Connection")
		}
	}
	if sent := r.Header["Upgrade"]; len(sent) > 0 {
		// A switch to h2c, passed on to a backend that takes it, would
		// have the client speak HTTP/2 to the backend through this
		// connection: every stream a request the gateway never admits,
		// with a tenant header of the client's own. The request is
		// proxied as if it had not asked (RFC 9110 7.8 lets a server
		// ignore Upgrade). An HTTP/1.0 request's Upgrade is ignored
		// whole, as 7.8 requires: HTTP/1.0 has no switch, and a front
		// proxy speaking it to the gateway would send its next clients'
		// requests into a switched connection, to the backend unadmitted.
		// So is that of a request whose connection must be closed after
		// its answer (closeAfter): switched, it would stay open, and
		// what a front proxy took for part of this request would go on
		// to the backend. A protocol named other than in printable
		// ASCII is ignored too: the proxy refuses it through the
		// gateway's answer for a failed backend (502, a failure of the
		// tenant's breaker), for what is the client's header. Of a list
		// of protocols (in order of preference, RFC 9110 7.8), the backend
		// is offered the first alone: the proxy carries a switch only to
		// the protocol the request names as a whole, and a backend picking
		// another listed one, as 7.8 lets it, was a 502 and a failure of
		// its breaker, which any client could so open for every tenant.
		var up []string
		if r.ProtoAtLeast(1, 1) && !closeAfter {
			up = withoutToken(printable(sent), "h2c")
		}
		if first := firstToken(up); first == "" {
			delete(r.Header, "Upgrade")
		} else if len(sent) != 1 || sent[0] != first {
			r.Header["Upgrade"] = []string{first}
		}
	}
	// The tenant takes its place among the tracked groups (tenant.max_groups)
	// only in admit, once its body is in. Until then it has used no group:
	// its refusals (rate limit, body) and their metrics name the tenant it
	// was read as, whose group it is for a configured tenant and the default
	// one, and whose rate bucket refused it; an unconfigured key has no
	// series of its own (metrics count it as _other), and counting it under
	// _overflow would name capacity it never took.
	x.group = tenant
	if wait, ok := st.rates.allow(tenant, g.clk.Now()); !ok {
		g.m.rejected.WithLabelValues("rate-limited").Inc()
		g.refuse(w, x, http.StatusTooManyRequests, "rate_limited", "the tenant's rate limit is reached", wait)
		return
	}

	if hasBody {
		// Its bytes in a file count against the spool's caps, as this
		// request's config sets them: a reload changes them for the
		// requests arriving after it, as it changes body.max_bytes.
		x.spool.use = &g.spooled
		x.spool.client, x.spool.counted = spoolClient(&cfg.Tenant, r)
	}
	if err := receive(w, r, &cfg.Body, &x.spool); err != nil {
		be := err.(*bodyError)
		if be == errBadBody && errors.Is(context.Cause(r.Context()), ErrAborted) {
			// The drain's deadline passed as the body came, and its
			// connection was closed under it: a request in flight,
			// aborted as one at its backend is (answered 503 draining
			// and counted aborted), not a body the client got wrong.
			g.m.aborted.WithLabelValues("request").Inc()
			g.refuseDraining(w, x)
			return
		}
		if be == errBadBody && r.Context().Err() != nil {
			// The body broke off because the client's side ended: its
			// HTTP/2 stream reset, or its HTTP/1 connection closed. No
			// one to answer, and nothing the client got wrong: counted
			// as gone (499), whatever the protocol. net/http ends an
			// HTTP/1 request's context at any end of its connection's
			// reading, a half-close included, which it cannot tell from
			// a close: a client that half-closes after a short body
			// gets no answer, as one that half-closes once its request
			// is sent (see below). A body the client framed wrong
			// (malformed chunks) leaves the context alone, and is
			// answered 400. The server cuts the connection: a handler
			// that writes nothing has it send an empty 200.
			x.code = statusClientClosed
			panic(http.ErrAbortHandler)
		}
		g.m.rejected.WithLabelValues(be.reason).Inc()
		switch be {
		case errReadTimeout:
			g.m.ioTimeouts.WithLabelValues("read").Inc()
		case errSpool:
			// The gateway's own failure (a full or missing spool_dir, a
			// disk error), which no client can tell the operator of.
			g.failLog.Error("request body spool failed", "tenant", x.group, "dir", cfg.Body.SpoolDir, "err", x.spool.failed)
		}
		var wait time.Duration
		if be == errSpoolFull || be == errClientSpoolFull {
			// Room is made as the requests holding it end, which nothing
			// here can tell the time of: the client is asked to wait a
			// little, as one refused a connection is.
			wait = time.Second
		}
		g.refuse(w, x, be.status, be.code, be.msg, wait)
		return
	}
	x.unread = false

	// One deadline bounds everything downstream: queueing, tries, backoff.
	ctx := r.Context()
	if ctx.Value(servedKey{}) == nil {
		// Served by another server than ProxyServer: the abort at the
		// drain deadline reaches it through a registration of its own.
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		defer cancel(nil)
		defer context.AfterFunc(g.abortCtx, func() { cancel(context.Cause(g.abortCtx)) })()
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeouts.Upstream)
	defer cancel()
	ctx = withTimeouts(ctx, &cfg.Timeouts)
	x.timeout = cfg.Timeouts.Upstream
	x.resp.reset(w, cfg.Response.BufferBytes, cfg.Timeouts.Write)
	err = g.admit(ctx, x, tenant)
	switch {
	case x.resp.status != 0:
		// The backend answered (or proxyError did): the slot and the
		// tenant's place are free, and a kept answer goes to the client now.
		x.resp.finish()
	case errors.Is(err, errProxyPanic):
		g.refuse(w, x, http.StatusBadGateway, "backend_error", "the gateway failed to proxy the request", 0)
	case x.answered:
		// The request ran, and proxyError recorded that its client went
		// away meanwhile (and counted it): nothing to answer.
	default:
		g.notRun(w, x, st, ctx, err)
	}
	if x.drained || errors.Is(context.Cause(ctx), ErrAborted) {
		g.m.aborted.WithLabelValues("request").Inc()
	}
	if x.aborted || x.code == statusClientClosed {
		// Recovered by the server, which alone can cut the connection, so
		// that the client sees the answer is incomplete, or, for a
		// request given up as its client went away, that it has none:
		// net/http ends the context of a request whose client
		// half-closed the connection too, and a handler that writes
		// nothing has it send an empty 200, to a client that may still
		// be reading, for a request abandoned in the queue or aborted
		// at the backend.
		panic(http.ErrAbortHandler)
	}
}

// unreadLinger bounds how long the rest of a body the gateway did not
// read is waited for after the handler has answered (lingerUnread).
const unreadLinger = time.Second

// lingerUnread bounds what the server waits for of an HTTP/1 request's body
// that the handler answered without receiving whole (refused before it
// was read, by its method, tenant or rate limit, or part way through:
// too large, badly coded): the rest of it for unreadLinger at most, and
// never past the request's own read deadline, readBy (zero: none set).
// net/http reads up to 256 KiB of what is left before it sends the
// answer, to keep the connection, as long as the read deadline lets it: a
// client sending the rest slowly had its answer, and its connection, held
// for timeouts.read. A body in within the linger keeps the connection;
// else the answer closes it.
func lingerUnread(w http.ResponseWriter, readBy time.Time) {
	by := time.Now().Add(unreadLinger)
	if !readBy.IsZero() && readBy.Before(by) {
		by = readBy
	}
	_ = http.NewResponseController(w).SetReadDeadline(by)
}

// admit runs x in tenant's group, and from here x.group names the group
// used: the tenant's own, or the overflow group. An unconfigured tenant's
// place among the tracked groups (tenant.max_groups) is taken only now,
// once the body is in, and given back as soon as Do returns, before a kept
// answer goes to the client: a client that sends its body slowly, or reads
// its answer slowly, under many made-up keys holds no place meanwhile, and
// pushes no other new tenant into the overflow group. An answer streamed
// to the client (see response) is sent inside Do, and holds the place as
// it holds the slot.
func (g *Gateway) admit(ctx context.Context, x *exchange, tenant string) error {
	group, counted := g.groups.acquire(tenant)
	defer g.groups.release(group, counted)
	x.group = group
	return g.ex.Do(ctx, group, x.run)
}

// forwardable reports whether an OPTIONS request with header h may be
// forwarded, and counts the gateway's hop in its Max-Forwards when it may:
// RFC 9110 7.6.2 has a recipient answer one with Max-Forwards 0 itself,
// and decrement it in one it forwards. A value that is not a number is
// left as it is.
func forwardable(h http.Header) bool {
	mf := h["Max-Forwards"]
	if len(mf) == 0 {
		return true
	}
	n, err := strconv.ParseUint(strings.TrimSpace(mf[0]), 10, 31)
	switch {
	case err != nil:
		return true
	case n == 0:
		return false
	}
	h["Max-Forwards"] = []string{strconv.FormatUint(n-1, 10)}
	return true
}

// dropAliases deletes from h the headers that spell the tenant header, or
// one of the X-Forwarded headers or X-Real-IP the proxy sets, with an
// underscore for a hyphen ("X_Tenant"): a backend that reads headers as
// CGI variables (PHP, WSGI and Rack servers, HTTP_X_TENANT) takes them for
// the header the gateway set, and may read the client's value instead of
// the gateway's.
// nginx drops every header with an underscore by default; only these
// matter to the gateway.
//
// A tenant header configured with an underscore ("X_Tenant") has aliases
// without one: the client's "X-Tenant" is the same variable.
//
// It deletes too, in any spelling, the other headers that tell a backend
// who the client is or how it connected (forwardingHeaders), and the host
// it asked for (hostHeaders), which are the gateway's to tell; Proxy,
// which a CGI backend reads as HTTP_PROXY, the outbound proxy of the HTTP
// client libraries under it (httpoxy, CVE-2016-5385: the backend's own
// requests, credentials and all, sent through the client's proxy); those
// of a proxy between the gateway and the backend (proxyFamilies); with
// tenant.from path, the headers that some backends take for the request's
// path (pathOverrides); with tenant.from client_cert, those that some
// backends take for the client's certificate (certHeaders); and with
// tenant.from bearer, those that some backends take for the user an
// authenticating proxy vouches for (userHeaders, userFamilies): the
// gateway admitted the request under the tenant of the path it read, the
// certificate or the token it verified, and the backend must not serve
// another.
func dropAliases(h http.Header, t *config.Tenant) {
	tenantHeader := t.Header
	var only, onlyFamilies []string // the headers, and families, dropped for this tenant source
	switch t.From {
	case config.FromPath:
		only = pathOverrides[:]
	case config.FromClientCert:
		only = certHeaders[:]
	case config.FromBearer:
		only, onlyFamilies = userHeaders[:], userFamilies[:]
	}
	underscored := strings.IndexByte(tenantHeader, '_') >= 0
	for k := range h {
		if k == tenantHeader {
			continue
		}
		if oneOf(k, forwardingHeaders[:]) || oneOf(k, hostHeaders[:]) || sameVariable(k, "Proxy") || oneOf(k, only) ||
			ofFamily(k, proxyFamilies[:]) || ofFamily(k, onlyFamilies) {
			delete(h, k)
			continue
		}
		if strings.IndexByte(k, '_') < 0 {
			if underscored && sameVariable(k, tenantHeader) {
				delete(h, k)
			}
			continue
		}
		if sameVariable(k, tenantHeader) || sameVariable(k, "X-Forwarded-For") ||
			sameVariable(k, "X-Forwarded-Host") || sameVariable(k, "X-Forwarded-Proto") ||
			sameVariable(k, "X-Real-Ip") {
			delete(h, k)
		}
	}
}

// pathOverrides are the headers a backend or its framework may route by
// instead of the request's path, as a front proxy that rewrote the path
// would have set them: X-Original-URL and X-Rewrite-URL (IIS URL Rewrite,
// Symfony and Zend before they stopped trusting them, some Java
// frameworks), X-Override-URL, X-Original-URI (nginx's auth_request
// convention), and X-Forwarded-Prefix, -Path and -Uri, which Spring's
// ForwardedHeaderFilter and some routers prepend to, or take for, the path.
// From the client, each would have the backend serve a path the gateway
// never read a tenant from.
var pathOverrides = [...]string{
	"X-Original-Url", "X-Rewrite-Url", "X-Override-Url", "X-Original-Uri",
	"X-Forwarded-Prefix", "X-Forwarded-Path", "X-Forwarded-Uri",
}

// forwardingHeaders are the headers, besides the X-Forwarded ones and
// X-Real-IP that the proxy sets, that backends read for the client's
// scheme, port or address, as a front proxy would have set them:
// X-Forwarded-Ssl, -Scheme, -Protocol and -Port and Front-End-Https (Rack,
// gunicorn's secure_scheme_headers, Symfony, IIS), X-Scheme (Tornado's
// xheaders, before X-Forwarded-Proto) and X-Forwarded-Https (Mojolicious),
// and Client-IP (Rails' remote_ip), X-Client-IP, True-Client-IP, X-Cluster-Client-IP,
// CF-Connecting-IP, Fastly-Client-IP, X-Forwarded and Forwarded-For (the
// headers common client-address libraries try before X-Forwarded-For).
// From the client, each would contradict what the gateway tells in
// X-Forwarded-Proto and X-Forwarded-For: the request's scheme, and the
// connection's peer.
var forwardingHeaders = [...]string{
	"X-Forwarded-Ssl", "X-Forwarded-Scheme", "X-Forwarded-Protocol", "X-Forwarded-Port", "Front-End-Https",
	"X-Scheme", "X-Forwarded-Https",
	"Client-Ip", "X-Client-Ip", "True-Client-Ip", "X-Cluster-Client-Ip", "Cf-Connecting-Ip", "Fastly-Client-Ip",
	"X-Forwarded", "Forwarded-For",
}

// hostHeaders are the headers a backend or its framework may route virtual
// hosts by instead of Host, or of the X-Forwarded-Host the proxy sets, as
// a front proxy would have set them: X-Forwarded-Server (Apache's
// mod_proxy), X-Original-Host (IIS ARR, Azure's gateways), X-Host and
// X-HTTP-Host-Override (some frameworks and routers). From the client,
// each would have the backend serve another host than the one the
// request named: with tenant.from host, another tenant's, under the
// limits of the tenant the gateway admitted the request as. The gateway
// tells the request's Host in X-Forwarded-Host whatever the tenant
// source, so they are dropped in every mode.
var hostHeaders = [...]string{
	"X-Forwarded-Server", "X-Original-Host", "X-Host", "X-Http-Host-Override",
}

// certHeaders are the headers a backend or its framework may read for the
// client's certificate, as a front proxy that verified it would have set
// them: X-Forwarded-Client-Cert (Envoy, Istio), X-Forwarded-Tls-Client-Cert
// and -Info (Traefik), X-SSL-Client-Cert, -DN, -S-DN and -Verify (nginx
// setups), X-SSL-Client-CN and -SHA1 and X-SSL-Issuer (HAProxy's documented
// setup), SSL-Client-Cert and -Verify (Tomcat's SSLValve reads
// ssl_client_cert), X-Client-Cert (Google's load balancers),
// X-ARR-ClientCert (Azure, ASP.NET Core's certificate forwarding) and
// X-Amzn-Mtls-Clientcert (AWS load balancers). From the client, each
// would name a certificate the gateway never verified.
var certHeaders = [...]string{
	"X-Forwarded-Client-Cert", "X-Forwarded-Tls-Client-Cert", "X-Forwarded-Tls-Client-Cert-Info",
	"X-Ssl-Client-Cert", "X-Ssl-Client-Dn", "X-Ssl-Client-S-Dn", "X-Ssl-Client-Verify",
	"X-Ssl-Client-Cn", "X-Ssl-Client-Sha1", "X-Ssl-Issuer",
	"Ssl-Client-Cert", "Ssl-Client-Verify", "X-Client-Cert", "X-Arr-Clientcert", "X-Amzn-Mtls-Clientcert",
}

// userHeaders are the headers a backend or its framework may read for the
// authenticated user, as an authenticating proxy in front of it would have
// set them: X-Forwarded-User, -Email, -Preferred-Username, -Groups and
// -Access-Token (oauth2-proxy), Remote-User and X-Remote-User
// (Apache-style setups), Remote-Groups, -Email and -Name (Authelia's
// trusted header SSO), X-Remote-Group (Kubernetes' front proxy
// authentication), X-Webauth-User (Grafana's auth proxy), X-Userinfo
// (Kong's OpenID Connect plugin), X-Goog-Iap-Jwt-Assertion (Google's IAP)
// and X-Ms-Client-Principal (Azure App Service); the other names those
// proxies set are matched by their families' prefixes (userFamilies).
// From the client, each would name a user the gateway never verified, of
// another tenant than the token's.
var userHeaders = [...]string{
	"X-Forwarded-User", "X-Forwarded-Email", "X-Forwarded-Preferred-Username", "X-Forwarded-Groups", "X-Forwarded-Access-Token",
	"Remote-User", "X-Remote-User", "X-Webauth-User", "X-Userinfo",
	"Remote-Groups", "Remote-Email", "Remote-Name", "X-Remote-Group",
	"X-Goog-Iap-Jwt-Assertion", "X-Ms-Client-Principal",
}

// userFamilies are the prefixes of header families that authenticating
// proxies set for the user, each name of which a backend may read:
// X-Remote-Extra-* (the user's extra attributes in Kubernetes' front proxy
// authentication, which an API server behind takes as the user's), and
// X-Auth-Request-* (oauth2-proxy), X-Authentik-* (authentik's proxy
// outpost, which adds X-Authentik-Meta-*), X-Amzn-Oidc-* (AWS load
// balancers), X-Goog-Authenticated-User-* (Google's IAP) and
// X-Ms-Client-Principal-* (Azure App Service, -Idp too), whose members
// grow with their proxies' versions.
var userFamilies = [...]string{
	"X-Remote-Extra-", "X-Auth-Request-", "X-Authentik-", "X-Amzn-Oidc-", "X-Goog-Authenticated-User-", "X-Ms-Client-Principal-",
}

// proxyFamilies are the prefixes of header families dropped whatever the
// tenant source: X-Envoy-*, which Envoy (and Istio's sidecars) in front of
// a backend takes from its downstream as its own unless configured as an
// edge proxy. From the client, X-Envoy-Max-Retries and -Retry-On would have
// it send one admitted request to the backend many times, past the
// capacity the gateway gave the tenant, X-Envoy-Original-Path name another
// path, and X-Envoy-Internal make the request internal.
var proxyFamilies = [...]string{"X-Envoy-"}

// ofFamily reports whether header name k starts with one of prefixes, in
// any case, an underscore matching a hyphen. It runs over the names a
// request has, so that a family costs a comparison of each name's first
// bytes, however many names the family has.
func ofFamily(k string, prefixes []string) bool {
	for _, p := range prefixes {
		if len(k) > len(p) && sameVariable(k[:len(p)], p) {
			return true
		}
	}
	return false
}

// oneOf reports whether header name k is one of names, in any case, an
// underscore matching a hyphen.
func oneOf(k string, names []string) bool {
	for _, name := range names {
		if sameVariable(k, name) {
			return true
		}
	}
	return false
}

// sameVariable reports whether header names a and b are the same CGI
// variable: equal in any case, an underscore matching a hyphen.
func sameVariable(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range len(a) {
		x, y := lower(a[i]), lower(b[i])
		if x == '_' {
			x = '-'
		}
		if y == '_' {
			y = '-'
		}
		if x != y {
			return false
		}
	}
	return true
}

// withoutToken returns the Connection header values vs without the token
// name (in any case), or vs itself when none names it.
func withoutToken(vs []string, name string) []string {
	var out []string
	for i, v := range vs {
		if !hasToken(v, name) && out == nil {
			continue
		}
		if out == nil {
			out = append(make([]string, 0, len(vs)), vs[:i]...)
		}
		var kept []string
		for tok := range strings.SplitSeq(v, ",") {
			if t := strings.TrimSpace(tok); t != "" && !strings.EqualFold(t, name) {
				kept = append(kept, t)
			}
		}
		if len(kept) > 0 {
			out = append(out, strings.Join(kept, ", "))
		}
	}
	if out == nil {
		return vs
	}
	return out
}

// printable returns vs without the values that are not printable ASCII,
// or vs itself when all are.
func printable(vs []string) []string {
	var out []string
	for i, v := range vs {
		ok := true
		for j := range len(v) {
			if v[j] < 0x20 || v[j] > 0x7e {
				ok = false
				break
			}
		}
		switch {
		case !ok && out == nil:
			out = append(make([]string, 0, len(vs)), vs[:i]...)
		case ok && out != nil:
			out = append(out, v)
		}
	}
	if out == nil {
		return vs
	}
	return out
}

// firstToken returns the first element of the comma-separated lists vs,
// trimmed, or "" if they have none.
func firstToken(vs []string) string {
	for _, v := range vs {
		for tok := range strings.SplitSeq(v, ",") {
			if t := strings.TrimSpace(tok); t != "" {
				return t
			}
		}
	}
	return ""
}

func hasToken(v, name string) bool {
	for tok := range strings.SplitSeq(v, ",") {
		if strings.EqualFold(strings.TrimSpace(tok), name) {
			return true
		}
	}
	return false
}

// errProxyPanic is forward's error when the proxy panicked with anything but
// http.ErrAbortHandler.
var errProxyPanic = errors.New("gateway: the proxy panicked")

// forward runs as the admitted request, in the handler's goroutine: it
// proxies r and returns an error for the outcomes that count against a
// breaker. The proxy's http.ErrAbortHandler (an answer it could not
// finish) counts as the backend's failure only when the backend broke it
// off or missed the deadline, not when the client went away or did not
// take it, as proxyError counts errors before the answer. When part of the
// answer is out, ServeHTTP raises http.ErrAbortHandler again once Do has
// returned; when nothing was sent yet, the client is answered as
// proxyError answers (502, 504, ...).
func (g *Gateway) forward(ctx context.Context, x *exchange, r *http.Request) (err error) {
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		if v != http.ErrAbortHandler {
			g.log.Error("proxy panicked", "tenant", x.group, "panic", v, "stack", string(debug.Stack()))
		}
		switch {
		case x.resp.committed || x.resp.hijacked:
			// Part of the answer is out: only cutting the connection
			// tells the client it is incomplete.
			g.log.Debug("response cut short", "tenant", x.group)
			x.aborted = true
			err = errProxyPanic
			if v == http.ErrAbortHandler {
				err = g.brokenOff(ctx, x)
			}
		case v == http.ErrAbortHandler:
			// The backend's answer broke off while it was kept.
			x.resp.discard()
			g.proxyError(&x.resp, r.WithContext(ctx), errBrokenOff)
			err = x.verdict
		default:
			x.resp.discard()
			err = errProxyPanic
		}
	}()
	x.resp.ctx = ctx
	defer x.resp.unhijack()
	g.proxy.ServeHTTP(&x.resp, r.WithContext(ctx))
	if x.answered {
		return x.verdict
	}
	if x.resp.status >= 500 {
		return errBackendStatus
	}
	return nil
}

// errBrokenOff is the error of an answer the proxy could not finish,
// reading it from the backend or sending it to the client.
var errBrokenOff = errors.New("gateway: the answer broke off")

// brokenOff returns the verdict on x, whose answer broke off once part of
// it was sent: a failure if the backend broke it off or missed the
// deadline (one it was held to: heldToDeadline), context.Canceled if the
// client went away or did not take it in time (within timeouts.write, or
// before the deadline passed while the gateway waited on it: late), or the
// drain aborted it (drained: the executor's shutdown too, which is no
// client going away).
func (g *Gateway) brokenOff(ctx context.Context, x *exchange) error {
	switch {
	case drained(ctx):
		x.drained = true
		return context.Canceled
	case x.resp.err != nil, x.resp.late, ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded):
		g.m.canceled.WithLabelValues("request").Inc()
		return context.Canceled
	case deadlinePassed(ctx) && !x.held:
		return context.Canceled // the deadline passed on a backend not held to it
	}
	return errBrokenOff
}

// notRun answers a request that was never proxied: refused, timed out in
// the queue, or cancelled while waiting.
func (g *Gateway) notRun(w http.ResponseWriter, x *exchange, st *state, ctx context.Context, err error) {
	var re *executor.RejectedError
	switch {
	case errors.Is(err, breaker.ErrOpenState), errors.Is(err, breaker.ErrTooManyRequests):
		// Retry-After: the time the tenant's breaker has left before it lets
		// a probe through (on g.clk, the breakers' clock), as for backend
		// breakers; a second when it is half-open with its probes out (their
		// answer comes within a request's time) or its time has passed.
		g.refuse(w, x, http.StatusServiceUnavailable, "breaker_open", "the tenant's circuit breaker is open",
			adapt.RetryDelay(g.ex, err, time.Second))
	case errors.Is(err, executor.ErrShutdown), errors.Is(err, executor.ErrGroupShutdown),
		errors.Is(context.Cause(ctx), ErrAborted):
		// The executor shuts down only in Close, after the abort, which
		// may not have reached ctx yet (drained).
		x.drained = true
		g.refuseDraining(w, x)
	case errors.As(err, &re) && re.Limit == executor.LimitQueueTimeout:
		g.m.queueDropped.Inc()
		g.m.busy.WithLabelValues(endpointProxy).Inc()
		g.refuse(w, x, http.StatusTooManyRequests, "rejected", "waited past the queue timeout", g.queueRetryAfter(re, st.pol))
	case errors.As(err, &re) && !errors.Is(err, context.DeadlineExceeded):
		g.m.busy.WithLabelValues(endpointProxy).Inc()
		g.refuse(w, x, http.StatusTooManyRequests, "rejected", string(re.Limit)+" full", g.queueRetryAfter(re, st.pol))
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		g.m.queueDropped.Inc()
		g.refuse(w, x, http.StatusGatewayTimeout, "deadline", "the request's deadline passed while it waited", 0)
	default: // the client went away while the request waited: no one to answer
		g.m.queueDropped.Inc()
		g.m.canceled.WithLabelValues("queued").Inc()
		x.code = statusClientClosed
	}
}

// refuseDraining answers 503 draining and closes the connection, whichever
// step of the drain refused the request: a client keeping it would send
// its next request to a gateway that takes none. A server shutting down
// closes its connections after their answers itself, but not one the
// gateway is served by without Serve, and not between the drain's start
// and the server's shutdown.
func (g *Gateway) refuseDraining(w http.ResponseWriter, x *exchange) {
	w.Header().Set("Connection", "close")
	g.refuse(w, x, http.StatusServiceUnavailable, "draining", "the gateway is shutting down", time.Second)
}

// drained reports whether ctx, a running request's, was cancelled by the
// drain: aborted at its deadline, or by Close. Close aborts a request
// served by another server than ProxyServer on a goroutine of the abort's
// (context.AfterFunc's), and shuts the executor down right after: the
// executor's cancellation (cause ErrShutdown) may reach the request's
// task first, and must not be taken for a client that went away.
func drained(ctx context.Context) bool {
	cause := context.Cause(ctx)
	return errors.Is(cause, ErrAborted) || errors.Is(cause, executor.ErrShutdown)
}

// statusClientClosed is recorded (never sent) for a request whose client
// went away first, as nginx's 499.
const statusClientClosed = 499

// proxyError answers what the proxy could not: the backend failed or missed
// the deadline, or the drain aborted the request. It sets the exchange's
// verdict for the breaker. w is the exchange's response.
func (g *Gateway) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	x := w.(*response).x
	x.answered = true
	ctx := r.Context()
	var ne net.Error
	var oe *net.OpError
	var open *openError
	switch {
	case errors.As(err, &open):
		x.verdict = context.Canceled // the backends' breakers have counted already
		g.refuse(w, x, http.StatusServiceUnavailable, "breaker_open", "every backend's circuit breaker is open", open.retryAfter)
	case errors.Is(err, errHeadersTooLarge):
		// The transport refused to send the request (see transport): what
		// the client sent, not the backend's failure nor the tenant's.
		x.verdict = context.Canceled
		g.m.rejected.WithLabelValues("header-size").Inc()
		g.refuse(w, x, http.StatusRequestHeaderFieldsTooLarge, "headers_too_large",
			"the request's headers are over what the backend takes (its HTTP/2 SETTINGS_MAX_HEADER_LIST_SIZE)", 0)
	case drained(ctx) && x.resp.hijacked:
		// The backend answered 101, and the drain cut the upgrade as the
		// switch was written to the client: answered with 101, and
		// aborted. Refused (503), a switch the gateway had sent was
		// counted as an upgrade it refused.
		x.verdict = context.Canceled
		x.drained = true
	case drained(ctx):
		x.verdict = context.Canceled // says nothing of the backend
		x.drained = true
		g.refuseDraining(w, x)
	case x.resp.hijacked && deadlinePassed(ctx):
		// The backend answered 101 in time, and the request's deadline
		// passed as the switch was written to the client, which did not
		// take it: the gateway closed the connection at the deadline
		// (response.Hijack), as it ends an upgrade whose client goes
		// silent once switched. An upgrade ended at its deadline, counted
		// as answered with 101; read as the deadline case below, it was a
		// backend that missed the deadline (504, an upstream timeout, a
		// failure of the tenant's breaker).
		x.verdict = nil
	case deadlinePassed(ctx):
		x.verdict = err
		if !x.held {
			// Admitted with less than half its time left (heldToDeadline):
			// says nothing of the backend.
			x.verdict = context.Canceled
		}
		g.m.ioTimeouts.WithLabelValues("upstream").Inc()
		g.refuse(w, x, http.StatusGatewayTimeout, "upstream_timeout", "the backend did not answer within the request's deadline", 0)
	case ctx.Err() != nil, x.resp.hijacked:
		// Once the proxy has taken the client's connection over for a
		// switch (the backend answered 101), what fails is writing that
		// answer to the client: the client went away as it came, which
		// net/http no longer tells through ctx, the connection being the
		// proxy's. Not the backend's failure, nor the tenant's breaker's.
		x.verdict = context.Canceled
		g.m.canceled.WithLabelValues("request").Inc()
		x.code = statusClientClosed
	default:
		x.verdict = err
		if errors.As(err, &oe) && oe.Op == "dial" && errors.As(err, &ne) && ne.Timeout() {
			g.m.ioTimeouts.WithLabelValues("connect").Inc()
		}
		g.log.Debug("backend error", "tenant", x.group, "err", err)
		g.refuse(w, x, http.StatusBadGateway, "backend_error", "the backend failed", 0)
	}
}

// observe records a finished request, which took d.
func (g *Gateway) observe(group string, code int, d time.Duration) {
	if code == 0 {
		code = http.StatusOK
	}
	s := g.m.seriesOf(group, g.groups.labelled(group))
	s.count(code)
	s.latency.Observe(d.Seconds())
}

// bufferPool lends the proxy its copy buffers, which it would otherwise
// allocate (32 KiB) for every response. It keeps array pointers, so that
// neither Get nor Put allocates.
type bufferPool struct{}

var proxyBufs = sync.Pool{New: func() any { return new([32 << 10]byte) }}

func (bufferPool) Get() []byte { return proxyBufs.Get().(*[32 << 10]byte)[:] }

func (bufferPool) Put(b []byte) {
	if len(b) == 32<<10 {
		proxyBufs.Put((*[32 << 10]byte)(b))
	}
}

// sumDurations returns the sum of ds, or the longest duration there is if
// it is longer: timeouts long enough to mean "never" add up past what a
// time.Duration holds, and the sum wrapped to a negative one, a deadline
// in the past.
func sumDurations(ds ...time.Duration) time.Duration {
	var sum time.Duration
	for _, d := range ds {
		if d > 0 && sum > math.MaxInt64-d {
			return math.MaxInt64
		}
		sum += d
	}
	return sum
}
