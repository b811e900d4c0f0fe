// Package redislimit keeps the executor's global and per-group limits in
// Redis, so that "at most 200 running for tenant X" holds across every
// process that shares the Redis and the key prefix, not per process.
//
//	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
//	h, err := redislimit.New(rdb, redislimit.WithPrefix("api"), redislimit.WithFailurePolicy(redislimit.FailClosed))
//	if err != nil { ... }          // an *OptionError names the option and value
//	defer h.Close()                // after the executor's Close
//	ex, err := executor.New(p,
//		executor.WithGlobalLimiter(h.Global(1000)), // 1000 running across the fleet
//		executor.WithGroupLimiter(h.Groups(200)),   // 200 per tenant across the fleet
//	)
//
// The executor's admission model is unchanged: the cluster limits only
// supply permits. A task starts when its group's local limits, the global
// local limit and the cluster permits all allow it; otherwise it waits in
// its group's queue as for any limit (queue timeouts, cancellation and fair
// dispatch apply).
//
// # Leases
//
// A holder's slots are leases: members of a sorted set per key scored by
// their expiry, taken, renewed and given back by Lua scripts that read the
// time from Redis (TIME), never from a client. A crashed or partitioned
// holder's slots come back when its leases expire, after at most the lease
// TTL (WithLeaseTTL). A live holder renews all its leases in one pipelined
// round trip per renew interval, from one goroutine per process (the
// renewal loop), whatever the number of tasks and keys.
//
// A holder trusts a lease for 80% of the TTL after the request that last
// renewed it was sent. If it could not renew by then (it was paused, cut
// off from Redis, or Redis is down), the lease is lost here before Redis
// can give the slot to anyone else: the context of every task running on it
// is cancelled with a *LeaseLostError (matching ErrLeaseLost), readable with
// context.Cause. A lease Redis no longer has (Redis restarted empty) is lost
// the same way at the next renewal.
//
// Every lease carries a fencing token, FencingToken(ctx) in the task: a
// number from a per-key counter in Redis, greater for every lease taken
// later, also across a restart of a Redis without persistence (the counter
// restarts from Redis's clock in microseconds). Tokens are per lease, and a
// lease is a block of permits: with limit 1 only one lease of a key is
// valid at a time, and a downstream that records the greatest token it has
// seen for the key and refuses smaller ones refuses a holder whose lease
// was lost, even one that was paused and does not know yet. With a larger
// limit several leases are valid at once with different tokens, so that
// rule would refuse live ones: there a token identifies a lease, it does
// not fence (see FencingToken).
//
// # The local fast path, and its cost
//
// A task does not pay a round trip to Redis. A holder leases permits for a
// key in blocks and hands them to tasks locally (TryAcquire under the
// executor's lock, without I/O); a finished task's permit serves the next
// task of the same key at once. Only when a key has no permit at hand does
// the refiller lease another block in the background and tell the executor
// to dispatch again. The block size adapts to the key's rate: it starts at
// one permit, doubles each time the key needs another block within a renew
// interval (up to WithMaxBlock), and halves when permits went unused.
// Permits that no task needed during a whole renewal round go back to Redis
// with the renewal.
//
// The trade-off: a block held by one process is capacity the others cannot
// use until it is given back (at the next renewal round at the latest) or
// expires: a process that dies keeps its blocks for up to the lease TTL. A
// process that is refused a block is recorded in Redis as waiting and
// publishes the refusal (pub/sub, one channel per prefix); every holder of
// the key that hears it gives back the permits none of its tasks is using.
// While others wait, Redis grants a holder no more than an even share of the
// limit, and holders above that share give permits back as their tasks
// finish instead of reusing them. A notice missed (a dropped subscription)
// costs at most one renew interval: the renewal round also reports waiters
// and returns permits that went unused. Smaller TTLs and renew intervals make
// capacity move faster, at the price of more round trips. Steady load costs
// a few round trips per renewal round, not per task (Stats.RoundTrips;
// benchmarks/README.md measures it).
//
// # When Redis cannot be reached
//
// Permits already leased serve tasks until their leases are lost. A failed
// call is retried (a refill at the poll rate; so is a refused one, however
// often other holders' refusals wake this one); the holder is down (ModeDown)
// only after three calls in a row failed, and up again at the first call
// that succeeds: the renewal loop probes Redis every renew interval while it
// is down, so an outage is seen as over within about one renew interval.
//
// While the holder is down, the failure policy (WithFailurePolicy) applies
// to every task that needs a permit it has no lease for: FailClosed (the
// default) refuses it (it completes Rejected, matching ErrUnavailable and
// executor.ErrRejected, whatever the executor's rejection policy); FailOpen
// lets it run under the executor's local limits alone, on a fallback permit
// without a lease or token, so the cluster limit can be exceeded until those
// tasks end. This applies to tasks already queued as well as to new ones:
// when the holder goes down, the executors of every key with a task waiting
// for a refill are told at once (while down, no call to Redis is made for
// them), dispatch again, and
// each head that then asks is refused (FailClosed) or runs (FailOpen); with
// the global limiter that is the head of every group's queue, then the
// next ones, until the outage is over. Stats reports the mode (ModeUp, ModeDown),
// the policy, and counts every fallback, refusal, outage and lost lease; a
// listener (WithListener) receives EventUnavailable, EventRecovered,
// EventFallback, EventRejected and EventLeaseLost. The renewal loop probes
// Redis while it is down and the holder returns to leasing as soon as it
// answers.
//
// A reply lost after Redis executed an acquire leaves a lease no one uses:
// it expires after the TTL. Configure the go-redis client without retries
// (MaxRetries: -1) and with timeouts below the lease TTL; every call is also
// bounded by WithOpTimeout.
//
// All holders sharing a prefix must be given the same limits and TTL. The
// Redis keys, their layout and the scripts are described in scripts.go.
// Redis must not evict them: run it with maxmemory-policy noeviction (the
// default). The keys carry expiries, so a volatile-* policy may evict them
// too, and a lease table evicted without its counts (or the reverse) lets
// the limit be exceeded or keeps permits counted that no one holds.
//
// A Holder keeps every Limiter attached to it until Close (its renewal loop
// serves them all): make one Holder per process and Limiters for
// long-lived executors, not one per short-lived executor.
package redislimit
