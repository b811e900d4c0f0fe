package grpcadmit

import (
	"context"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/groupexec/groupexec/httpadmit"
	"github.com/groupexec/groupexec/internal/adapt"
)

// DefaultTenantKey is the metadata key the server interceptors read the
// tenant from by default.
const DefaultTenantKey = "x-tenant"

// DefaultGroup is the group of the calls that name no tenant, unless
// WithDefaultGroup says otherwise.
const DefaultGroup = httpadmit.DefaultGroup

// DefaultRetryAfter is the RetryInfo delay sent with a refusal.
const DefaultRetryAfter = time.Second

// An Option configures an interceptor. The interceptor constructors panic on
// an invalid option, with a message naming the option and the value: options
// are fixed when a program is written, so an invalid one is a bug to see at
// once.
type Option interface {
	apply(*config) error
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

type config struct {
	tenant       func(ctx context.Context) (string, error) // nil: the side's default
	tenantKey    string                                    // set by WithTenantKey
	defaultGroup string
	retryAfter   time.Duration
	failure      func(error) bool                                      // nil: the side's default, ServerFailure or ClientFailure
	weight       func(ctx context.Context, method string) (int, error) // nil: every call weighs 1

	watchTransport bool // WithTransportWatch
}

func build(opts []Option) config {
	c := config{defaultGroup: DefaultGroup, retryAfter: DefaultRetryAfter}
	adapt.Apply("grpcadmit", &c, opts, Option.apply)
	return c
}

// WithTenantKey reads the tenant from the metadata key (lower-cased) instead
// of x-tenant: from the incoming metadata in the server interceptors, from the
// outgoing metadata in the client interceptors. An absent key names no tenant
// (the default group); a key sent more than once, or empty, makes the call
// invalid. key must be a metadata key: letters, digits, '-', '_' and '.';
// and not a header gRPC writes itself (content-type, user-agent, te,
// grpc-timeout, grpc-encoding, grpc-status, grpc-message,
// grpc-message-type), which it drops from a call's metadata, so that no
// server would see the caller's tenant there.
func WithTenantKey(key string) Option {
	return optionFunc(func(c *config) error {
		if err := adapt.MetadataKey(key); err != nil {
			return err
		}
		c.tenantKey, c.tenant = strings.ToLower(key), nil
		return nil
	})
}

// WithTenantFunc reads the tenant with f, from the call's context (its
// metadata, peer or authentication info): "" names no tenant, an error makes
// the call invalid, and a key must pass httpadmit.ValidTenant. The caller
// gets codes.InvalidArgument with the error's text, or the invalid key, in
// the status message, as httpadmit answers the same in its 400's body: f
// puts in its errors nothing the caller must not see (an address, a
// lookup's error). An error of f's that carries a gRPC status other than
// OK, itself or an error it wraps, is sent with that status instead (its
// code, message and details; no pushback trailer): codes.Unauthenticated
// for a caller without credentials, codes.Unavailable where the identity
// could not be looked up. An error matching httpadmit.ErrUnavailable, as
// httpadmit's tenant functions return when the lookup they need is down,
// is sent as codes.Unavailable with RetryInfo and a pushback, its text
// kept in the server. f runs for every call, possibly concurrently. f
// must not be nil.
func WithTenantFunc(f func(ctx context.Context) (string, error)) Option {
	return optionFunc(func(c *config) error {
		if f == nil {
			return adapt.NilFunc("WithTenantFunc")
		}
		c.tenant, c.tenantKey = f, ""
		return nil
	})
}

// WithDefaultGroup sets the group of the calls that name no tenant (default
// DefaultGroup). It must pass httpadmit.ValidTenant.
func WithDefaultGroup(group string) Option {
	return optionFunc(func(c *config) error {
		if err := adapt.DefaultGroup(group); err != nil {
			return err
		}
		c.defaultGroup = group
		return nil
	})
}

// WithRetryAfter sets the delay in the RetryInfo detail of refusals, and in
// their grpc-retry-pushback-ms trailer, in milliseconds rounded up and at
// most 2^31-1, about 24.8 days, the longest every gRPC client reads
// (default DefaultRetryAfter). A refusal by an open group breaker is sent the time
// the breaker has left before it lets a probe through instead, when that is
// longer: a call retried sooner would only be refused again. d must be > 0.
func WithRetryAfter(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if err := adapt.RetryAfter(d); err != nil {
			return err
		}
		c.retryAfter = d
		return nil
	})
}

