package httpadmit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/internal/adapt"
	"github.com/groupexec/groupexec/internal/typednil"
)

// Transport returns a RoundTripper that admits each request with
// ex.DoWeighted in its destination's group before base sends it: by default
// one group per destination host and port (lower-cased, without a name's
// trailing dots, an IPv6 address in its canonical form and an IPv4-mapped
// one as its IPv4 address, an internationalized name in its ASCII form as
// net/http dials it, the port implied by the scheme when the URL has
// none), so each dependency has its own bulkhead, however its URLs spell
// it, and a slow one cannot take all of the outgoing capacity. A tenant option
// makes the group the outgoing request's tenant instead. Each request weighs
// 1 unless WithWeightFunc says otherwise. base nil means
// http.DefaultTransport.
//
// A request the executor refuses is not sent: RoundTrip's error matches the
// executor's, executor.ErrRejected (http.Client wraps it in a *url.Error,
// which errors.Is sees through), or the request context's error if it ended
// while the request waited or by the time it was admitted; a request whose
// Cancel channel (which http.Client closes when its Timeout passes, for a
// RoundTripper it does not know) was closed by then is given up as well,
// unsent, its error matching context.Canceled. A request with
// an invalid tenant or weight is not sent either; its error matches
// ErrInvalidTenant or ErrInvalidWeight (or is the function's own, when it
// matches ErrUnavailable). Nor is one whose method is not a token (RFC 9110
// section 9.1), which net/http's transport would refuse, or is HEAD in
// another case ("head"): methods are case-sensitive, and net/http's
// transport reads the body announced in the answer to "head", which a
// server that upper-cases the method leaves out, answering a HEAD, so the
// caller would wait for it until its context ended. Such a request takes
// no slot, and counts as nothing of its destination's. Other methods in
// another case ("get") are sent as given, as net/http sends them. A panic
// in the tenant or weight function goes on to RoundTrip's caller, the
// request's body closed and no slot taken; one in WithFailureStatus's
// function, or a runtime.Goexit there, as it judges base's response, goes
// on to the caller too, the response's body closed (the caller never gets
// it) and the slot freed first.
//
// An admitted request holds its slot until its response is done with:
//   - a response with a body holds it until Body.Close, whether the body was
//     read or not, or until the request's context ends or its Cancel
//     channel is closed (the body can no longer be read then). Close returns once the slot is free. As with
//     net/http, a body never closed is never done with: its slot is lost for
//     as long as its context lasts. A read of the body that fails before
//     Close while the request's context is alive (the destination closed
//     its connection before the body's length, or reset its HTTP/2
//     stream) counts as a failure of the destination, a *BodyError,
//     whatever the status said; a read that fails once the context has
//     ended (the caller's deadline, its cancellation), or once the caller
//     closed the request's Cancel channel (as http.Client does when its
//     Timeout passes), counts nothing;
//   - a response with no body (http.NoBody, or nil from a faulty base)
//     releases it before RoundTrip returns;
//   - 101 Switching Protocols: the body is the upgraded connection, still an
//     io.ReadWriteCloser, and the slot is held until it is closed, for the
//     connection's life, like a stream's: the end of the request's context
//     does not free it, since the connection outlives it in net/http. A
//     switch to another protocol than the request asked for is refused
//     (its Connection or the response's has no "upgrade" option, or the
//     response's Upgrade is not the request's, in any case): the
//     connection is closed, the slot freed before RoundTrip returns, and
//     RoundTrip returns an error, counted as a failure of the destination
//     (RFC 9110 section 7.8 has a server switch only to a protocol asked
//     for). So is a switch to one protocol of several the request lists,
//     as httputil.ReverseProxy refuses it: it takes a switch only to the
//     request's Upgrade as a whole, and never closes the body of one it
//     refuses. That one counts as Cancelled, not as the destination's
//     failure: RFC 9110 lets it choose from the list, which the caller
//     (for a proxy, its client) wrote;
//   - an error from base releases it before RoundTrip returns, and counts as
//     a failure for the group's breaker unless it is a cancellation; so
//     does a nil response with a nil error from a faulty base, which
//     RoundTrip returns as an error. A base that is itself a Transport and
//     did not admit the request (it refused it, or the request's deadline
//     passed while it waited there) never sent it: that counts as
//     Cancelled, not as a failure of the destination; so does an error of
//     base matching executor.ErrRejected, breaker.ErrOpenState or
//     breaker.ErrTooManyRequests (another limiter of the caller's below
//     this Transport refused it).
//
// The response's Request is the request RoundTrip was given, as net/http's
// Transport sets it, not the copy carrying the admission's context that
// base was sent.
//
// 1xx responses other than 101 never reach a RoundTripper's caller (net/http
// handles them inside its transport). Holding the slot while the caller reads
// takes one goroutine per admitted request, which waits in Do until the body
// is closed; a panic in base is recovered there and raised again in
// RoundTrip's caller, and a runtime.Goexit in base ends the caller's
// goroutine as well, the slot freed and the request's body closed first:
// base, which did not return, did not keep the contract of closing it. A
// body that base closed before it panicked is closed a second time, unless
// base is a Transport, which closes it before it panics: io.Closer leaves
// a second Close undefined, but net/http's bodies, io.NopCloser's and an
// *os.File's (os.ErrClosed, dropped) take it. Telling whether base closed
// it would take wrapping every request's body, which would hide its type
// from base and from net/http, which sends an *os.File with sendfile, and
// the headers of a request whose body is in memory (a *bytes.Reader, a
// *strings.Reader) in one packet with the body, flushing them on their
// own for any other type: every POST would cost a packet more. A
// body whose second Close does harm (one that returns its buffer to a
// pool) makes its Close idempotent where base may panic. When a rejection
// handler ran base on a goroutine of its own (Rejection.RunInCaller), a
// runtime.Goexit there ends that goroutine only: the body is closed, and
// RoundTrip returns an error matching executor.ErrGoexit; a rejection
// handler that starts RunInCaller on another goroutine and exits the
// Transport's without waiting for it ends the caller's goroutine, as it
// would end a Do caller's, and a response that the other goroutine gets
// then has its body closed there, handed over to no one. A panic in the
// request context's own code (its Done, Err or Value) that the Transport's
// goroutine calls, as it watches the context or as the executor asks it,
// or that the goroutine a rejection handler ran the request on calls,
// goes on to RoundTrip's caller as well, the request not sent, its body
// closed and the slot freed first. A
// panic counts as a failure, except one with http.ErrAbortHandler (an
// in-process base whose handler gave the response up), which counts as
// Cancelled, as in Handler.
//
// Transport panics if ex is nil, base a nil pointer or function (a nil
// *http.Transport, which would fail every request it admits, each a
// failure of its group; a nil base means http.DefaultTransport), or an
// option is invalid.
func Transport(ex *executor.Executor, base http.RoundTripper, opts ...Option) http.RoundTripper {
	if ex == nil {
		panic("httpadmit: Transport: nil executor")
	}
	if typednil.Is(base) {
		panic(fmt.Sprintf("httpadmit: Transport: the base is a nil %T (nil means http.DefaultTransport)", base))
	}
	if base == nil {
		base = http.DefaultTransport
	}
	c := build(opts)
	t := &transport{ex: ex, base: base, tenant: c.tenant, group: c.defaultGroup, weight: c.weight, failure: c.failure}
	if t.tenant == nil {
		t.tenant = destination
	}
	return t
}

