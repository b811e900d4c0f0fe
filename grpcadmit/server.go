package grpcadmit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/internal/adapt"
)

// admitter is what the interceptors of one constructor call share.
type admitter struct {
	ex         *executor.Executor
	tenant     tenantFunc // nil: the client's default, one group per target
	group      string
	retryAfter time.Duration
	failure    func(error) bool
	weight     func(context.Context, string) (int, error) // nil: 1
	client     bool                                       // the client interceptor's: a *RefusalError was never sent

	watchTransport bool // WithTransportWatch
}

// newAdmitter applies opts; read gives the metadata values of a key on this
// side (incoming or outgoing), for WithTenantKey.
func newAdmitter(ex *executor.Executor, opts []Option, read func(context.Context, string) []string) *admitter {
	if ex == nil {
		panic("grpcadmit: nil executor")
	}
	c := build(opts)
	a := &admitter{ex: ex, group: c.defaultGroup, failure: c.failure, retryAfter: c.retryAfter, weight: c.weight,
		watchTransport: c.watchTransport}
	switch {
	case c.tenant != nil:
		a.tenant = fromFunc(c.tenant)
	case c.tenantKey != "":
		a.tenant = fromMetadata(c.tenantKey, read)
	}
	return a
}

// newServerAdmitter is newAdmitter with the server's defaults: the x-tenant
// incoming metadata key, and handlerFailure.
func newServerAdmitter(ex *executor.Executor, opts []Option) *admitter {
	a := newAdmitter(ex, opts, metadata.ValueFromIncomingContext)
	if a.failure == nil {
		a.failure = handlerFailure
	}
	if a.tenant == nil {
		a.tenant = fromMetadata(DefaultTenantKey, metadata.ValueFromIncomingContext)
	}
	return a
}

// refuse returns the refusal of a call for err, marked as a server
// interceptor's on the server side.
func (a *admitter) refuse(err error) error {
	r := refusal(err, a.retryFor(err))
	if re, ok := r.(*RefusalError); ok && !a.client {
		re.server = true
	}
	return r
}

// retryFor returns the retry delay of a call refused with err:
// WithRetryAfter's, or the time an open group breaker that refused it has
// left, when that is longer (adapt.RetryDelay).
func (a *admitter) retryFor(err error) time.Duration {
	return adapt.RetryDelay(a.ex, err, a.retryAfter)
}

// groupOf returns the call's group, or the refusal of an invalid tenant.
func (a *admitter) groupOf(ctx context.Context) (string, error) {
	group, err := a.tenant(ctx)
	if err != nil {
		return "", a.refuse(err)
	}
	if group == "" {
		group = a.group
	}
	return group, nil
}

// weightOf returns the weight of a call to method, or the refusal of an
// invalid weight.
func (a *admitter) weightOf(ctx context.Context, method string) (int, error) {
	if a.weight == nil {
		return 1, nil
	}
	w, err := adapt.Weight(a.weight(ctx, method))
	if err != nil {
		return 0, a.refuse(err)
	}
	return w, nil
}

// unaryMethod and streamMethod return the full method name of a call: gRPC
// always passes its info, a test calling an interceptor directly may not.
func unaryMethod(info *grpc.UnaryServerInfo) string {
	if info == nil {
		return ""
	}
	return info.FullMethod
}

func streamMethod(info *grpc.StreamServerInfo) string {
	if info == nil {
		return ""
	}
	return info.FullMethod
}

