// Package grpcadmit admits gRPC calls through a grouped executor: server
// interceptors that run each call under its tenant's limits, and client
// interceptors that bound the calls and streams made to each destination.
//
//	p, err := policy.New(
//		policy.WithGlobalMaxInFlight(256),    // the service runs 256 calls at once
//		policy.WithDefaultMaxConcurrency(8),  // a tenant runs 8
//		policy.WithDefaultMaxInFlight(32),    // and holds 32 admitted (24 waiting)
//		policy.WithQueueTimeout(time.Second), // none of which waits past 1s
//	)
//	if err != nil { return err }
//	ex, err := executor.New(p)
//	if err != nil { return err }
//	defer ex.Close()
//	srv := grpc.NewServer(
//		grpc.ChainUnaryInterceptor(grpcadmit.UnaryServerInterceptor(ex)),
//		grpc.ChainStreamInterceptor(grpcadmit.StreamServerInterceptor(ex)),
//	)
//
// Without WithDefaultMaxInFlight and WithQueueTimeout, a flooding tenant
// keeps up to 1024 calls admitted (the default in-flight limit), waiting
// without a deadline, and is refused only past them.
//
// Each call is admitted with Executor.DoWeighted for its tenant, read from
// the x-tenant metadata key unless WithTenantKey or WithTenantFunc says
// otherwise; a call without one runs in the default group. A call weighs 1
// unless WithWeightFunc says otherwise. The handler finds the group its call
// was admitted under with executor.GroupFromContext(ctx) (ss.Context() for a
// stream). What a caller sees when the handler does not run:
//
//   - codes.ResourceExhausted with a google.rpc.RetryInfo detail: the executor
//     refused the call (its tenant's bulkhead or queue is full, it waited past
//     the queue timeout, a cluster limiter refused it);
//   - codes.ResourceExhausted without RetryInfo: the call's weight is above
//     one of its limits, so it could never run;
//   - codes.Unavailable, also with RetryInfo: the executor or the tenant's
//     group is shut down, or the tenant's circuit breaker is open, a call
//     that waited in the tenant's queue when it opened too (the executor
//     looks at the breaker again as that call would start): it gets the
//     answer of one refused on arrival, the same RetryInfo and pushback;
//   - codes.Internal without RetryInfo: a limit resolver gave an invalid
//     value (executor.LimitResolver) or the executor found the task invalid
//     (executor.LimitInvalid), a misconfiguration a retry would meet again;
//   - codes.InvalidArgument: the call names an invalid tenant
//     (httpadmit.ValidTenant's rule), or its weight function failed or gave
//     a negative weight; a tenant or weight function's error carrying a
//     gRPC status other than OK is sent with that status instead
//     (codes.Unauthenticated for a caller without credentials, say), and
//     one matching httpadmit.ErrUnavailable (a lookup it needs is down) as
//     codes.Unavailable with RetryInfo, its text kept in the server;
//   - codes.Canceled or codes.DeadlineExceeded: the call's context ended while
//     it waited. It never reaches the handler and its place is freed at once;
//   - a rejection handler's own status (executor.WithRejectionHandler): its
//     error, when it carries a gRPC status other than OK, is sent with that
//     status; any other error of its (an OK status too: the call did not
//     run) is sent as codes.Internal, "internal error", its text kept in
//     the server (RefusalError.Err).
//
// The server interceptors send, with each refusal, the
// grpc-retry-pushback-ms trailer that a gRPC client's retry policy reads
// (gRFC A6; grpc-go's ignores RetryInfo): RetryInfo's delay, in whole
// milliseconds rounded up (at most 2^31-1), where RetryInfo is sent, so
// that a client whose policy lists the code retries after that delay
// instead of its own backoff; -1, which stops the client's retries, for an invalid tenant or
// weight, a weight above a limit and a misconfigured server, where a retry
// would meet the same refusal; none for a call whose context ended or a
// rejection handler's own status.
//
// Every such error is a *RefusalError: status.Code reads its code, and
// errors.Is matches the executor's error it carries (executor.ErrRejected,
// breaker.ErrOpenState, ...).
//
// A stream holds its slot for its whole life: from the call's admission until
// the handler returns (client-side, with StreamClientInterceptor, until gRPC
// ends the stream: see its doc), however long the stream stays open and
// whatever it sends. Size the limits of groups that serve long-lived streams for the
// streams, not for the messages. A stream's Context is done when the
// executor stops the call (Close, ShutdownGroup's deadline), but its
// RecvMsg and SendMsg wait on gRPC's own context, which only the client or
// the server's end cancels: a handler blocked in RecvMsg for a client that
// sends nothing, or in SendMsg for one that reads nothing (its flow-control
// window stays shut), keeps its slot, and keeps Close waiting, until the
// client sends, reads or closes. A handler that must stop with the
// executor watches ss.Context() beside its receives and sends (a goroutine
// that receives or sends, the handler selecting on it and the context), as
// it would for any server-side cancellation: once the handler returns,
// gRPC ends the stream, and the blocked call with it.
//
// A client that vanishes without closing its connection (its host
// crashed, the network dropped it, or it stopped answering on purpose)
// keeps its calls, waiting or running, and their places, until their
// deadlines, or for ever for calls without one: gRPC ends a call only
// when its transport closes. Serve with keepalive.ServerParameters (Time
// and Timeout), so that gRPC closes a connection whose peer no longer
// answers its pings, ending its calls and freeing their places.
//
// A handler that answers the cancellation of its call's context once the
// executor stopped the call (Close, ShutdownGroup's deadline), as handlers
// do (ctx.Err(), or its status), while the caller had not cancelled it,
// has its answer sent as codes.Unavailable with RetryInfo and a pushback,
// as a call the shutdown refused: sent as it was, Canceled would tell the
// caller that it had cancelled the call itself, and a retry policy, which
// retries Unavailable on another server but never Canceled, would give
// up. The call counts as Cancelled; errors.Is finds the handler's error
// and context.Canceled in the error the interceptor returns. So is a
// stream handler's nil, returned then having sent nothing through its
// stream (as a subscription's loop returns on ctx.Done): OK would tell
// the caller that the stream ended with nothing to send, and not to retry.
//
// The handler's errors count as failures for the group's circuit breaker
// (executor.WithGroupBreaker) when WithFailure says so; by default those with
// a code that says the server failed: Unknown, Internal, Unavailable and
// DataLoss (ServerFailure), and DeadlineExceeded returned while the call is
// alive, the handler's own outgoing work timing out (a dependency that does
// not answer in time, which must open the breaker that sheds its calls).
// An error a handler returns once its call's context has ended (the
// caller's deadline passed, the caller went away, the executor stopped the
// call) counts as Cancelled, whatever its code, and WithFailure does not
// see it: the caller gave up on the call, which must neither open the
// breaker (a dependency's cancelled call reported as Internal) nor close a
// half-open one (a probe's DeadlineExceeded). A deadline the server gives
// its calls itself (a timeout interceptor) is its own budget only if that
// interceptor is chained after this one: chained before, it is the call's
// deadline to this one, and a handler that runs out of it (its dependency
// hanging) counts as Cancelled, so that the breaker never opens for it.
// The client interceptors also count
// DeadlineExceeded (ClientFailure): for a caller, a dependency that does not
// answer in time has failed. A call that a client interceptor refused in
// this process (a *RefusalError, whatever its code: a deadline that passed
// in the local queue is DeadlineExceeded) never reached its dependency:
// ClientFailure does not count it, and a client interceptor chained before
// the one that refused it counts it Cancelled. Likewise a server interceptor
// chained before another (one group per tenant, then one per method)
// counts a call the inner one refused as Cancelled, whatever its code: the
// handler never ran, and an inner group's open breaker or shutdown
// (Unavailable) must not open the outer group's. A handler that returns
// a refusal in this process of its own outgoing work counts as Cancelled
// too, whatever its code, as httpadmit counts a request its handler marks
// refused (httpadmit.MarkRefused), and WithFailure does not see it: a
// client interceptor's *RefusalError (its outgoing call was never sent),
// an error matching executor.ErrRejected (an executor's Do refused it), or
// breaker.ErrOpenState or breaker.ErrTooManyRequests, returned or wrapped.
// The handler did no work; counted by ServerFailure, one dependency's open
// breaker (Unavailable) would open the breaker of every tenant whose calls
// need it. The caller still gets the error unchanged. A status that came
// over the wire, even a grpcadmit server's refusal, is the dependency's
// answer, counted by ServerFailure as any other (and by the client
// interceptor's ClientFailure against the dependency); a handler that
// wants its dependency's refusal in this process counted as its own
// failure returns a status of its own for it (status.Error), which
// carries none of these errors. A stream handler that returns the error
// its stream's RecvMsg gave, as generated code does, counts as Cancelled
// too, and WithFailure does not see it: gRPC reports a message the caller
// sent that does not decode, or a server-streaming call sent without its
// request, as codes.Internal, the caller's doing, by which any caller
// could otherwise open its tenant's breaker. So does one that returns the
// codes.Unavailable its stream's SendMsg or SendHeader gave: gRPC's
// transport, closing as its client closes the connection (or as the
// server stops), fails the stream's sends so a moment before it ends the
// stream's context, and any caller could open its tenant's breaker by
// opening streams and closing its connection. So does a stream handler
// that sent nothing through its stream (no message, no header) and
// returns nil once its stream's context has ended, as a subscription's
// loop returns on ctx.Done: it gave the stream up having done nothing
// for its caller; counted as a Success, a caller cancelling its streams
// would close a half-open breaker whose probe did no work. A handler that sends its
// header through its call's context sends it with SendHeader, not
// grpc.SendHeader, whose error goes past the interceptor: SendHeader's
// Unavailable for a closing transport counts as Cancelled too, unary or
// stream, and grpc.SendHeader's as the handler's own Unavailable, a
// failure, unless the interceptor is built WithTransportWatch, which
// costs grpc.SetSendCompressor and grpc.ClientSupportedCompressors (for
// handlers that cannot be changed). A panic in a handler
// releases its slot and goes on unchanged, as without the interceptor (gRPC
// does not recover it; a recovery interceptor chained before this one
// does). A runtime.Goexit in a handler (client-side, an invoker) that a
// rejection handler ran on a goroutine of its own (Rejection.RunInCaller)
// ends that goroutine only: the call fails with codes.Internal, "internal
// error", its error matching executor.ErrGoexit.
//
// Tenant keys read from metadata come from callers, so they are chosen by
// clients: a caller may name any tenant, taking that tenant's places and
// answering for its breaker, and every distinct key is a group in the
// executor (idle ones are reclaimed, see executor.WithMaxIdleGroups). A key
// is accepted only if httpadmit.ValidTenant says so. When callers are not
// trusted, read the tenant with WithTenantFunc from what the server has
// verified (the peer's certificate, a checked token), or map keys to a
// bounded set there. A key names a group of the whole executor: on an
// executor that other code uses too, a caller can name one of its groups,
// a client interceptor's target ("dns:///payments:443", whatever
// ClientConn.Target says) or the method of a server interceptor chained
// after this one ("/pkg.Service/Method"), and take that group's places
// from it, so that the server's own calls to that dependency are refused.
// Give the client interceptors, and each server interceptor chained after
// another, an executor of their own.
//
// grpcadmit is a package of its own so that the core packages never import
// gRPC: only programs that use it compile it.
//
// The examples (example_test.go, example_stream_test.go), run by go test,
// show UnaryServerInterceptor, StreamServerInterceptor (a stream holding its
// slot while it is open), UnaryClientInterceptor, StreamClientInterceptor
// and SendHeader.
package grpcadmit