// WithFailure sets which errors of a handler (or, client-side, of the call)
// count as failures for the executor's Stats and the group's circuit
// breaker; the others count as successes, except an error that wraps
// context.Canceled or has the gRPC code Canceled, which counts as
// Cancelled (work given up on, as outcome.Classify says), and, in the
// server interceptors, any error a handler returns once its call's context
// has ended, Cancelled too, which f does not see. In the client
// interceptors a *RefusalError, a call that an interceptor chained after it
// refused in this process and never sent, counts as Cancelled too: it says
// nothing of the dependency. In a server interceptor, so does a server
// interceptor's *RefusalError, a call that one chained after it refused
// before its handler ran, and a handler's error that is a refusal in this
// process of its own outgoing work (a client interceptor's *RefusalError,
// executor.ErrRejected, breaker.ErrOpenState or ErrTooManyRequests: see the
// package documentation), and a stream handler's error that its stream's
// RecvMsg returned (the caller's input: a message that does not decode),
// or the codes.Unavailable its SendMsg or SendHeader returned (the
// transport closing under the stream: its client went away), or that
// SendHeader returned (grpc.SendHeader's too, WithTransportWatch), and a
// stream handler's nil once its stream's context has ended, having sent
// nothing through its stream (it gave the stream up); f sees none of them. Default
// in the server interceptors: ServerFailure, and DeadlineExceeded, which a
// handler returns while its call is alive only when its own outgoing work
// timed out (ServerFailure alone does not count it: an f built on it adds
// it); ClientFailure in the client interceptors. f must not be nil. A
// panic in f goes on to the interceptor's caller, as a handler's (an
// invoker's) does, also when a rejection handler ran the call in its
// caller (Rejection.RunInCaller); for a client stream, whose end f judges
// on another goroutine, see StreamClientInterceptor.
func WithFailure(f func(err error) bool) Option {
	return optionFunc(func(c *config) error {
		if f == nil {
			return adapt.NilFunc("WithFailure")
		}
		c.failure = f
		return nil
	})
}

// WithWeightFunc gives each call the weight f returns for its context (the
// incoming metadata in the server interceptors, the outgoing one in the
// client interceptors) and its full method name ("/pkg.Service/Method"): the
// call takes that many permits at every limit of its group and the executor
// (Executor.DoWeighted), so an expensive method counts for more than a cheap
// one. f runs for every call, after its tenant is read, possibly
// concurrently. Without it every call weighs 1.
//
// 0 means 1, as for DoWeighted. An error from f, or a negative weight,
// makes the call invalid: it never reaches the executor, and its error is
// codes.InvalidArgument, matching httpadmit.ErrInvalidWeight, with f's
// error's text in the status message the caller gets (as for
// WithTenantFunc, nothing the caller must not see; an error carrying a
// gRPC status is sent with it, as there). A weight
// above a limit the call must pass can never run: the executor refuses it
// with executor.ErrTooHeavy, sent as codes.ResourceExhausted without
// RetryInfo, since waiting would not help. f must not be nil.
func WithWeightFunc(f func(ctx context.Context, method string) (int, error)) Option {
	return optionFunc(func(c *config) error {
		if f == nil {
			return adapt.NilFunc("WithWeightFunc")
		}
		c.weight = f
		return nil
	})
}