// outcome is what fn returns to Do for a handler's error: the error when it
// is a failure, or a cancellation (Do counts it Cancelled, no failure), else
// nil. A status with code Canceled is gRPC's word for a cancellation, which
// Do knows only as context.Canceled. Client-side, a *RefusalError, or any
// refusal in this process (refusedHere), is a call that an interceptor
// chained after this one refused (its local queue's deadline passed, its
// breaker is open, the caller's own bulkhead is full): it never reached the
// dependency, so it counts as Cancelled, neither a failure nor a success of
// the dependency. Server-side, so is a server interceptor's *RefusalError:
// one chained after this one (one group per tenant, then one per method)
// refused the call, whose handler never ran. Counted by ServerFailure, an
// inner group's open breaker or shutdown (Unavailable) would open the outer
// group's breaker, shedding all of a tenant's methods for one method's.
// A handler's error that says its own outgoing work was refused in this
// process (refusedHere) counts as Cancelled too, as httpadmit counts a
// request its handler marks refused (httpadmit.MarkRefused): the handler
// did no work, and its dependency never saw the call. Counted by
// ServerFailure, a dependency's open breaker in this process (Unavailable)
// would open the breaker of every tenant whose calls need it, and keep
// them shed after the dependency is back.
func (a *admitter) outcome(err error) error {
	var re *RefusalError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.Canceled):
		return err
	case status.Code(err) == codes.Canceled:
		return context.Canceled
	case a.client && refusedHere(err):
		return errNotSent
	case errors.As(err, &re) && re.server:
		return errNotRun
	case !a.client && refusedHere(err):
		return errRefusedHere
	case a.failure(err):
		return err
	}
	return nil
}

// handled is the outcome of a server handler's error err, which it returned
// with ctx, the context Do gave it: Cancelled when ctx has ended (the
// caller's deadline passed, the caller went away, the executor stopped the
// call), whatever err's code, else outcome's. The caller gave up on the
// call, so its error tells nothing of the server: counted as a success
// (a DeadlineExceeded), a caller's short deadline would close a half-open
// breaker whose probe never did its work; counted by ServerFailure (a
// dependency's cancelled call reported as Internal), any caller could open
// its tenant's breaker with short deadlines. An error wrapping
// context.Canceled is outcome's to keep, as it is. SendHeader's error for a
// transport closing under the call is Cancelled too (errHeaderClosed).
func (a *admitter) handled(ctx context.Context, err error) error {
	switch {
	case err == nil, errors.Is(err, context.Canceled):
	case ended(ctx):
		return errCallEnded
	case headerClosed(err):
		return errHeaderClosed
	}
	return a.outcome(err)
}

// ended reports whether a call's context has ended, or its deadline has
// passed by the clock though the context's timer has not fired yet. A
// timer fires late on a loaded server, while the handler's outgoing call,
// which carried the caller's deadline, may come back first with its
// dependency's DeadlineExceeded: the caller's deadline all the same, which
// the default rule (handlerFailure) would count as the server's failure.
func ended(ctx context.Context) bool { return endedErr(ctx) != nil }

// endedErr returns the error of ctx once it has ended, as ended says:
// its own, or context.DeadlineExceeded once its deadline has passed by the
// clock though its timer has not fired yet; nil while it is alive.
func endedErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// handlerFailure is the server interceptors' default failure rule:
// ServerFailure's codes, and DeadlineExceeded. It sees only the errors a
// handler returned while its call was alive (handled counts the others
// Cancelled), so a DeadlineExceeded here is never its caller's: the
// handler's own outgoing work timed out (a dependency that does not answer
// in time), or its dependency reported its own. Counted as a success, a
// hanging dependency, the commonest reason for a breaker, would never open
// the group's breaker, and would close a half-open one.
func handlerFailure(err error) bool {
	if ServerFailure(err) {
		return true
	}
	st, ok := status.FromError(err)
	if !ok {
		st = status.FromContextError(err) // as the server converts it
	}
	return st.Code() == codes.DeadlineExceeded
}

// errCallEnded is the outcome of an incoming call whose handler returned an
// error after the call's context ended: Cancelled.
var errCallEnded = fmt.Errorf("grpcadmit: the handler returned an error after its call's context ended: %w", context.Canceled)

// refusedHere reports whether an error is, or wraps, a refusal in this
// process of the work asked for (a handler's outgoing work, or a call
// refused by an interceptor of the client's chain): a client interceptor's
// *RefusalError (its outgoing call was never sent), an executor's refusal
// (executor.ErrRejected, from its Do), or a circuit breaker's
// (breaker.ErrOpenState, breaker.ErrTooManyRequests, from one used on its
// own). A status that came over the wire is the dependency's answer, not
// one of these, even one a grpcadmit server sent for its own refusal: the
// dependency's server chose it, and a client interceptor's ClientFailure
// counts it against the dependency.
func refusedHere(err error) bool {
	var re *RefusalError
	return errors.As(err, &re) || adapt.Refused(err)
}

