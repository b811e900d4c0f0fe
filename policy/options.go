package policy

import "time"

// An Option sets one field of a Policy. Options are applied by New, in order.
type Option interface {
	apply(*Policy) error
}

type optionFunc func(*Policy) error

func (f optionFunc) apply(p *Policy) error { return f(p) }

// What valid values look like, for OptionError.Reason.
const (
	limitReason     = "a limit must be >= 1 (policy.Unlimited for none)"
	thresholdReason = "a queue threshold must be >= 0 (policy.Unlimited for none)"
	shareReason     = "a share must be >= 1"
)

func limit(name string, n int, set func(*Policy)) Option {
	return optionFunc(func(p *Policy) error {
		if n < 1 {
			return &OptionError{Option: name, Value: n, Reason: limitReason}
		}
		set(p)
		return nil
	})
}

func threshold(name string, n int, set func(*Policy)) Option {
	return optionFunc(func(p *Policy) error {
		if n < 0 {
			return &OptionError{Option: name, Value: n, Reason: thresholdReason}
		}
		set(p)
		return nil
	})
}

func share(name string, n int, set func(*Policy)) Option {
	return optionFunc(func(p *Policy) error {
		if n < 1 {
			return &OptionError{Option: name, Value: n, Reason: shareReason}
		}
		set(p)
		return nil
	})
}

// groupValue validates a per-group override with check, which is limit,
// threshold or share.
func groupValue(name, group string, n int, check func(string, int, func(*Policy)) Option, m func(*Policy) *map[string]int) Option {
	if group == "" {
		return optionFunc(func(*Policy) error {
			return &OptionError{Option: name, Value: `""`, Reason: "the group key must not be empty"}
		})
	}
	return check(name, n, func(p *Policy) { setGroup(m(p), group, n) })
}

// WithGlobalMaxInFlight bounds the permits running across all groups.
// n must be >= 1. Default: Unlimited.
func WithGlobalMaxInFlight(n int) Option {
	return limit("WithGlobalMaxInFlight", n, func(p *Policy) { p.globalMaxInFlight = n })
}

// WithMaxInFlightPerGroup is every group's bulkhead: the permits a group may
// have admitted, waiting plus running. n must be >= 1. Default: 1024.
func WithMaxInFlightPerGroup(n int) Option {
	return limit("WithMaxInFlightPerGroup", n, func(p *Policy) { p.maxInFlightPerGroup = n })
}

// WithMaxConcurrencyPerGroup bounds the permits a group may have running.
// n must be >= 1. Default: 1.
func WithMaxConcurrencyPerGroup(n int) Option {
	return limit("WithMaxConcurrencyPerGroup", n, func(p *Policy) { p.maxConcurrencyPerGrp = n })
}

// WithGroupMaxInFlight overrides the in-flight limit (bulkhead) of one group.
func WithGroupMaxInFlight(group string, n int) Option {
	return groupValue("WithGroupMaxInFlight", group, n, limit, func(p *Policy) *map[string]int { return &p.groupMaxInFlight })
}

// WithGroupMaxConcurrency overrides the concurrency limit of one group. It
// wins over the concurrency resolver.
func WithGroupMaxConcurrency(group string, n int) Option {
	return groupValue("WithGroupMaxConcurrency", group, n, limit, func(p *Policy) *map[string]int { return &p.groupMaxConcurrency })
}

// WithConcurrencyResolver supplies a group's concurrency limit when no
// per-group value is set. It is called when a group's state is about to be
// created (again after an eviction or reclamation; more than once if
// Submits for a new group race), never under an executor lock, and must be
// safe for concurrent use. Returning false falls back to the default;
// returning a value below 1 makes the executor reject the group's task with
// an error naming the resolver and value.
func WithConcurrencyResolver(f func(group string) (int, bool)) Option {
	return optionFunc(func(p *Policy) error {
		if f == nil {
			return &OptionError{Option: "WithConcurrencyResolver", Value: "nil", Reason: "the resolver must not be nil"}
		}
		p.concurrencyResolver = f
		return nil
	})
}

// WithDefaultShare sets every group's share of global capacity, unless a
// per-group value or the share resolver gives another. When global capacity
// frees and several groups have tasks waiting for it, each is served, over
// time, permits in proportion to its share (deficit round robin; see the
// executor's dispatch rules). n must be >= 1. Default: DefaultShare (1), so
// every group gets an equal share.
func WithDefaultShare(n int) Option {
	return share("WithDefaultShare", n, func(p *Policy) { p.defaultShare = n })
}

// WithGroupShare overrides the share of one group. It wins over the share
// resolver. n must be >= 1.
func WithGroupShare(group string, n int) Option {
	return groupValue("WithGroupShare", group, n, share, func(p *Policy) *map[string]int { return &p.groupShare })
}

// WithShareResolver supplies a group's share when no per-group value is set,
// so shares can come from configuration. It is called, as the concurrency
// resolver is, when a group's state is about to be created, never under an
// executor lock, and must be safe for concurrent use. Returning
// false falls back to the default; returning a value below 1 makes the
// executor reject the group's task with an error naming the resolver and
// value.
func WithShareResolver(f func(group string) (int, bool)) Option {
	return optionFunc(func(p *Policy) error {
		if f == nil {
			return &OptionError{Option: "WithShareResolver", Value: "nil", Reason: "the resolver must not be nil"}
		}
		p.shareResolver = f
		return nil
	})
}

// WithGlobalQueueThreshold bounds the tasks waiting across all groups.
// n must be >= 0; 0 means a task that cannot start at once is rejected.
// Default: Unlimited.
func WithGlobalQueueThreshold(n int) Option {
	return threshold("WithGlobalQueueThreshold", n, func(p *Policy) { p.globalQueueThreshold = n })
}

// WithQueueThresholdPerGroup bounds the tasks waiting in each group.
// n must be >= 0. Default: Unlimited (the group's in-flight limit still
// bounds its queue).
func WithQueueThresholdPerGroup(n int) Option {
	return threshold("WithQueueThresholdPerGroup", n, func(p *Policy) { p.queueThresholdPerGrp = n })
}

// WithGroupQueueThreshold overrides the queue threshold of one group.
func WithGroupQueueThreshold(group string, n int) Option {
	return groupValue("WithGroupQueueThreshold", group, n, threshold, func(p *Policy) *map[string]int { return &p.groupQueueThreshold })
}

// WithQueueTimeout bounds how long a task may wait before it starts; a task
// that waits longer is rejected and never runs. d must be >= 0; 0 (the
// default) means no timeout.
func WithQueueTimeout(d time.Duration) Option {
	return optionFunc(func(p *Policy) error {
		if d < 0 {
			return &OptionError{Option: "WithQueueTimeout", Value: d, Reason: "a timeout must be >= 0 (0 for none)"}
		}
		p.queueTimeout = d
		return nil
	})
}

// WithRejectionPolicy sets what happens to a task refused for lack of room.
// Default: Abort.
func WithRejectionPolicy(r RejectionPolicy) Option {
	return optionFunc(func(p *Policy) error {
		if !r.valid() {
			return &OptionError{Option: "WithRejectionPolicy", Value: r, Reason: "must be Abort, Discard, CallerRuns or DiscardOldest"}
		}
		p.rejection = r
		return nil
	})
}