type transport struct {
	ex      *executor.Executor
	base    http.RoundTripper
	tenant  tenantFunc
	group   string
	weight  func(*http.Request) (int, error) // nil: 1
	failure func(int) bool
}

// destination returns the request's host and port, as its default group.
// It is not held to ValidTenant's rule, made for keys that clients choose:
// the program chooses where it sends, a DNS name may have up to 253 bytes
// and an internationalized one that idna refuses is left not ASCII, and
// url.Parse has already refused the spaces and control characters a host
// cannot have.
func destination(r *http.Request) (string, error) {
	if r.URL == nil || r.URL.Host == "" {
		return "", nil
	}
	return hostPort(r.URL), nil
}

// hostPort is u's host, in its canonical form (canonicalHost), with its
// port or the scheme's: each spelling of one destination ("api.example."
// and "API.example", "[::ffff:192.0.2.1]" and "192.0.2.1", "bücher.example"
// and "xn--bcher-kva.example") reaches the same host, and must share its
// bulkhead, not bring one each.
func hostPort(u *url.URL) string {
	host, port := canonicalHost(u.Hostname()), u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	return net.JoinHostPort(host, port)
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	group, weight, err := t.admissionOf(req)
	if err != nil {
		return nil, &notSentError{err}
	}
	x := &exchange{t: t, req: req, ready: make(chan struct{}), closed: make(chan struct{}), done: make(chan struct{})}
	go x.run(group, weight)
	<-x.ready
	if x.goexited {
		// Asked first: then the request may still be sent on another
		// goroutine (RunInCaller), which writes the other fields.
		runtime.Goexit() // as base did: the slot is free
	}
	if x.raised {
		panic(x.raisedValue) // as the request's context did: the slot is free
	}
	if x.panicked {
		panic(x.panicValue)
	}
	return x.resp, x.err
}