// errNotSent is the outcome of an outgoing call refused in this process by
// an interceptor chained after the client's: Cancelled.
var errNotSent = fmt.Errorf("grpcadmit: the call was refused in this process, never sent: %w", context.Canceled)

// errNotRun is the outcome of an incoming call refused by a server
// interceptor chained after this one: Cancelled.
var errNotRun = fmt.Errorf("grpcadmit: the call was refused by an interceptor chained after this one, its handler never ran: %w", context.Canceled)

// errRefusedHere is the outcome of an incoming call whose handler returned
// a refusal in this process of its own outgoing work (refusedHere):
// Cancelled.
var errRefusedHere = fmt.Errorf("grpcadmit: the handler answered with a refusal of its own outgoing work in this process: %w", context.Canceled)

// UnaryServerInterceptor returns an interceptor that admits each unary call
// with ex.DoWeighted for its tenant and runs the handler once it is
// admitted, in the same goroutine, with the context Do gives (the call's, or
// one derived from it that the executor's shutdown deadline or Close also
// cancels): executor.GroupFromContext of it returns the group the call was
// admitted under, its tenant or the default group. The handler's response
// and error are returned unchanged, but for a cancellation it answers once
// the executor stopped the call (Close, ShutdownGroup's deadline) while its
// caller had not cancelled it, sent as codes.Unavailable with RetryInfo
// (see the package documentation). It panics if ex is nil or an option is
// invalid.
func UnaryServerInterceptor(ex *executor.Executor, opts ...Option) grpc.UnaryServerInterceptor {
	a := newServerAdmitter(ex, opts)
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		group, err := a.groupOf(ctx)
		if err != nil {
			return nil, unaryPushback(ctx, err)
		}
		weight, err := a.weightOf(ctx, unaryMethod(info))
		if err != nil {
			return nil, unaryPushback(ctx, err)
		}
		c := unaryCalls.Get().(*unaryCall)
		c.a, c.handler, c.req = a, handler, req
		err = a.ex.DoWeighted(ctx, group, weight, c.fn)
		resp, herr, ran, returned, stopped := c.resp, c.err, c.ran, c.returned, c.stopped
		*c = unaryCall{fn: c.fn} // drop the call before the next one reuses c
		unaryCalls.Put(c)
		if !ran {
			return nil, unaryPushback(ctx, a.refuse(err))
		}
		if !returned {
			return nil, notReturned(err)
		}
		return resp, a.answer(ctx, stopped, herr, func(md metadata.MD) { _ = grpc.SetTrailer(ctx, md) })
	}
}

// unaryPushback sets the pushback trailer of a unary call's refusal err, and
// returns err. A call without a server stream (a test calling the
// interceptor) has nowhere to send it: SetTrailer's error says so.
func unaryPushback(ctx context.Context, err error) error {
	return sendPushback(err, func(md metadata.MD) { _ = grpc.SetTrailer(ctx, md) })
}

// A unaryCall is one call's fn for Do and its outcome. They are pooled with
// fn bound once, so that admitting a call allocates no closure: Do has
// returned, and fn will not run again, by the time one is put back. One whose
// handler panicked is not put back.
type unaryCall struct {
	a        *admitter
	handler  grpc.UnaryHandler
	req      any
	resp     any
	err      error
	ran      bool
	returned bool                        // run returned: neither the handler nor WithFailure's function panicked
	stopped  bool                        // Do's context had ended as the handler returned (answer)
	fn       func(context.Context) error // run, bound to this call
}

var unaryCalls = sync.Pool{New: func() any {
	c := new(unaryCall)
	c.fn = c.run
	return c
}}

func (c *unaryCall) run(ctx context.Context) error {
	c.ran = true
	var w *sendWatch
	if c.a.watchTransport {
		w = new(sendWatch)
		ctx = c.a.watched(ctx, w)
	}
	c.resp, c.err = c.handler(ctx, c.req)
	c.stopped = ctx.Err() != nil
	outcome := errHeaderClosed
	if !w.sendFailed(c.err) {
		outcome = c.a.handled(ctx, c.err) // WithFailure's function may panic
	}
	c.returned = true
	return outcome
}

