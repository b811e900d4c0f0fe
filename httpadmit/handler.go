package httpadmit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/internal/adapt"
	"github.com/groupexec/groupexec/internal/typednil"
)

// Handler returns a handler that admits each request with ex.DoWeighted for
// its tenant and, once admitted, serves it with next in the same goroutine.
// The tenant is read from the X-Tenant header unless a tenant option says
// otherwise; a request that names none runs in the default group
// (DefaultGroup, or WithDefaultGroup's). Each request weighs 1 unless
// WithWeightFunc says otherwise. A request next does not serve is answered as
// the package documentation says, or by WithRefusalWriter's function.
//
// next sees the request with the context Do gives it, which is the request's
// context or one derived from it that the executor's shutdown deadline or
// Close also cancels. executor.GroupFromContext(r.Context()) in next returns
// the group the request was admitted under, the tenant as the tenant option
// read it or the default group, so next need not read it again. A request whose context ends while it waits never
// reaches next, and its place is freed at once. Over HTTP/1, though,
// net/http ends the context when the client goes away only once the
// request's body has been read to its end, and only while the client sends
// nothing more on the connection: a request with a body (a POST, a PUT)
// waits with it unread, since next reads it, so its client's going away
// frees nothing; its place is held until it is admitted (next then meets
// the closed connection) or until policy.WithQueueTimeout refuses it, so
// set a queue timeout where clients are not trusted. Over HTTP/2 a
// client's reset of the stream ends the context at once. A panic in next releases the
// request's slot and goes on to the server, so http.ErrAbortHandler and every
// other panic keep net/http's behaviour. A panic with http.ErrAbortHandler is
// a deliberate abort, which net/http does not log as a fault: the request
// counts as Cancelled, as outcome.Classify counts work given up on, and not
// as a failure. Without WithFailureStatus only another panic counts as a
// failure for the group's circuit breaker. A runtime.Goexit in next ends its
// goroutine, as without Handler; when a rejection handler ran next on a
// goroutine of its own (Rejection.RunInCaller), it ends that goroutine only,
// and the response is aborted, as net/http aborts that of a handler that
// exits. A panic in the tenant function (WithTenantFunc), the weight
// function (WithWeightFunc) or the refusal writer (WithRefusalWriter) goes
// on to the server as one in next does, with no answer written for it:
// net/http logs it and closes the connection. None of them holds a slot:
// the first two run before the request is admitted, the writer after Do
// has returned. A panic in WithFailureStatus's function, which judges the
// status as next writes it or once next returns, goes on to the server as
// one in next does too, also when a rejection handler ran next in its
// caller (Rejection.RunInCaller).
//
// A request holds its slot until next returns, while next writes to a
// client that reads its response slowly, or not at all, too:
// http.Server's WriteTimeout, or a write deadline set with
// http.ResponseController, bounds that. A next that hijacks the
// connection (an upgrade to WebSocket, say) and serves it before returning
// holds the slot for the connection's life, as a gRPC stream does: size the
// limits of the groups that serve such connections for connections, not
// requests. After a hijack net/http no longer watches the connection, so the
// request's context does not end when the client goes away: next must see
// that on the connection (a read error, a deadline), and watch the context
// for the executor's Close, which waits for next to return.
//
// The slot is next's call, not the work it starts: a next that serves the
// request on another goroutine and returns first frees the slot while that
// goroutine runs on. http.TimeoutHandler as next does so when its timeout
// passes, leaving its handler running, outside every limit, until that
// handler sees its context end: a tenant whose requests time out runs more
// than its limits. Put http.TimeoutHandler before Handler instead: its
// timeout then bounds the wait for admission too, and next holds the slot
// until it returns.
//
// Handler panics if ex or next is nil, next a nil pointer or function (an
// http.HandlerFunc(nil), which would fail every request it admits, each a
// failure of its group), or an option is invalid.
func Handler(ex *executor.Executor, next http.Handler, opts ...Option) http.Handler {
	if ex == nil || next == nil {
		panic("httpadmit: Handler: nil executor or handler")
	}
	if typednil.Is(next) {
		panic(fmt.Sprintf("httpadmit: Handler: the handler is a nil %T", next))
	}
	c := build(opts)
	h := &handler{ex: ex, next: next, tenant: c.tenant, group: c.defaultGroup, weight: c.weight,
		refuse: c.refuse, failure: c.failure, retryDelay: c.retryAfter, retryAfter: retryAfter(c.retryAfter)}
	if h.tenant == nil {
		h.tenant = fromHeader(DefaultHeader)
	}
	if h.refuse == nil {
		h.refuse = h.writeRefusal
	}
	return h
}

