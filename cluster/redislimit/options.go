package redislimit

import (
	"strconv"
	"strings"
	"time"
)

// FailurePolicy is what a Holder does with a task that needs a permit from
// Redis when Redis cannot be reached. Permits already leased are used until
// their leases run out either way.
type FailurePolicy uint8

const (
	// FailClosed refuses the task: it completes Rejected with an error
	// matching ErrUnavailable; a task of a key whose whole limit is leased
	// here and in use waits for those permits instead, as one queued
	// before the outage does. No permit is granted without a lease, so
	// the cluster limit holds while Redis keeps its data and its clock,
	// except that: a Redis restart or failover that loses the leases (no
	// persistence, or a replica behind) lets new holders lease all N while
	// the old holders keep running on their leases until their next
	// renewal tells them (at most a renew interval, or their local
	// validity); a step forward of Redis's clock (TIME) of more than a
	// fifth of the TTL expires leases early and gives their slots away
	// while their holders still trust them; a process paused past its lease's local validity runs its
	// tasks on for a moment after it resumes (Valid and Fence guard their
	// writes); a task on a lost lease has its context cancelled but runs
	// until its Fn returns; and the executor's CallerRuns rejection policy
	// runs a rejected task in the caller, outside every limit, the cluster
	// limit included. Tokens rise across a failover only if the new
	// primary's clock is not behind (see FencingToken). The default.
	FailClosed FailurePolicy = iota + 1
	// FailOpen lets the task through on the executor's local limits alone:
	// the limiter grants a fallback permit (no lease, no fencing token),
	// counted in Stats.Fallbacks and reported by EventFallback. The cluster
	// limit may be exceeded by the fallback permits in use until they end.
	FailOpen
)

// String returns "fail-closed" or "fail-open".
func (p FailurePolicy) String() string {
	switch p {
	case FailClosed:
		return "fail-closed"
	case FailOpen:
		return "fail-open"
	}
	return "FailurePolicy(?)"
}

// Defaults.
const (
	DefaultPrefix       = "groupexec"
	DefaultLeaseTTL     = 10 * time.Second
	DefaultMaxBlock     = 16
	DefaultPollInterval = 50 * time.Millisecond
)

// An Option configures a Holder.
type Option interface{ apply(*config) error }

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

type config struct {
	prefix    string
	ttl       time.Duration
	renew     time.Duration // 0: ttl/3
	poll      time.Duration // 0: min(DefaultPollInterval, renew)
	opTimeout time.Duration // 0: min(ttl/4, 1s)
	maxBlock  int
	policy    FailurePolicy
	listener  func(Event)
	holderID  string
}

func defaults() config {
	return config{prefix: DefaultPrefix, ttl: DefaultLeaseTTL, maxBlock: DefaultMaxBlock, policy: FailClosed}
}

// WithPrefix sets the prefix of every Redis key the holder uses. Holders
// share limits exactly when they share the prefix (and the Redis). Default:
// DefaultPrefix.
//
// A limit's keys share a Redis Cluster hash tag, {scope:key} after the
// prefix, so that a cluster keeps them on one node, as its scripts need. A
// prefix with a tag of its own ("app{1}") puts every limit's keys on that
// tag's node; one whose first '{' is followed by '}' ("app{}") makes the
// tag empty, each key hashed whole, and is refused: a limit's keys would
// be spread over nodes, and every script refused (CROSSSLOT).
func WithPrefix(p string) Option {
	return optionFunc(func(c *config) error {
		if p == "" {
			return &OptionError{"WithPrefix", `""`, "the prefix must not be empty"}
		}
		if i := strings.IndexByte(p, '{'); i >= 0 && strings.HasPrefix(p[i+1:], "}") {
			return &OptionError{"WithPrefix", strconv.Quote(p), `an empty hash tag ("{}") spreads a limit's keys over a cluster's nodes`}
		}
		c.prefix = p
		return nil
	})
}

// WithLeaseTTL sets how long a lease lives in Redis without renewal: the
// longest a crashed or partitioned holder's permits stay unusable. A live
// holder considers a lease lost at 80% of it after its last successful
// renewal was sent, so that a live holder cancels its tasks before Redis
// can give the slot to another holder (a paused one cannot: see Valid and
// Fence). d must be at least 100ms. Default: DefaultLeaseTTL.
func WithLeaseTTL(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d < 100*time.Millisecond {
			return &OptionError{"WithLeaseTTL", d, "must be >= 100ms"}
		}
		c.ttl = d
		return nil
	})
}

// WithRenewInterval sets the period of the holder's one renewal loop, which
// renews every lease it holds and returns the permits it has not needed
// since the last round. It is also the quantum of contention: a holder
// keeps a block it was granted that long before it gives back what it holds
// above its share. d must be at least 1ms and at most a third of the lease
// TTL, so that two renewals can fail before a lease is lost. Default: TTL/3.
func WithRenewInterval(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return &OptionError{"WithRenewInterval", d, "must be > 0"}
		}
		if d < time.Millisecond {
			// Redis keeps a waiting record for two renew intervals, in
			// whole milliseconds: below 1ms, for none, and a refused
			// holder would never count as waiting (no share, no turn).
			return &OptionError{"WithRenewInterval", d, "must be >= 1ms"}
		}
		c.renew = d
		return nil
	})
}

