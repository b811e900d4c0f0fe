// Package httpadmit admits HTTP requests through a grouped executor: Handler
// on the server side, one group per tenant, and Transport on the client side,
// one group per destination host and port.
//
//	p, err := policy.New(
//		policy.WithGlobalMaxInFlight(256),    // the service runs 256 requests at once
//		policy.WithDefaultMaxConcurrency(8),  // a tenant runs 8
//		policy.WithDefaultMaxInFlight(32),    // and holds 32 admitted (24 waiting)
//		policy.WithQueueTimeout(time.Second), // none of which waits past 1s
//	)
//	if err != nil { ... }
//	ex, err := executor.New(p)
//	if err != nil { ... }
//	defer ex.Close()
//	err = http.ListenAndServe(addr, httpadmit.Handler(ex, mux)) // tenant from X-Tenant
//	if err != nil { ... }
//
// Without WithDefaultMaxInFlight and WithQueueTimeout, a flooding tenant
// keeps up to 1024 requests admitted (the default in-flight limit), waiting
// without a deadline, and is refused only past them.
//
// Handler admits each request with Executor.DoWeighted for its tenant and
// serves it with next once admitted; next finds the group it was admitted
// under with executor.GroupFromContext(r.Context()). A tenant that floods the service fills
// its own limits and is refused there (429) while the other tenants are
// served. A request weighs 1 unless WithWeightFunc says otherwise. What the
// client sees when next does not run:
//
//   - 429 Too Many Requests with Retry-After: the executor refused the request
//     (its tenant's bulkhead or queue is full, it waited past the queue
//     timeout, a cluster limiter refused it);
//   - 503 Service Unavailable with Retry-After: the executor or the tenant's
//     group is shut down, or the tenant's circuit breaker is open
//     (executor.WithGroupBreaker); for an open breaker, Retry-After is the
//     time it has left before it lets a probe through, when that is longer
//     than WithRetryAfter's. A request that waited in its tenant's queue
//     when the breaker opened is refused as it would start (the executor
//     looks at the breaker again then) and gets this same answer, status,
//     Retry-After and body, as one refused on arrival;
//   - 503 with Retry-After: the tenant or weight function could not read
//     the request, its error matching ErrUnavailable (a lookup it needs is
//     down), a failure of the server's;
//   - 400 Bad Request: the request names an invalid tenant (see ValidTenant
//     and WithTenantPathSegment), or its weight function failed or gave a
//     negative weight;
//   - 413 Content Too Large: the request's weight is above one of its limits,
//     so it could never run;
//   - 500 Internal Server Error without Retry-After: a limit resolver gave
//     an invalid value (executor.LimitResolver) or the executor found the task
//     invalid (executor.LimitInvalid), a misconfiguration a retry would meet
//     again;
//   - 503 without Retry-After: the request's context ended while it waited
//     (its client went away, or a deadline set before Handler passed). It
//     never reaches next, and its place in the queue is freed at once. Over
//     HTTP/1, net/http does not see a client go away while the request's
//     body is unread, as it is while the request waits: such a request
//     keeps its place until it is admitted or its queue timeout passes
//     (see Handler).
//
// WithRefusalWriter replaces these answers; RefusalStatus gives the status
// code the default writer uses for an error.
//
// At shutdown, stop the server first (http.Server.Shutdown), so that no new
// request comes and those in Handler finish, then the executor
// (Executor.Shutdown), which cancels what is left when its context ends. In
// the other order the requests still arriving are refused with 503.
// ListenAndServe returns http.ErrServerClosed as soon as Shutdown begins: a
// main that returns then cuts the running requests off, so it waits for
// Shutdown to return (ExampleHandler_shutdown).
//
// Transport is the classic bulkhead for outgoing calls: each destination
// host and port is a group, so a slow dependency fills its own limits and
// cannot take all of a service's outgoing capacity. A refused request fails
// at once with an error matching executor.ErrRejected; an admitted one holds
// its slot until its response body is closed. With a group breaker, a
// request that waited in its destination's queue when the breaker opened
// is not sent either: it fails with the error of one refused on arrival
// (executor.ErrRejected and breaker.ErrOpenState, or
// breaker.ErrTooManyRequests while the breaker is half-open).
//
// A next behind Handler that answers for a dependency's refusal (a
// Transport's error matching executor.ErrRejected, an open breaker's
// breaker.ErrOpenState) calls MarkRefused: the request then counts as
// Cancelled, not as a failure by WithFailureStatus, so a refusal downstream
// cannot trip the inbound group's breaker. A Handler without
// WithFailureStatus passes next the server's writer unwrapped, where no
// mark can reach it, and counts the request a Success, as every request
// next returns from: give it WithFailureStatus(func(int) bool { return
// false }) to have refusals counted as Cancelled.
//
// Tenant keys come from requests, so they are chosen by clients: a key is
// accepted only if ValidTenant says so, and every distinct key is a group in
// the executor (idle ones are reclaimed, see executor.WithMaxIdleGroups). A
// reclaimed group forgets its circuit breaker (executor.WithGroupBreaker).
// Idle groups whose breakers are closed go before one whose breaker is
// open, but a client that trips the breakers of more than 8 keys of its
// own and then sends WithMaxIdleGroups new ones can still close the open
// breaker of a tenant that has gone idle. Map keys to a bounded set with
// WithTenantFunc when clients are not trusted.
// A key names a group of the whole executor: on an executor that other
// code uses too, a client can name one of its groups, a Transport's
// destination ("payments.internal:443") or an inner Handler's route, and
// take that group's limits from it. Give Transport, and each Handler
// chained after another, an executor of its own.
//
// httpadmit is a package of its own so that the core packages never import
// net/http: only programs that use it compile it.
//
// The examples (example_test.go, example_tenant_test.go,
// example_shutdown_test.go), run by go test, show Handler, Transport,
// WithWeightFunc, MarkRefused, a tenant read from the path
// (WithTenantPathSegment) and a graceful shutdown that lets the running
// requests finish (ExampleHandler_shutdown).
package httpadmit
