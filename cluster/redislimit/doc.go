// Package redislimit keeps the executor's global and per-group limits in
// Redis, so that "at most 200 running for tenant X" holds across every
// process that shares the Redis and the key prefix, not per process.
//
//	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", MaxRetries: -1, ContextTimeoutEnabled: true})
//	h, err := redislimit.New(rdb, redislimit.WithPrefix("api"), redislimit.WithFailurePolicy(redislimit.FailClosed))
//	if err != nil { ... }          // an *OptionError names the option and value
//	defer h.Close()                // after the executor's Close
//	ex, err := executor.New(p,
//		executor.WithGlobalLimiter(h.Global(1000)), // 1000 running across the fleet
//		executor.WithGroupLimiter(h.Groups(200)),   // 200 per tenant across the fleet
//	)
//	if err != nil { return err }
//	defer ex.Close()               // deferred after h.Close, so it runs first
//
// The executor's admission model is unchanged: the cluster limits only
// supply permits. A task starts when its group's local limits, the global
// local limit and the cluster permits all allow it; otherwise it waits in
// its group's queue as for any limit (queue timeouts, cancellation and fair
// dispatch apply).
//
// # Leases
//
// A holder's permits are leases: members of a sorted set per key scored by
// their expiry, taken, renewed and given back by Lua scripts that read the
// time from Redis (TIME), never from a client. Each leased permit is a slot
// of the key, 0..limit-1, held by one live lease at a time. A crashed or
// partitioned holder's slots come back when its leases expire, after at
// most the lease TTL (WithLeaseTTL). A live holder renews all its leases
// every renew interval, from one goroutine per process (the renewal loop),
// whatever the number of tasks: in one pipelined round trip per 128 keys,
// each bounded by the op timeout, so that a holder of many keys renews as
// surely as a holder of few.
//
// # What a task can rely on
//
// A holder trusts a lease for 80% of the TTL after the request that last
// renewed it was sent; every call to Redis is bounded by WithOpTimeout,
// whatever the client's settings. A live process that cannot renew (cut
// off from Redis, Redis down or stalled) therefore loses the lease here
// before Redis can give the slot to anyone else: the context of every task
// running on it is cancelled with a *LeaseLostError (matching ErrLeaseLost,
// readable with context.Cause). A lease Redis no longer has (Redis
// restarted empty) is lost the same way at the next renewal. A task that
// runs on after that runs outside the limit: its slot is free in Redis
// (the holder gives the lost lease back, or it expires) and no holder
// counts it, so that another task, of this process or another, may be
// given the slot meanwhile. A task ends when its context does, or checks
// Valid and fences its writes (below).
//
// A paused process (SIGSTOP, a frozen VM or container, a long stall) can
// promise nothing: its slots are given away while it is stopped, and its
// tasks run on for a moment after it resumes, before their cancellation.
// Valid (and ValidUntil) tells a task whether its lease still holds by the
// monotonic clock, which counts the pause: check it right before a write.
// A pause can still fall between the check and the write; a downstream
// closes that gap with fencing: every lease has a fencing token, greater
// for every later lease of the key (also across a restart of a Redis
// without persistence, and after the key was idle for twice the TTL, when
// its counter expires with its other keys: the counter restarts from
// Redis's clock in microseconds), and Fencing gives the task's token and
// slots. A
// downstream that keeps the greatest token it accepted per slot and
// refuses smaller ones refuses the writes of a lost lease once the slot's
// new holder has written, whatever the limit (see Fence).
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
// # Contention
//
// A block held by one process is capacity the others cannot use until it
// is given back or expires. A process refused a block is recorded in Redis
// as waiting, and the limit is then split between the contenders (every
// holder that holds permits of the key or waits for some), max-min fair:
// one that holds little and does not ask for more keeps it, the rest is
// split evenly, and what does not split evenly goes one permit each to the
// contenders served longest ago. So with limit 1 a permit freed while
// another holder waits for it goes to that holder (a holder waits only
// while a task of it asks for the key).
//
// Redis grants a holder no more than its share (its cap) while others wait.
// It tells each holder its cap in every reply, and publishes the caps with
// every refusal, and with every grant while others still wait (pub/sub, one
// channel per prefix). Such a notice carries the key, a version, and every
// contender with its cap, marked if it waits, and if it waits for room
// below an even split (deprived): each holder reads there what a reply
// would tell it, how many holders other than itself wait, how many of
// those are deprived, and its own cap (a grant while only the listener
// still waits tells it that no one else does). A holder above its cap
// gives the excess back as its tasks finish, once it has held its last
// block for a quantum (the renew interval), so that a block's tasks get to
// run and a contended key's permits change hands once a quantum, not once
// a round trip. Permits no
// task has used for a poll interval go back at once while another holder
// waits for room below an even split. Under a full global limit that
// includes the permits of a key whose next task waits for a global permit
// (the executor asks for it first, and asks for nothing of the key
// meanwhile): there a contended key's permits change hands after every
// task, not once a quantum.
//
// A give-back while others wait is published too, and the refused holders
// ask again then (at most once per poll interval), and at every renewal
// round, rather than polling; a holder that no longer waits ends its
// waiting record (again, if that call fails). The executor does not tell a
// limiter that a waiting task gave up (its context ended, or its queue
// timeout fired): before a holder asks again for a refused key no task has
// asked for since its last request, it has the executor dispatch the key,
// and ends the record if no task asks within a poll interval. So a record
// whose tasks all gave up ends a poll interval after the next notice or
// renewal round. A waiting task served here, from permits a task of the
// key released (whether the executor or the holder's refiller gets to it
// first), ends the record at once. When the last wait ends (served, or its record ended),
// that is published too: the holders of the key hear that nobody waits,
// and keep their permits again.
//
// A notice missed (a dropped subscription) costs at most one renew
// interval. Notices and replies come by different connections, in no
// order: each tells the shares as of a version of the key, and a holder
// ignores what is older than what it last heard.
//
// Steady load costs a few round trips per renewal round, not per task;
// contention costs more, about one refusal and one give-back per key and
// quantum, and keys leased for few tasks cost a refill each.
// Stats.RoundTrips counts them; docs/cluster.md has measurements.
//
// # When Redis cannot be reached
//
// Permits already leased serve tasks until their leases are lost. A failed
// call is retried (a refill at the poll rate); the holder is down
// (ModeDown) only after three calls in a row failed, each within the op
// timeout, and up again at the first call that succeeds: the renewal loop
// probes Redis every renew interval while it is down, so an outage is seen
// as over within about one renew interval.
//
// While the holder is down, the failure policy (WithFailurePolicy) applies
// to every task that needs a permit it has no lease for: FailClosed (the
// default) refuses it (it completes Rejected, matching ErrUnavailable and
// executor.ErrRejected, whatever the executor's rejection policy), unless
// the whole limit of its key is leased here and in use, when it waits for
// those leases' permits as a task queued before the outage does; FailOpen
// lets it run under the executor's local limits alone, on a fallback permit
// without a lease or token, so the cluster limit can be exceeded until those
// tasks end. This applies to tasks already queued as well as to new ones:
// when the holder goes down, the executors of every key with a task waiting
// for a refill are told at once (while down, no call to Redis is made for
// them: the holder's waiting records for those keys are ended once Redis
// answers again), dispatch again, and each head that then asks is refused
// (FailClosed) or runs (FailOpen); with the global limiter that is the head
// of every group's queue, then the next ones, until the outage is over.
// Permits due back meanwhile (above a lowered limit or a share) are not
// sent back while down, so that no call to an unreachable Redis holds up
// those notices; a renewal round, or the first answer once Redis is back,
// gives them back.
// Stats reports the mode (ModeUp, ModeDown; ModeClosed after Close), the
// policy, and counts every fallback, refusal, outage and lost lease (not
// the leases Close gives back); a listener (WithListener)
// receives EventUnavailable, EventRecovered, EventFallback, EventRejected
// and EventLeaseLost (and EventKeyFailed, below).
//
// A listener may call Close, which then returns at once and closes the
// holder on a goroutine of its own; but it must never wait for a Close
// called on another goroutine (one it starts, or one it hands the work
// to): that Close waits for the holder's goroutine that waits for the
// listener, and neither returns. A listener that wants its holder closed
// calls Close itself, or starts a goroutine that does and returns without
// waiting for it (see Holder.Close).
//
// A reply lost after Redis executed an acquire (the connection dropped, or
// the op timeout abandoned the call) leaves a lease no one here knows of,
// up to a block of permits kept from every holder: the holder gives it
// back by its id with its next call for the key (once Redis answers, if
// the holder is down; at Close, at the latest), rather than let it expire
// after the TTL. That give-back frees that lease's slots alone (none, if
// it expired meanwhile or was never granted: not the slots another holder
// was leased since), and makes the acquire, should it reach Redis only
// then, lease nothing. A lease the holder gives back whole (its permits
// unused for a renewal round, or above its share; a block granted too
// late to use; a lease lost here that Redis still held) whose give-back
// fails is given back by its id the same way. A call the op timeout
// abandoned may still reach
// Redis later, after the holder's next ones: Redis numbers each process's
// acquires and ends of waiting records of a key, and one that comes after
// a later one of the same process does nothing (a late acquire leases
// nothing and records no wait; a late end of a wait ends no newer one).
// Nothing orders the calls of two processes of one holder id (a process
// restarted with the same WithHolderID): a waiting record is the process's
// that made it, and a late call of the other neither ends nor changes it
// (a late acquire may still lease permits no one uses, which expire after
// the TTL). A record that a process leaves behind expires within two renew
// intervals, as a crashed holder's does.
//
// Configure the go-redis client without retries (MaxRetries: -1) and with
// ContextTimeoutEnabled: true, so that a call the op timeout ends also ends
// in the client and frees its connection. A client with retries (go-redis
// retries a pipeline whose replies were lost 3 times by default) sends an
// acquire again after its reply was lost: Redis runs it once, and answers
// the second that it ran before; the holder takes that answer for a lost
// reply (the lease, if the first run granted one, is given back by its id,
// and the key asked for again), not for a refusal.
//
// A Redis that lost its scripts (SCRIPT FLUSH, a restart, a failover to a
// replica that never ran them) refuses a call by the script's SHA1
// (NOSCRIPT) without running it: the holder sends it again with its
// script, in a round trip of its own, so that it runs once. Redis may know
// one script and not another (another holder's call has loaded it again),
// or lose them between two calls of one round trip, so the calls re-sent
// run after later ones that were not: the holder's calls of different
// keys, and its renewals, give-backs and ends of waiting records of one
// key, mean the same in any order; an acquire does not, and is never sent
// in the round trip of a give-back of its key (of a lease whose grant's
// reply was lost, say) sent with it, but once that give-back has been
// answered: it is granted the room that give-back frees, rather than
// refused for it and its holder recorded as waiting.
//
// The exception to the limit: a Redis restart or failover that loses the
// leases (no persistence, or a replica behind) lets holders lease the whole
// limit again while the old holders keep running on their leases until
// their next renewal tells them (at most a renew interval, or their local
// validity): up to twice the limit for that long. FailClosed lists the
// others.
//
// Redis's clock. Leases expire, and the scripts judge every time, by the
// clock of the Redis host (TIME, and its key expiries), while a holder
// times its trust in a lease by its own monotonic clock: the two must run
// at about the same rate, and Redis's must never step. A step forward by J
// shortens the life in Redis of every lease by J: past a fifth of the TTL,
// a slot can be leased again while its holder still trusts it (and Valid
// still says so), until that holder's next renewal finds the lease gone
// (fencing still refuses the old lease's writes: tokens are at least
// Redis's time in µs); past what the leases have left, every holder loses
// them at its next renewal; past twice the TTL, Redis expires the keys
// themselves, as if it had lost its data. A step back keeps a crashed
// holder's slots, and a gone holder's waiting record, J longer, and the
// next token of a key idle for more than twice the TTL (its counter
// expired) but less than J can be smaller than its last. No holder
// can see a step before its next call: run the Redis hosts with a clock
// that slews, never steps (docs/cluster.md, "Redis's clock").
//
// The scripts need Redis 5.0 or later: each reads TIME and then writes,
// which a Redis before 5.0 refuses (unless a script calls
// redis.replicate_commands), as does a 5.x or 6.x run with
// lua-replicate-commands no. Such a Redis refuses every call alike: the
// holder counts it as an outage (ModeDown after three calls, its failure
// policy applies, and ErrUnavailable carries the reply), never as a reply.
//
// An error reply that is no outage (WRONGTYPE: a key under the prefix holds
// a value of another type) is Redis's answer for one key (every script
// checks its keys before its first write, since Redis does not roll back a
// script that fails midway: the call leaves nothing half done): the holder
// stays up, and the key's tasks that no lease here serves are refused with
// ErrKeyFailed, which names the key and carries the reply, for a renew
// interval; the first task of the key to ask after that asks Redis again.
// Such a reply comes again at every call until the key is fixed: asked at
// the poll rate, the key's tasks would wait for ever. Stats.KeyFailed
// counts these refusals, and EventKeyFailed reports them (with the reply),
// as EventRejected reports the refusals of an outage.
//
// All holders sharing a prefix must be given the same limits and TTL. A
// limit GroupsFunc changes at runtime is read again at every renewal round,
// busy groups' too: until every holder has read it, each is granted
// against the limit it asks with (the larger, at worst); a lowered one
// holds across the holders once the permits leased before it, given back
// as their tasks end, are within it (see GroupsFunc).
// The Redis keys, their layout and the scripts are described in scripts.go.
// Redis must not evict them: run it with maxmemory-policy noeviction (the
// default). The keys carry expiries, so a volatile-* policy may evict them
// too, and a lease table evicted without its counts (or the reverse) lets
// the limit be exceeded or keeps permits counted that no one holds. Every
// key of a limit key expires at most twice the TTL after the last call
// that wrote it: a group key made up by a client costs Redis memory that
// long only.
//
// # Rolling out a new version
//
// Holders of one prefix must also run versions that read the Redis keys
// alike: a version whose layout or scripts change what a key holds (its
// changelog says so) misreads the keys an older one writes, and the other
// way round. Roll such a version out under a new prefix (WithPrefix;
// DefaultPrefix is every version's, so holders left on it need one too).
// The two prefixes are two limits, each with its own leases, waiting
// records and contention notices, and the new one starts empty: while both
// versions run, each lets its own processes lease the whole limit, so
// that together they can run twice it. Where that matters, give each
// prefix its part of the limit for the rollout (Groups, GroupsFunc,
// Global), and the whole to the new one once the old processes are gone;
// the old prefix's keys expire twice the TTL after its last call.
//
// A version whose contention notices differ (the changelog says so) reads
// the keys alike, but ignores the notices of the older one, which ignores
// its: under one prefix, the holders of either learn of the other's
// refusals and grants at their renewal rounds only, as if the notices were
// missed (a renew interval at most, each time).
//
// Fencing tokens of the two prefixes come from counters of their own.
// Both rise with Redis's clock, so a lease taken under one is fenced by a
// later one under the other: a downstream that keeps its greatest token
// per key and slot alone refuses the writes of the version whose lease of
// the slot is older, though both leases are live. During the rollout it
// keeps its tokens per prefix (and key and slot), as for two limits.
//
// A Holder keeps every Limiter attached to it until Close (its renewal loop
// serves them all): make one Holder per process and Limiters for
// long-lived executors, not one per short-lived executor.
//
// Example (example_test.go), run by go test against a real redis-server,
// shares one tenant's limit between two executors.
package redislimit