// admissionOf returns the request's group and weight, or the error of an
// invalid tenant or weight. The body of a request it does not pass on is
// closed, as the RoundTripper contract asks of every outcome: an invalid
// one's, and one whose tenant or weight function panicked, whose panic
// goes on to RoundTrip's caller, as a panic of base does, before any slot
// is taken.
func (t *transport) admissionOf(req *http.Request) (group string, weight int, err error) {
	passed := false
	defer func() {
		if !passed {
			closeBody(req)
		}
	}()
	if req.Method != "" && !httpguts.ValidHeaderFieldName(req.Method) {
		// Not a token (RFC 9110 9.1), as net/http's transport would refuse
		// it: an HTTP/2 server hands such a method ("G T") to its handler,
		// and a proxy passes it on. Sent to base, its refusal counted as
		// the destination's failure, which any client of the proxy could
		// so trip.
		return "", 0, fmt.Errorf("httpadmit: invalid method %.128q", req.Method)
	}
	if req.Method != http.MethodHead && strings.EqualFold(req.Method, http.MethodHead) {
		// Methods are case-sensitive (RFC 9110 9.1): net/http's transport
		// reads the body that the answer to "head" announces, while a
		// server that upper-cases the method (gunicorn with
		// casefold_http_method) answers it as a HEAD, without one. The
		// caller waited for it, holding the slot, until its context
		// ended. Refused as the gateway refuses it.
		return "", 0, fmt.Errorf("httpadmit: method %q is HEAD in another case than HEAD, not sent", req.Method)
	}
	if group, err = t.tenant(req); err != nil {
		return "", 0, err
	}
	if group == "" {
		group = t.group
	}
	weight = 1
	if t.weight != nil {
		if weight, err = adapt.Weight(t.weight(req)); err != nil {
			return "", 0, err
		}
	}
	passed = true
	return group, weight, nil
}

// closeBody closes the body of a request that base never saw, as the
// RoundTripper contract asks.
func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// An exchange is one request. Its goroutine runs DoWeighted, whose fn sends the
// request and, for a response with a body, hands the response over (closes
// ready) and waits until the body is closed. Every other outcome is handed
// over by run once Do has returned, so the slot is free by then.
//
// fn may run on another goroutine (a rejection handler's RunInCaller) while
// code on run's own goroutine exits it: both may then hand an outcome over.
// The first to swap told does, and the first to swap taken decides whether
// the request is sent; the other leaves them be.
type exchange struct {
	t   *transport
	req *http.Request

	// Written by fn or by run before ready is closed; read by RoundTrip after.
	resp        *http.Response
	err         error
	panicked    bool
	panicValue  any
	goexited    bool // run's goroutine was exited before an outcome was handed over
	raised      bool // run's goroutine panicked outside base before an outcome was handed over
	raisedValue any
	sent        bool // send returned: it recovers base's panics, not a runtime.Goexit
	called      bool // send called base
	returned    bool // base returned: it closed the request's body, as its contract asks

	readErr atomic.Pointer[error] // the first error of a body read the destination caused (body.Read)

	told  atomic.Bool // ready is closed, by the one that swapped it
	taken atomic.Bool // fn sends the request, or run's exit dropped it, whichever swapped it

	// adm is the admission's context (admission), which detach stops the
	// request's context from ending; nil when that context can never end.
	adm *admissionCtx

	ready  chan struct{} // the outcome is set
	closed chan struct{} // the body was closed
	done   chan struct{} // Do has returned: the slot is free
	once   atomic.Bool   // closed is closed
}

