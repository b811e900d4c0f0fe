// Package gateway is an HTTP admission gateway: a reverse proxy that admits
// each request through a grouped executor, one group per tenant, so that a
// tenant flooding the gateway is refused at its own limits while the others
// are served as before.
//
//	cfg, err := config.Load("gateway.yaml")
//	if err != nil { ... } // every problem of the file, in line order
//	gw, err := gateway.New(cfg)
//	if err != nil { ... }
//	defer gw.Close()
//	err = gw.Serve(ctx, proxyListener, adminListener) // drains when ctx ends
//	if err != nil { ... }
//
// A request's tenant is read from a header, the host or a path prefix,
// honoured only from tenant.trusted_proxies when that is set, or from a
// verified client certificate or bearer token (config.Tenant); a request
// without one goes to the default group (or, with tenant.require, is
// refused), and the backend is told the tenant the gateway used
// (tenant.header). The
// request's body is then received whole (body.max_bytes; in memory up to
// body.buffer_bytes, in a temporary file beyond), and only then is the
// request admitted, with Executor.Do, in its tenant's group, under the
// limits and share the config gives that tenant. The backend's answer is
// kept (up to response.buffer_bytes) and the slot released before the
// client is sent it; a longer answer is streamed, holding the slot until
// the client has it. So a slot is held only while a backend works: a slow
// client costs a connection and memory, never capacity. What the client
// sees:
//
//   - 429 with Retry-After and a JSON body naming the limit, when the
//     executor refuses the request (a full bulkhead or queue, a queue
//     timeout) or the tenant is over its rate limit;
//   - 503 with Retry-After when every backend's circuit breaker is open
//     (or the tenant's, with breaker.per: tenant) or the gateway is
//     draining; a backend whose breaker is open is skipped while others
//     serve, and its open time backs off from breaker.timeout to
//     breaker.max_timeout while its probes fail; and, on plain HTTP, for
//     a new connection while the client's address holds
//     max_conns_per_client busy ones, and for a body that would take the
//     bytes held in spool files over body.spool_max_bytes, or its
//     client address's over body.spool_max_bytes_per_client;
//   - 401 for a refused bearer token, two Authorization headers or an
//     access_token query parameter (one in the body is not looked for:
//     the gateway never parses a body's fields), or a token or client
//     certificate that names no tenant (an empty claim or common name),
//     and, with tenant.require, for a request without a bearer token in
//     Authorization;
//   - 501 for CONNECT, TRACE and TRACK, in any case, for HEAD in another
//     case (head), and for a method override naming one of them, or
//     naming HEAD on a request other than a HEAD, in a header or a _method
//     query parameter (not in the body), which are never proxied; 505 for
//     the HTTP/2 connection preface on an HTTP/1 connection (HTTP/2 is
//     served over TLS only); 400 for an HTTP/2 request whose method is no
//     token, or whose query has a space, which net/http refuses over
//     HTTP/1 itself;
//   - 502 when the backend fails, 504 when it misses the request's deadline
//     or the deadline passes while the request waits in its group;
//   - 413 for a body over the cap (as received, or decoded), 415 for a
//     Content-Encoding other than gzip, x-gzip, deflate and identity, or
//     more than two stacked, 408 for a body not received within
//     timeouts.read, 400 for a body whose chunks are malformed or that
//     does not decode, 400 for an invalid tenant key (or, with
//     tenant.require, a request naming none), 500 when the body cannot be
//     stored in body.spool_dir;
//   - no answer, its connection closed (its stream reset, over HTTP/2),
//     for a request whose client went away: while it sent its body, waited
//     in the queue or was at the backend (counted as 499, as nginx does);
//   - 200 with no body, from the gateway itself, for OPTIONS * and for
//     OPTIONS with Max-Forwards: 0;
//   - in plain text, from net/http before the gateway sees the request,
//     its connection then closed (over HTTP/1; docs/gateway.md says what
//     HTTP/2 does instead): 431 for headers over the cap, 400 for a
//     request it cannot read (or plain HTTP on a TLS address), 417 for an
//     Expect other than 100-continue, 501 for a Transfer-Encoding other
//     than chunked alone, and 505 for an HTTP version other than 1.x.
//
// Every request has one deadline, timeouts.upstream from the moment its body
// is in: time in the queue, every try and every backoff fit inside it. A
// backend given less than half of it (the rest spent in the queue or on
// earlier tries) is not failed for missing it, so that a long queue under
// one tenant's load does not open the breakers of a backend that answers
// as fast as ever.
// Requests with an idempotent method (and a method override, if any,
// naming one) and no body are retried on transport errors, at most 3
// tries, with jittered exponential backoff (50-100 ms, doubling, capped at
// 2 s), each try on the next backend whose breaker lets it through; any
// other request is sent once, net/http's transport kept from sending it
// again. A tenant over its rate limit (golang.org/x/time/rate) is
// refused before its body is read; every refusal's Retry-After comes from
// the state that refused (the bucket's delay, the breaker's time left, the
// queue's depth over its drain rate).
//
// Tenant keys are attacker-controlled, so the gateway bounds what they can
// cost: at most tenant.max_groups unconfigured tenants have groups of their
// own at once (a tenant holds its place only from the end of its request's
// body to the backend's answer, so slow clients hold none), the rest share
// the overflow group OverflowGroup, idle groups
// are reclaimed, and metrics give series only to configured tenants, the
// default group and the overflow group.
//
// Reload (SIGHUP in the groupexec command, POST /reload on the admin
// address) applies a new config in place, through the executor's runtime
// limit API; a bad file, or one changing a key that needs a restart, is
// refused whole (400 from /reload, which answers 409 on a gateway built
// without a config file to read). Once the gateway is closed, a reload is
// refused with ErrClosed (503 from /reload).
//
// Serve drains on cancellation: /readyz fails first (and for drain_delay the
// gateway still serves), the proxy listener stops accepting, in-flight
// requests have drain_timeout to finish, and those still running then are
// cancelled and counted in tasks_aborted_total{kind="request"}.
//
// docs/gateway.md describes all of it, with the threat the tenant trust
// model answers and every metric. The examples (example_test.go), run by
// go test, show New serving a tenant's request and refusing one that names
// none (ExampleNew), and Serve proxying a request to a backend and
// draining (ExampleGateway_Serve).
package gateway