type handler struct {
	ex         *executor.Executor
	next       http.Handler
	tenant     tenantFunc
	group      string
	weight     func(*http.Request) (int, error) // nil: 1
	refuse     func(http.ResponseWriter, *http.Request, error)
	failure    func(int) bool
	retryDelay time.Duration // WithRetryAfter's
	retryAfter string        // retryDelay formatted, for every refusal that waits no longer
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	group, err := h.tenant(r)
	if err != nil {
		h.refused(w, r, err)
		return
	}
	if group == "" {
		group = h.group
	}
	weight := 1
	if h.weight != nil {
		if weight, err = adapt.Weight(h.weight(r)); err != nil {
			h.refused(w, r, err)
			return
		}
	}
	c := calls.Get().(*call)
	c.h, c.w, c.r = h, w, r
	err = h.ex.DoWeighted(r.Context(), group, weight, c.fn)
	ran, returned, judged, aborted := c.ran, c.returned, c.judged, c.aborted
	*c = call{fn: c.fn} // drop the request before the next one reuses c
	calls.Put(c)
	switch {
	case !ran:
		h.refused(w, r, err)
	case aborted:
		panic(http.ErrAbortHandler) // recovered by serve, for the server to abort the response
	case !returned, !judged:
		notReturned(err)
	}
}

// refused answers a request that next never served, with the refusal
// writer, once each Handler chained before this one, whose status
// recording writer w wraps, knows it (MarkRefused).
func (h *handler) refused(w http.ResponseWriter, r *http.Request, err error) {
	MarkRefused(w)
	h.refuse(w, r, err)
}

// MarkRefused tells every Handler with WithFailureStatus whose next is
// answering with w that the request was refused, not served: each counts
// it as Cancelled, whatever status is written, neither a failure nor a
// success of its group. Judged
// by WithFailureStatus, the 503 a handler answers because a dependency
// refused it (an error matching executor.ErrRejected from a Transport, which
// http.Client wraps in a *url.Error, or from the executor's Do; an open
// breaker's breaker.ErrOpenState) would count as a failure of the request,
// though it did no work, and the inbound group's breaker would trip on a
// refusal downstream. A Handler refusing a request marks the Handlers
// chained before it (one group per tenant, then one per route) the same
// way.
//
// It finds the Handlers' writers in w and in the writers w wraps, through
// an Unwrap() http.ResponseWriter method (as http.ResponseController
// does): a middleware wrapping the writer between Handler and the call
// must have one. Call it before next returns. It does nothing on a writer
// no Handler made, and a Handler without WithFailureStatus makes none: it
// passes next the server's writer as it is, so that a next type-asserting
// http.Hijacker or http.CloseNotifier finds them, at no cost per request.
// Such a Handler counts the request as it counts every one next returns
// from, a Success, in Stats, the listener and the group's circuit breaker,
// where a half-open breaker's probe that a dependency refused closes the
// breaker; it counts an inner Handler's refusal (above) as a Success too.
// To have refusals counted as Cancelled with no status counted as a
// failure, pass WithFailureStatus a function that returns false:
//
//	httpadmit.WithFailureStatus(func(int) bool { return false })
func MarkRefused(w http.ResponseWriter) {
	for {
		if sw, ok := w.(*statusWriter); ok {
			sw.refused = true
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return
		}
		w = u.Unwrap()
	}
}

// notReturned goes on with the panic of a next that Do ran but that did not
// return, when Do recovered it (a rejection handler's RunInCaller recovers
// it into a *executor.PanicError): as without Handler, the panic goes on to
// the server with its own value, and no refusal is written after what next
// wrote.
//
// A next that called runtime.Goexit here never gets Do to return; one that
// Do returns executor.ErrGoexit for ran on another goroutine (a rejection
// handler called RunInCaller there), which the exit has ended. It ends
// that goroutine only: the response is aborted, as net/http aborts one
// whose handler exits, with http.ErrAbortHandler, which the server does
// not log. The executor's error would be logged as a panic of next, which
// never panicked.
func notReturned(err error) {
	var pe *executor.PanicError
	if errors.As(err, &pe) {
		panic(pe.Value)
	}
	if errors.Is(err, executor.ErrGoexit) {
		panic(http.ErrAbortHandler)
	}
	if err == nil {
		err = errors.New("httpadmit: the handler did not return")
	}
	panic(err)
}