func (x *exchange) run(group string, weight int) {
	defer close(x.done)
	ran, returned := false, false
	defer func() {
		if returned {
			return
		}
		// Code on this goroutine called runtime.Goexit (base, or a
		// rejection handler or listener that the executor calls here), or
		// the request's context panicked (as it was watched, or as the
		// executor asked it; base's panics send recovers). No one could
		// recover that panic on this goroutine, the Transport's: it goes
		// on to RoundTrip's caller instead, who would have exited, or
		// panicked, had it called Do itself. Do has freed the slot. An
		// outcome handed over already stays (RoundTrip has returned, and
		// an exit or panic later is none of its caller's).
		v := recover()
		if x.taken.CompareAndSwap(false, true) {
			// Before fn took the request: base never saw it, and never
			// will, though a RunInCaller on another goroutine runs fn.
			x.detach()
			closeBody(x.req)
		}
		if x.told.CompareAndSwap(false, true) {
			if v != nil {
				x.raised, x.raisedValue = true, v
			} else {
				x.goexited = true
			}
			close(x.ready)
		}
	}()
	ctx := x.admission()
	err := x.t.ex.DoWeighted(ctx, group, weight, func(ctx context.Context) error {
		ran = true
		if !x.taken.CompareAndSwap(false, true) {
			// Run by a RunInCaller on another goroutine after a rejection
			// handler exited this one: RoundTrip's caller has exited too,
			// and the request, its body closed, is not sent.
			return errNotSent
		}
		return x.sendTaken(ctx)
	})
	returned = true
	switch {
	case !ran:
		x.detach()
		closeBody(x.req)
		x.err = &notSentError{err}
	case !x.sent && x.called:
		// base called runtime.Goexit on the goroutine a rejection handler
		// ran it on (Rejection.RunInCaller), not this one: the exit ended
		// that goroutine only, and RoundTrip's caller gets an error, not
		// a nil response with a nil error.
		x.err = fmt.Errorf("httpadmit: the base RoundTripper exited the goroutine a rejection handler ran it on: %w", err)
	case !x.sent:
		// The request's context panicked before base saw it, on the
		// goroutine a rejection handler ran fn on, which recovered the
		// panic into a *executor.PanicError: it goes on to RoundTrip's
		// caller, as it does from this goroutine.
		var pe *executor.PanicError
		if errors.As(err, &pe) {
			x.raised, x.raisedValue = true, pe.Value
		} else {
			x.err = &notSentError{err}
		}
	}
	if x.told.CompareAndSwap(false, true) {
		close(x.ready)
	}
}

// sendTaken is send, on whichever goroutine fn runs, for a request that fn
// took: once it is done with, the request's context is no longer watched,
// and the body of a request whose base did not return is closed.
func (x *exchange) sendTaken(ctx context.Context) error {
	if x.adm != nil {
		x.adm.admitted.Store(true) // the Cancel channel is send's to watch now
	}
	defer func() {
		x.detach() // the request is done with: nothing to watch
		switch {
		case x.sent:
		case !x.called:
			closeBody(x.req) // the request's context panicked before base saw it
		default:
			x.closeUnreturned()
		}
	}()
	err := x.send(ctx)
	x.sent = true
	return err
}

// detach stops the request's context from ending the admission's.
func (x *exchange) detach() {
	if x.adm != nil {
		x.adm.detach()
	}
}

// closeUnreturned closes the body of a request whose base did not return
// (it panicked, or called runtime.Goexit), and so did not keep the contract
// of closing it, which RoundTrip must keep whatever happens. A base that is
// itself a Transport keeps it before its RoundTrip panics or exits: the
// body is closed once. So did a base that returned, before a panic or exit
// of the code judging its response (judge): the body is not closed again.
func (x *exchange) closeUnreturned() {
	if _, stacked := x.t.base.(*transport); !stacked && !x.returned {
		closeBody(x.req)
	}
}

// judge returns the outcome WithFailureStatus's function gives resp. If
// the function panics or calls runtime.Goexit, which goes on to
// RoundTrip's caller as base's would, the caller never gets resp: its body
// is closed first, or the connection it holds (net/http keeps one until
// the body is closed) would never be freed.
func (x *exchange) judge(resp *http.Response) error {
	judged := false
	defer func() {
		if !judged && resp.Body != nil {
			_ = resp.Body.Close()
		}
	}()
	outcome := failed(x.t.failure, resp.StatusCode)
	judged = true
	return outcome
}