// WithPollInterval sets the least time between two requests for a key
// that Redis refused, and how soon a failed request is retried. A refused
// key is asked for again when another holder gives back permits of it (a
// notice), and at every renewal round: not on a timer, but not more than
// once per d however often notices come. d must be > 0 and at most the
// renew interval: Redis keeps a refused holder's waiting record for two
// renew intervals, and a holder that asked again less often would drop out
// of the shares between its requests, the others keeping their permits as
// if no one waited. Default: DefaultPollInterval, or the renew interval if
// that is shorter.
func WithPollInterval(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return &OptionError{"WithPollInterval", d, "must be > 0"}
		}
		c.poll = d
		return nil
	})
}

// WithOpTimeout bounds every call to Redis, whatever the client's settings:
// the holder stops waiting for a call after d and counts it failed (three
// failures in a row and the holder is down). A go-redis client ignores
// context deadlines unless ContextTimeoutEnabled is set, so set it (or
// ReadTimeout and WriteTimeout at most d): then the call itself also ends
// at d and frees its connection, instead of running on in the background
// until the client's own timeouts. d must be > 0 and below the lease TTL's
// 80%. Default: min(TTL/4, 1s).
func WithOpTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return &OptionError{"WithOpTimeout", d, "must be > 0"}
		}
		c.opTimeout = d
		return nil
	})
}

// WithMaxBlock bounds the block of permits a holder leases at once for one
// key (the block grows from 1 by doubling while a key needs refills in
// quick succession, and halves when permits go unused). n must be >= 1.
// Default: DefaultMaxBlock.
func WithMaxBlock(n int) Option {
	return optionFunc(func(c *config) error {
		if n < 1 {
			return &OptionError{"WithMaxBlock", n, "must be >= 1"}
		}
		c.maxBlock = n
		return nil
	})
}

// WithFailurePolicy sets what happens when Redis cannot be reached:
// FailClosed (the default) or FailOpen.
func WithFailurePolicy(p FailurePolicy) Option {
	return optionFunc(func(c *config) error {
		if p != FailClosed && p != FailOpen {
			return &OptionError{"WithFailurePolicy", int(p), "must be FailClosed or FailOpen"}
		}
		c.policy = p
		return nil
	})
}

// WithListener sets a function that receives every Event. The holder's
// goroutines call it, each on a goroutine of its own that they wait for,
// never under a lock (neither the holder's nor an executor's), possibly
// concurrently; a panic in it is recovered, and a runtime.Goexit in it ends
// that goroutine only. It may call the holder's Close: Close then begins
// the close and returns without waiting for it (see Holder.Close), since
// the close waits for the goroutine that waits for the listener. For that
// reason it must never wait for a Close called on another goroutine (one
// it starts, or one it hands the work to): both would wait for ever.
func WithListener(f func(Event)) Option {
	return optionFunc(func(c *config) error {
		if f == nil {
			return &OptionError{"WithListener", "nil", "the listener must not be nil"}
		}
		c.listener = f
		return nil
	})
}

// WithHolderID names the holder in Redis (lease members start with it).
// Default: random. It must not be empty, must not contain ':', '|', ',' or
// '=' (they separate the parts of lease ids and contention notices, and the
// holders and caps a notice lists), and must be unique among live holders.
func WithHolderID(id string) Option {
	return optionFunc(func(c *config) error {
		if id == "" {
			return &OptionError{"WithHolderID", `""`, "must not be empty"}
		}
		if strings.ContainsAny(id, ":|,=") {
			return &OptionError{"WithHolderID", strconv.Quote(id), "must not contain ':', '|', ',' or '='"}
		}
		c.holderID = id
		return nil
	})
}

func (c *config) finish() error {
	if c.renew == 0 {
		c.renew = c.ttl / 3
	}
	if c.renew > c.ttl/3 {
		return &OptionError{"WithRenewInterval", c.renew, "must be at most a third of the lease TTL " + c.ttl.String()}
	}
	switch {
	case c.poll == 0:
		c.poll = min(DefaultPollInterval, c.renew)
	case c.poll > c.renew:
		return &OptionError{"WithPollInterval", c.poll, "must be at most the renew interval " + c.renew.String() +
			" (a refused holder's waiting record lasts two renew intervals)"}
	}
	if c.opTimeout == 0 {
		c.opTimeout = min(c.ttl/4, time.Second)
	}
	// 80% of the TTL as localValidity reckons it: ttl*4/5 overflows for a
	// TTL above about 73 years.
	if c.opTimeout >= c.ttl-c.ttl/5 {
		return &OptionError{"WithOpTimeout", c.opTimeout, "must be below 80% of the lease TTL " + c.ttl.String()}
	}
	return nil
}