// A call is one request's fn for Do. Calls are pooled with fn bound once, so
// that admitting a request allocates no closure: Do has returned, and fn will
// not run again, by the time a call is put back. A call whose next panicked is
// not put back.
type call struct {
	h        *handler
	w        http.ResponseWriter
	r        *http.Request
	ran      bool                        // next was called
	returned bool                        // next returned: it did not panic
	judged   bool                        // serve returned: WithFailureStatus's function did not panic either
	aborted  bool                        // next panicked with http.ErrAbortHandler (serve recovered it)
	fn       func(context.Context) error // serve, bound to this call
}

var calls = sync.Pool{New: func() any {
	c := new(call)
	c.fn = c.serve
	return c
}}

// serve runs next: it is Do's fn, so nothing it returns other than nil, a
// *StatusError, a *cancelledStatusError, errNotServed or errAborted comes
// from it.
func (c *call) serve(ctx context.Context) (err error) {
	h, w, r := c.h, c.w, c.r
	if ctx != r.Context() {
		r = r.WithContext(ctx)
	}
	c.ran = true
	defer c.recoverAbort(&err)
	if h.failure == nil {
		h.next.ServeHTTP(w, r)
		c.returned, c.judged = true, true
		return nil
	}
	sw := &statusWriter{ResponseWriter: w, ctx: ctx, failure: h.failure}
	h.next.ServeHTTP(sw, r)
	c.returned = true
	err = outcomeOf(sw) // WithFailureStatus's function may panic
	c.judged = true
	return err
}

// outcomeOf is serve's error for the response that next wrote through sw,
// once next has returned.
func outcomeOf(sw *statusWriter) (err error) {
	if sw.refused {
		return errNotServed
	}
	code, late := sw.code()
	if sw.status == 0 && late {
		// next wrote nothing and returned once its request was cancelled
		// (its client reset the stream, or the executor stopped it): it
		// gave the request up, and net/http's 200 goes to no one. As a
		// Success, a client resetting its requests would close a
		// half-open breaker whose probe did no work.
		return errGivenUp
	}
	if sw.judged {
		if sw.fails {
			err = &StatusError{Code: code}
		}
	} else {
		err = failed(sw.failure, code)
	}
	if err != nil && late {
		// next answered for work given up on (a ReverseProxy's 502 for the
		// upstream call cancelled when its client went away, or the
		// executor's stop): that says nothing of the group's dependency.
		err = &cancelledStatusError{err.(*StatusError)}
	}
	return err
}

// errNotServed is serve's error for a request that next marked refused
// (MarkRefused), itself or through a Handler chained after this one that
// refused it: Cancelled, neither a failure nor a success of the group.
var errNotServed = fmt.Errorf("httpadmit: the request was refused after this Handler admitted it (MarkRefused), never served: %w", context.Canceled)

// errGivenUp is serve's error for a next that wrote nothing and returned
// once its request's context was cancelled: Cancelled.
var errGivenUp = fmt.Errorf("httpadmit: the handler wrote nothing and returned after the request was cancelled: %w", context.Canceled)

// errAborted is serve's error for a next that panicked with
// http.ErrAbortHandler. It matches context.Canceled, so that Do counts the
// request Cancelled: the handler gave the response up on purpose (its
// client went away, say), which is no failure of the group's dependency.
var errAborted = fmt.Errorf("httpadmit: %w: %w", http.ErrAbortHandler, context.Canceled)

// recoverAbort, deferred by serve, stops a panic of next with
// http.ErrAbortHandler, which ServeHTTP raises again once Do has returned,
// and makes serve return errAborted. Any other panic goes on with its value;
// a runtime.Goexit goes on too (recover returns nil).
func (c *call) recoverAbort(err *error) {
	if c.returned {
		return
	}
	switch v := recover(); v {
	case nil:
	case http.ErrAbortHandler:
		c.aborted = true
		*err = errAborted
	default:
		panic(v)
	}
}

// failed returns a *StatusError when f says code is a failure.
func failed(f func(int) bool, code int) error {
	if f(code) {
		return &StatusError{Code: code}
	}
	return nil
}

// statusWriter records the status of the response next writes, and
// whether its context was already cancelled when it was written: a status
// written before the cancellation answered while the client was there, and
// its client may have gone away because of it.
type statusWriter struct {
	http.ResponseWriter
	ctx     context.Context // next's
	failure func(int) bool  // WithFailureStatus's
	status  int
	late    bool // the context was cancelled when status was written
	judged  bool // failure has judged status, written with WriteHeader: fails is its verdict
	fails   bool
	refused bool // next marked the request refused (MarkRefused), or a Handler chained after this one refused it
}