// admission returns the context the request is admitted with: one that
// ends with the request's, or as its Cancel channel is closed, until
// detach is called. Once a 101 response is
// in, its connection no longer depends on the request's context (net/http
// stops watching it), and neither does the slot that the connection holds.
//
// A request with a Cancel channel is given up when the channel is closed,
// as net/http gives it up: the admission ends too, so that the request
// leaves its queue rather than wait there for a caller that is gone.
// Watching a channel takes a goroutine, which detach ends, started only
// once a wait in the queue asks for Done (admissionCtx.Done): http.Client
// gives a channel to every request with a Timeout sent through a
// RoundTripper it does not know (with a context of the same deadline),
// and a request admitted at once, the common case, costs none. Once
// admitted, the request is sent with the channel, which net/http watches,
// and send watches it for the body's hold.
func (x *exchange) admission() context.Context {
	parent := x.req.Context()
	//lint:ignore SA1019 http.Client still cancels through it, and net/http honours it
	cancelCh := x.req.Cancel
	if parent.Done() == nil && cancelCh == nil {
		return parent // it never ends: nothing to detach from
	}
	inner, cancel := context.WithCancelCause(context.WithoutCancel(parent))
	adm := &admissionCtx{Context: inner, parent: parent, cancel: cancel, cancelCh: cancelCh, stop: func() bool { return false }}
	if parent.Done() != nil {
		adm.stop = context.AfterFunc(parent, func() { cancel(context.Cause(parent)) })
	}
	x.adm = adm // once stop is set: a parent that panicked above leaves nothing to detach
	return adm
}

// admissionCtx is the request's context until detached: its values and its
// deadline, and its error once it has ended it.
type admissionCtx struct {
	context.Context // ended by the request's context, or its Cancel channel, until detached
	parent          context.Context
	cancel          context.CancelCauseFunc // ends Context
	stop            func() bool             // stops the request's context from calling cancel
	cancelCh        <-chan struct{}         // the request's Cancel channel; nil if it has none
	admitted        atomic.Bool             // send has the request: no queue wait to end any more
	detached        atomic.Bool

	mu      sync.Mutex    // orders watch with detach
	unwatch chan struct{} // closed by detach: watchCancel returns; nil while not watched
}

// Done is the admission's channel. Asked for before the request is
// admitted (by the executor, as the request waits in its queue), it has
// the Cancel channel watched, so that the wait ends as the channel is
// closed.
func (c *admissionCtx) Done() <-chan struct{} {
	if c.cancelCh != nil && !c.admitted.Load() {
		c.watch()
	}
	return c.Context.Done()
}

// watch starts watchCancel, once, unless the request is admitted or the
// admission detached.
func (c *admissionCtx) watch() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.unwatch != nil || c.admitted.Load() || c.detached.Load() {
		return
	}
	c.unwatch = make(chan struct{})
	go c.watchCancel(c.unwatch)
}

// detach stops the request's context, and its Cancel channel, from ending
// this one.
func (c *admissionCtx) detach() {
	if !c.detached.CompareAndSwap(false, true) {
		return
	}
	c.stop()
	if c.cancelCh == nil {
		return
	}
	c.mu.Lock()
	if c.unwatch != nil {
		close(c.unwatch)
	}
	c.mu.Unlock()
}

// watchCancel ends this context when the request's Cancel channel is
// closed, until unwatch is (detach).
func (c *admissionCtx) watchCancel(unwatch <-chan struct{}) {
	select {
	case <-c.cancelCh:
		c.cancel(errCancelChannel)
	case <-unwatch:
	}
}

func (c *admissionCtx) Deadline() (time.Time, bool) { return c.parent.Deadline() }

// Err is the request context's error, as the context that ended this one.
// Until detached, it asks the request's context first: its end reaches
// this one only through a function run once it has ended
// (context.AfterFunc), a moment later, and meanwhile the executor, which
// asks Err before it starts the request, would count as started a request
// that send then refuses unsent. Err ends this context itself first, so
// that Err and Done agree.
func (c *admissionCtx) Err() error {
	if c.Context.Err() == nil {
		switch {
		case c.detached.Load():
			return nil
		case c.parent.Err() != nil:
			c.cancel(context.Cause(c.parent))
		case isClosed(c.cancelCh):
			c.cancel(errCancelChannel)
		default:
			return nil
		}
	}
	if err := c.parent.Err(); err != nil {
		return err
	}
	return context.Canceled
}

// notSentError is RoundTrip's error for a request the executor did not
// admit: the executor's error, or the request context's, with its text,
// and errors.Is and errors.As see through it. It tells a Transport stacked
// above this one (one group per destination above one per tenant) that the
// request was never sent.
type notSentError struct{ err error }