// StreamServerInterceptor returns an interceptor that admits each stream
// with ex.DoWeighted for its tenant and runs the handler once it is admitted. The
// stream holds its slot until the handler returns: for its whole life. The
// handler's stream reports the context Do gives as its Context, of which
// executor.GroupFromContext returns the stream's group. The handler's
// error is returned as UnaryServerInterceptor returns a unary handler's.
// A handler that sent nothing through its stream and returns nil once the
// stream's context has ended counts as Cancelled (see the package
// documentation); when the executor stopped the stream, its caller still
// there, the caller gets codes.Unavailable, as for a handler that answers
// the cancellation. It panics if ex is nil or an option is invalid.
func StreamServerInterceptor(ex *executor.Executor, opts ...Option) grpc.StreamServerInterceptor {
	a := newServerAdmitter(ex, opts)
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		group, err := a.groupOf(ss.Context())
		if err != nil {
			return sendPushback(err, ss.SetTrailer)
		}
		weight, err := a.weightOf(ss.Context(), streamMethod(info))
		if err != nil {
			return sendPushback(err, ss.SetTrailer)
		}
		ran, returned, stopped, gaveUp := false, false, false, false
		var herr error
		err = a.ex.DoWeighted(ss.Context(), group, weight, func(ctx context.Context) error {
			ran = true
			s := &stream{ServerStream: ss}
			s.ctx = a.watched(ctx, &s.sendWatch)
			herr = handler(srv, s)
			stopped = ctx.Err() != nil
			outcome := a.streamOutcome(ctx, s, herr) // WithFailure's function may panic
			gaveUp = outcome == errStreamGivenUp
			returned = true
			return outcome
		})
		if !ran {
			return sendPushback(a.refuse(err), ss.SetTrailer)
		}
		if !returned {
			return notReturned(err)
		}
		if gaveUp {
			return a.answerGivenUp(ss.Context(), stopped, ss.SetTrailer)
		}
		return a.answer(ss.Context(), stopped, herr, ss.SetTrailer)
	}
}

// answerGivenUp returns what the caller of a stream whose handler gave it
// up (errStreamGivenUp) gets: nil, the handler's, unless the executor
// stopped the stream while its caller was there, which gets the answer
// of a handler's cancellation then (answer), codes.Unavailable: the
// handler returned nil on the end of a context that, without the
// interceptor, only its caller ends, and OK would tell the caller that
// the stream ended with nothing to send (an empty listing, a
// subscription with no events), not to retry, on this server or another.
func (a *admitter) answerGivenUp(ctx context.Context, stopped bool, set func(metadata.MD)) error {
	if err := a.answer(ctx, stopped, errStreamGivenUp, set); err != errStreamGivenUp {
		return err
	}
	return nil
}

// streamOutcome is what fn returns to Do for the error herr of the
// handler of stream s, run with ctx.
func (a *admitter) streamOutcome(ctx context.Context, s *stream, herr error) error {
	if herr != nil {
		if s.received(herr) {
			return errReceived
		}
		if s.sendFailed(herr) {
			return errSendClosed
		}
	}
	if herr == nil && !s.sentAny.Load() && ended(ctx) {
		return errStreamGivenUp
	}
	return a.handled(ctx, herr)
}

// errStreamGivenUp is the outcome of a stream whose handler sent nothing
// through its stream and returned nil once the stream's context had ended
// (its caller cancelled it or its deadline passed, or the executor stopped
// it), as a subscription's loop returns on ctx.Done: Cancelled. It gave
// the stream up having done nothing for its caller; as a Success, a
// caller cancelling its streams would close a half-open breaker whose
// probe did no work. httpadmit counts a next that wrote nothing and
// returned once its request was cancelled so too.
var errStreamGivenUp = fmt.Errorf("grpcadmit: the stream handler sent nothing and returned once its stream's context had ended: %w", context.Canceled)

// stream is a server stream with the context Do gave, which keeps the
// error its RecvMsg returned.
type stream struct {
	grpc.ServerStream
	ctx       context.Context
	recvErr   atomic.Pointer[error] // the last error of RecvMsg other than io.EOF
	sentAny   atomic.Bool           // a SendMsg or SendHeader succeeded: the caller was answered something
	sendWatch                       // the last Unavailable of SendMsg or SendHeader: the transport closing
}