// set records code as the response's status, if none is yet.
func (s *statusWriter) set(code int) {
	if s.status == 0 {
		s.status = code
		s.late = cancelled(s.ctx)
	}
}

func cancelled(ctx context.Context) bool { return errors.Is(ctx.Err(), context.Canceled) }

func (s *statusWriter) WriteHeader(code int) {
	// 1xx are informational, the final status comes later; but 101 is
	// final: net/http sends it and hands the connection over.
	if code < 200 && code != http.StatusSwitchingProtocols {
		s.ResponseWriter.WriteHeader(code)
		return
	}
	first := s.status == 0
	s.set(code)
	s.ResponseWriter.WriteHeader(code)
	if first {
		s.judge()
	}
}

// judge judges the status WriteHeader recorded, once the server's writer
// has it. A failing status written after next hijacked the connection
// never reaches the client: net/http drops it (the client saw what next
// wrote on the connection), and it is forgotten, so that an upgraded
// session's error path (http.Error after the hijack) cannot open the
// group's breaker. Only a failing status is checked, as the check is a
// call to the server's writer.
func (s *statusWriter) judge() {
	s.judged, s.fails = true, s.failure(s.status)
	if s.fails && hijacked(s.ResponseWriter) {
		s.status, s.late, s.judged, s.fails = 0, false, false, false
	}
}

// hijacked reports whether w's connection was hijacked, once its header
// is written: net/http's writer then answers an empty Write with
// http.ErrHijacked, and otherwise writes nothing, and logs nothing.
func hijacked(w http.ResponseWriter) bool {
	_, err := w.Write(nil)
	return errors.Is(err, http.ErrHijacked)
}

func (s *statusWriter) Write(p []byte) (int, error) {
	s.set(http.StatusOK)
	return s.ResponseWriter.Write(p)
}

// WriteString writes str through the server's writer's WriteString when it
// has one (net/http's does), as io.WriteString asks: through Write, str
// would be copied to a new slice on every call. The status is 200 unless
// next wrote one, as for Write.
func (s *statusWriter) WriteString(str string) (int, error) {
	s.set(http.StatusOK)
	if sw, ok := s.ResponseWriter.(io.StringWriter); ok {
		return sw.WriteString(str)
	}
	return s.ResponseWriter.Write([]byte(str))
}

// Flush sends what is buffered, as the server's writer does.
func (s *statusWriter) Flush() { _ = s.FlushError() }

// FlushError is Flush returning the server's writer's error, which
// http.ResponseController's Flush returns: a streaming next learns from it
// that its client is gone, or that the writer cannot flush
// (http.ErrNotSupported), as it would without Handler.
func (s *statusWriter) FlushError() error {
	err := http.NewResponseController(s.ResponseWriter).Flush()
	if !errors.Is(err, http.ErrNotSupported) {
		s.set(http.StatusOK) // the header went out, with 200 unless next wrote one
	}
	return err
}

// Push starts an HTTP/2 server push through the server's writer, as
// http.TimeoutHandler's writer does: http.ResponseController has no Push,
// so without it a next that asks its writer for http.Pusher would never
// push. Over HTTP/1 it returns http.ErrNotSupported, as net/http's own
// writer does.
func (s *statusWriter) Push(target string, opts *http.PushOptions) error {
	if p, ok := s.ResponseWriter.(http.Pusher); ok {
		return p.Push(target, opts)
	}
	return http.ErrNotSupported
}

// ReadFrom copies r to the response through the server's writer, whose
// ReadFrom sends a file with sendfile(2) over HTTP/1: io.Copy to next's
// writer (http.ServeContent, http.FileServer) would otherwise copy through
// a buffer. The status is 200 unless next wrote one, as for Write, once a
// byte is sent: a copy that sends none writes no header (net/http's
// ReadFrom does not), and the status next may write after it is the one
// its client gets.
func (s *statusWriter) ReadFrom(r io.Reader) (int64, error) {
	late := cancelled(s.ctx) // as set would read it before a Write
	n, err := io.Copy(s.ResponseWriter, r)
	if n > 0 && s.status == 0 {
		s.status, s.late = http.StatusOK, late
	}
	return n, err
}

// Unwrap lets http.ResponseController reach the server's writer.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// code is the response's status, and whether it was written after the
// context was cancelled: 200 when next wrote nothing, as net/http then
// sends once next returns.
func (s *statusWriter) code() (int, bool) {
	if s.status == 0 {
		return http.StatusOK, cancelled(s.ctx)
	}
	return s.status, s.late
}