func (e *notSentError) Error() string { return e.err.Error() }
func (e *notSentError) Unwrap() error { return e.err }

// Timeout and Temporary are the wrapped error's: url.Error's methods, and a
// caller's net.Error, ask the error itself, not what it wraps, so that a
// deadline passed while the request waited still reads as a timeout.
func (e *notSentError) Timeout() bool {
	t, ok := e.err.(interface{ Timeout() bool })
	return ok && t.Timeout()
}

func (e *notSentError) Temporary() bool {
	t, ok := e.err.(interface{ Temporary() bool })
	return ok && t.Temporary()
}

// errNotSent is fn's outcome when base is a Transport that did not admit
// the request: Cancelled, neither a failure nor a success of the
// destination, which never saw it.
var errNotSent = fmt.Errorf("httpadmit: the request was refused in this process, never sent: %w", context.Canceled)

// errPanicked is fn's outcome when base panicked: a failure for the breaker,
// while the panic itself goes to RoundTrip's caller.
var errPanicked = errors.New("httpadmit: the base RoundTripper panicked")

// errJudgePanicked is fn's outcome, counted as errPanicked is, when
// WithFailureStatus's function panicked as it judged base's response.
var errJudgePanicked = errors.New("httpadmit: the WithFailureStatus function panicked")

// errNilResponse is RoundTrip's error when base returned neither a
// response nor an error.
var errNilResponse = errors.New("httpadmit: the base RoundTripper returned a nil *Response with a nil error")

// send is Do's fn: it sends the request and, for a response with a body,
// holds the slot until the body is closed or the context ends.
func (x *exchange) send(ctx context.Context) (err error) {
	if err := x.givenUp(); err != nil {
		// Admitted as the request's context ended (its deadline passed as
		// it left the queue, or while a listener ran), or its Cancel
		// channel was closed: base would fail it at once, unsent, with an
		// error the group's breaker counts against the destination. It is
		// refused here instead, as if it had ended while it waited.
		closeBody(x.req)
		x.err = &notSentError{err}
		return errNotSent
	}
	req := x.req
	if ctx != req.Context() {
		req = req.WithContext(ctx)
	}
	defer func() {
		// Nothing panics after the hand-over, so RoundTrip is still waiting.
		if v := recover(); v != nil {
			x.closeUnreturned()
			x.panicked, x.panicValue = true, v
			err = errPanicked
			if x.returned {
				err = errJudgePanicked
			}
			if v == http.ErrAbortHandler {
				err = errAborted // a deliberate abort, as in Handler: Cancelled
			}
		}
	}()
	x.called = true
	resp, err := x.t.base.RoundTrip(req)
	x.returned = true
	if err == nil && resp == nil {
		// A faulty base: answered as net/http's Client answers it, rather
		// than with a nil dereference below, raised in RoundTrip's caller.
		err = errNilResponse
	}
	if err != nil {
		x.err = err
		var ns *notSentError
		if errors.As(err, &ns) || adapt.Refused(err) {
			// A Transport stacked below this one refused it, or another
			// limiter of the caller's (its executor, a breaker): the
			// request never reached its destination, which must not be
			// blamed.
			return errNotSent
		}
		return err
	}
	if resp.Request == req && req != x.req {
		// As net/http's Transport sets it: the caller's request, not the
		// copy carrying the admission's context, which ends with the slot.
		resp.Request = x.req
	}
	if resp.StatusCode == http.StatusSwitchingProtocols && !switchAsked(req, resp) {
		// The connection handed over is the destination's failure, not the
		// caller's: closed here, it frees the slot before RoundTrip returns.
		if resp.Body != nil {
			_ = resp.Body.Close()
		}
		if switchListed(req, resp) {
			x.err = errListedSwitch
			return errListedSwitchOutcome
		}
		x.err = errUnaskedSwitch
		return errUnaskedSwitch
	}
	var outcome error
	if x.t.failure != nil {
		outcome = x.judge(resp)
	}
	x.resp = resp
	if resp.Body == nil || resp.Body == http.NoBody {
		return outcome
	}
	if !x.told.CompareAndSwap(false, true) {
		// Sent by a RunInCaller on another goroutine after a rejection
		// handler exited run's: RoundTrip's caller has exited too, and no
		// one else will close the body.
		_ = resp.Body.Close()
		return outcome
	}
	//lint:ignore SA1019 http.Client still cancels through it, and net/http honours it
	cancelCh := x.req.Cancel // ends the body's hold, as the request's context does
	if rw, ok := resp.Body.(io.ReadWriteCloser); ok && resp.StatusCode == http.StatusSwitchingProtocols {
		// The connection outlives the request's context, as in net/http:
		// from now on only its Close, or the executor's stop, frees the
		// slot.
		if x.adm != nil {
			x.adm.detach()
		}
		cancelCh = nil
		resp.Body = &upgradedBody{rw, x}
	} else {
		resp.Body = &body{ReadCloser: resp.Body, x: x, ctx: ctx}
	}
	close(x.ready)
	select {
	case <-x.closed:
	case <-ctx.Done():
	case <-cancelCh: // the caller gave the request up: net/http reads no more of the body
	}
	if p := x.readErr.Load(); outcome == nil && p != nil {
		return &BodyError{*p}
	}
	return outcome
}