// WithTransportWatch makes the server interceptors count a handler that
// returns grpc.SendHeader's codes.Unavailable for a transport closing
// under its call (its client closed the connection, or the server stops),
// or an error wrapping it, as Cancelled, as they count SendHeader's: the
// client went away, and the handler did not fail. Without it they cannot
// tell that error from the handler's own Unavailable, a failure, and any
// client could open its tenant's breaker by making calls and closing its
// connection as handlers send their headers.
//
// It does so by handing the handler a context whose gRPC transport stream
// (grpc.ServerTransportStreamFromContext) is wrapped: grpc.SetSendCompressor
// and grpc.ClientSupportedCompressors, which need gRPC's own, then fail
// with an error, and the wrapping costs a few allocations a call. Handlers
// that call either keep it off and send their header with SendHeader, which
// needs no option. The client interceptors ignore it.
func WithTransportWatch() Option {
	return optionFunc(func(c *config) error {
		c.watchTransport = true
		return nil
	})
}

// ServerFailure reports whether err's code says the server failed rather
// than the caller: Unknown (a plain error), Internal, Unavailable or
// DataLoss. The code is the one gRPC sends for err: a plain error that wraps
// context.DeadlineExceeded or context.Canceled (a handler's return nil,
// ctx.Err()) is sent as DeadlineExceeded or Canceled, so it is no failure.
// The server interceptors' default counts DeadlineExceeded too: they know
// whether the call's context has ended, and count an error returned after
// it as Cancelled, so a DeadlineExceeded returned while the call is alive
// is the handler's own outgoing work timing out, a failure of the server.
func ServerFailure(err error) bool {
	st, ok := status.FromError(err)
	if !ok {
		st = status.FromContextError(err) // as the server converts it
	}
	switch st.Code() {
	case codes.Unknown, codes.Internal, codes.Unavailable, codes.DataLoss:
		return true
	}
	return false
}

// ClientFailure reports whether a call's error says its dependency failed:
// ServerFailure's codes and DeadlineExceeded. A server does not count its
// caller's deadline against itself, since the caller chose it; for the
// caller, a dependency that does not answer in time has failed, and one that
// keeps timing out must open the breaker that sheds the calls to it. A
// *RefusalError is no failure: a client interceptor refused the call in
// this process, so the dependency never saw it, whatever its code (a
// deadline that passed in the local queue is DeadlineExceeded, a local
// breaker's or shutdown's refusal Unavailable). Nor is another refusal in
// this process, by an interceptor of the caller's own chained after this
// one: an error matching executor.ErrRejected, breaker.ErrOpenState or
// breaker.ErrTooManyRequests.
//
// The deadline that passes may be one the call inherited: grpc-go carries
// an incoming call's deadline into the outgoing calls made with its
// context, so a caller that sends short deadlines makes this process's
// calls to a dependency time out, and counts against that dependency's
// breaker, for every tenant. An error alone cannot tell such a deadline
// from the dependency's slowness (and a dependency that hangs must open
// the breaker, whoever's deadline it misses). A service that takes
// deadlines from callers it does not trust gives its outgoing calls a
// context with a deadline of its own, or refuses a deadline too short to
// serve before calling out.
//
// A unary call whose request fails to encode in this process (a proto3
// string holding invalid UTF-8, copied from a caller's input) fails with
// codes.Internal, "grpc: error while marshaling", and ClientFailure
// counts it against the dependency: a server whose reply fails to encode
// sends that very code and message, and gRPC's unary call gives an
// interceptor nothing else to tell them apart by (the header, grpc.Header,
// is nil in both for the server's trailers-only answer; wrapping the
// call's codec would need the codec gRPC picks, which the interceptors
// chained after this one may change, and would change the call's
// content-type). A service that copies untrusted input into its outgoing
// requests checks it before the call (utf8.ValidString, or proto.Marshal
// of the request), so that one caller's bad input cannot open the
// dependency's breaker for every caller. An outgoing stream's SendMsg,
// which gRPC documents as returning only the client's errors, counts its
// own as Cancelled (StreamClientInterceptor).
func ClientFailure(err error) bool {
	return !refusedHere(err) && handlerFailure(err)
}