func (s *stream) Context() context.Context { return s.ctx }

// RecvMsg receives as the stream does, keeping its error: a goroutine of
// the handler may still receive as the handler returns, hence the atomic.
// The error kept is a copy made on the error's path: the address of err
// itself would move err to the heap, an allocation for every message.
func (s *stream) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if err != nil && err != io.EOF {
		kept := err
		s.recvErr.Store(&kept)
	}
	return err
}

// SendMsg sends as the stream does, keeping an error that says the
// transport closed under the stream (sent).
func (s *stream) SendMsg(m any) error {
	err := s.ServerStream.SendMsg(m)
	if err != nil {
		s.sent(err)
	} else if !s.sentAny.Load() { // loaded first: a store on every message would contend
		s.sentAny.Store(true)
	}
	return err
}

// SendHeader sends the header as the stream does, keeping an error that
// says the transport closed under the stream (sent).
func (s *stream) SendHeader(md metadata.MD) error {
	err := s.ServerStream.SendHeader(md)
	if err != nil {
		s.sent(err)
	} else {
		s.sentAny.Store(true)
	}
	return err
}

// received reports whether the handler's error err is, or wraps, the one
// its stream's RecvMsg returned (a status error matches an equal one): the
// handler passed on what the caller sent.
func (s *stream) received(err error) bool {
	p := s.recvErr.Load()
	return p != nil && errors.Is(err, *p)
}

// errReceived is the outcome of a stream whose handler returned the error
// its RecvMsg gave: Cancelled. gRPC reports a message the caller sent that
// does not decode, a missing request of a server-streaming call, and a
// compression it cannot undo as codes.Internal, which ServerFailure would
// count: any caller could open its tenant's breaker by sending garbage.
// The handler did not fail; its caller's input did.
var errReceived = fmt.Errorf("grpcadmit: the handler returned its stream's receive error, the caller's input: %w", context.Canceled)

// errSendClosed is the outcome of a stream whose handler returned the
// error a send of its stream gave as the transport closed under it:
// Cancelled. gRPC's server transport, closing (its client closed the
// connection, or the server stops), fails the stream's sends with
// Unavailable before it ends the stream's context, so that a handler that
// returns at once returns Unavailable on a context still alive, which
// ServerFailure would count: any client could open its tenant's breaker
// by opening streams and closing its connection. The handler did not
// fail; its client went away.
var errSendClosed = fmt.Errorf("grpcadmit: the handler returned its stream's send error, the transport closing under it: %w", context.Canceled)

// notReturned goes on with the panic of a handler that Do ran but that did
// not return, when Do recovered it (a rejection handler's RunInCaller
// recovers it into a *executor.PanicError): as without the interceptor, the
// panic goes on up the stack, and the call is never answered as a success.
//
// A handler that called runtime.Goexit here never gets Do to return; one
// that Do returns executor.ErrGoexit for ran on another goroutine (a
// rejection handler called RunInCaller there), which the exit has ended.
// It ends that goroutine only: notReturned returns the call's error, an
// exitedError. A panic here, which gRPC does not recover, would end the
// process for a handler that never panicked.
func notReturned(err error) error {
	var pe *executor.PanicError
	if errors.As(err, &pe) {
		panic(pe.Value)
	}
	if errors.Is(err, executor.ErrGoexit) {
		return &exitedError{err}
	}
	if err == nil {
		err = errors.New("grpcadmit: the handler did not return")
	}
	panic(err)
}

// exitedError is the error of a call whose handler (client-side, invoker)
// exited the goroutine a rejection handler ran it on. It is sent as the
// server's own failure, Internal with a fixed message, as a rejection
// handler's error without a status is; Unwrap gives executor.ErrGoexit,
// for the server's logs.
type exitedError struct{ err error }

func (e *exitedError) Error() string {
	return "grpcadmit: the handler exited the goroutine a rejection handler ran it on: " + e.err.Error()
}

func (e *exitedError) GRPCStatus() *status.Status {
	return status.New(codes.Internal, "internal error")
}

func (e *exitedError) Unwrap() error { return e.err }