// release marks the body closed and waits until the slot is free.
func (x *exchange) release() {
	if x.once.CompareAndSwap(false, true) {
		close(x.closed)
	}
	<-x.done
}

// body holds its exchange's slot until Close, and keeps the first error
// its reads met while the request was alive: the destination's, which
// cut the body short (it closed the connection, or reset the stream).
type body struct {
	io.ReadCloser
	x       *exchange
	ctx     context.Context // the admission's, ended by the request's or the executor's stop
	closing atomic.Bool     // Close was called: a read's error is Close's doing
}

// Read reads the body. An error other than io.EOF, while neither the
// request's context has ended, nor the caller cancelled the request
// (cancelled), nor Close was called (a Close on another goroutine fails a
// Read under way), is the destination's, and the request counts as its
// failure (BodyError).
func (b *body) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF && !b.closing.Load() && b.ctx.Err() == nil && !b.x.cancelled() {
		b.x.readErr.CompareAndSwap(nil, &err)
	}
	return n, err
}

// cancelled reports whether the caller cancelled the request through its
// Cancel channel. http.Client does so when its Timeout passes, for a
// RoundTripper it does not know (a Transport): it gives the request a
// context with the same deadline too, but that context ends on a timer
// of its own, which may fire a moment after the Client's, once net/http
// has failed the read for the closed channel. Asked only after a read
// failed: the channel is closed before net/http fails it.
func (x *exchange) cancelled() bool {
	//lint:ignore SA1019 http.Client still cancels through it, and net/http honours it
	return isClosed(x.req.Cancel)
}

// isClosed reports whether c is closed; false for a nil channel, never
// closed. Only ever closed, never sent on, as a request's Cancel channel.
func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// givenUp returns the error of a request its caller has given up on: its
// context's, once ended, or errCancelChannel once its Cancel channel is
// closed; nil while neither is.
func (x *exchange) givenUp() error {
	if err := x.req.Context().Err(); err != nil {
		return err
	}
	if x.cancelled() {
		return errCancelChannel
	}
	return nil
}

// errCancelChannel is the error, and the admission's cause, of a request
// whose caller closed its Cancel channel before it was sent: a
// cancellation, as net/http takes it.
var errCancelChannel = fmt.Errorf("httpadmit: the request was cancelled through its Cancel channel: %w", context.Canceled)

// Close closes the response body, then frees the request's slot; it returns
// once the slot is free.
func (b *body) Close() error {
	b.closing.Store(true) // before the Close that fails a Read under way
	err := b.ReadCloser.Close()
	b.x.release()
	return err
}

// BodyError is the outcome, in the executor's Stats and listener events,
// of a request whose response body the destination cut short: a read of
// it failed (io.ErrUnexpectedEOF for an HTTP/1 connection closed before
// the body's length, a stream reset over HTTP/2) while the request's
// context was alive, its Cancel channel open, and before the body was
// closed. It counts as a failure of the destination.
type BodyError struct {
	Err error // the read's error
}

func (e *BodyError) Error() string {
	return "httpadmit: reading the response body: " + e.Err.Error()
}

// Unwrap returns the read's error.
func (e *BodyError) Unwrap() error { return e.Err }

// upgradedBody is the connection of a 101 response; it stays writable.
type upgradedBody struct {
	io.ReadWriteCloser
	x *exchange
}

// Close closes the connection, then frees the request's slot.
func (b *upgradedBody) Close() error {
	err := b.ReadWriteCloser.Close()
	b.x.release()
	return err
}
