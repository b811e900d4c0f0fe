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

// resolver validates a resolver option: f must not be nil.
func resolver(name string, f func(string) (int, bool), set func(*Policy)) Option {
	return optionFunc(func(p *Policy) error {
		if f == nil {
			return &OptionError{Option: name, Value: "nil", Reason: "the resolver must not be nil"}
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
	o := check(name, n, func(p *Policy) { setGroup(m(p), group, n) })
	return optionFunc(func(p *Policy) error {
		err := o.apply(p)
		if oe, ok := err.(*OptionError); ok {
			// The same option is often given for many groups: say which.
			oe.Group = group
		}
		return err
	})
}

// WithGlobalMaxInFlight bounds the permits running across all groups.
// n must be >= 1. Default: Unlimited.
func WithGlobalMaxInFlight(n int) Option {
	return limit("WithGlobalMaxInFlight", n, func(p *Policy) { p.globalMaxInFlight = n })
}

// WithDefaultMaxInFlight sets every group's in-flight limit (its bulkhead):
// the permits a group may have admitted, waiting plus running, unless a
// per-group value or the in-flight resolver gives another. n must be >= 1.
// Default: DefaultMaxInFlight (1024).
func WithDefaultMaxInFlight(n int) Option {
	return limit("WithDefaultMaxInFlight", n, func(p *Policy) { p.defaultMaxInFlight = n })
}

// WithGroupMaxInFlight overrides the in-flight limit (bulkhead) of one
// group. It wins over the in-flight resolver. n must be >= 1.
func WithGroupMaxInFlight(group string, n int) Option {
	return groupValue("WithGroupMaxInFlight", group, n, limit, func(p *Policy) *map[string]int { return &p.groupMaxInFlight })
}

// WithMaxInFlightResolver supplies a group's in-flight limit when no
// per-group value is set, under the contract every resolver has (see
// WithMaxConcurrencyResolver). Returning a value below 1 makes the
// executor reject the group's task with an error naming the resolver and
// value.
func WithMaxInFlightResolver(f func(group string) (int, bool)) Option {
	return resolver("WithMaxInFlightResolver", f, func(p *Policy) { p.maxInFlightResolver = f })
}

// WithDefaultMaxConcurrency sets every group's concurrency limit: the
// permits a group may have running, unless a per-group value or the
// concurrency resolver gives another. n must be >= 1. Default:
// DefaultMaxConcurrency (1).
//
// A concurrency limit above the group's in-flight limit is accepted, here
// as from a per-group value, a resolver or GroupLimits: running tasks are
// admitted ones, so the group runs at most its in-flight limit's permits,
// while the executor's GroupStats reports MaxConcurrency as set.
func WithDefaultMaxConcurrency(n int) Option {
	return limit("WithDefaultMaxConcurrency", n, func(p *Policy) { p.defaultMaxConcurrency = n })
}

// WithGroupMaxConcurrency overrides the concurrency limit of one group. It
// wins over the concurrency resolver. n must be >= 1; above the group's
// in-flight limit it is accepted, and the in-flight limit bounds what runs
// (see WithDefaultMaxConcurrency).
func WithGroupMaxConcurrency(group string, n int) Option {
	return groupValue("WithGroupMaxConcurrency", group, n, limit, func(p *Policy) *map[string]int { return &p.groupMaxConcurrency })
}

// WithMaxConcurrencyResolver supplies a group's concurrency limit when no
// per-group value is set, so limits can come from configuration. Every
// resolver (this one, WithMaxInFlightResolver, WithQueueThresholdResolver,
// WithShareResolver) has the same contract: it is called when a group's
// state is about to be created (again after an eviction or reclamation;
// more than once if Submits for a new group race), never under an executor
// lock, and must be safe for concurrent use. Returning false falls back to
// the default; a per-group value wins over it. Returning a value below 1
// makes the executor reject the group's task with an error naming the
// resolver and value. A resolver that panics panics the caller that
// needed the group (Submit, Go, Do, ResetGroupLimits), before anything
// of the task is counted or held.
func WithMaxConcurrencyResolver(f func(group string) (int, bool)) Option {
	return resolver("WithMaxConcurrencyResolver", f, func(p *Policy) { p.maxConcurrencyResolver = f })
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
// so shares can come from configuration, under the contract every resolver
// has (see WithMaxConcurrencyResolver). Returning a value below 1 makes the
// executor reject the group's task with an error naming the resolver and
// value.
func WithShareResolver(f func(group string) (int, bool)) Option {
	return resolver("WithShareResolver", f, func(p *Policy) { p.shareResolver = f })
}

// WithGlobalQueueThreshold bounds the tasks waiting across all groups.
// n must be >= 0; 0 means a task that cannot start at once is rejected.
// Default: Unlimited.
func WithGlobalQueueThreshold(n int) Option {
	return threshold("WithGlobalQueueThreshold", n, func(p *Policy) { p.globalQueueThreshold = n })
}

// WithDefaultQueueThreshold sets every group's queue threshold: the tasks
// a group may have waiting, unless a per-group value or the queue threshold
// resolver gives another. n must be >= 0; 0 means a task of the group that
// cannot start at once is refused. Default: DefaultQueueThreshold
// (Unlimited: the group's in-flight limit still bounds its queue).
func WithDefaultQueueThreshold(n int) Option {
	return threshold("WithDefaultQueueThreshold", n, func(p *Policy) { p.defaultQueueThreshold = n })
}

// WithGroupQueueThreshold overrides the queue threshold of one group. It
// wins over the queue threshold resolver. n must be >= 0.
func WithGroupQueueThreshold(group string, n int) Option {
	return groupValue("WithGroupQueueThreshold", group, n, threshold, func(p *Policy) *map[string]int { return &p.groupQueueThreshold })
}

// WithQueueThresholdResolver supplies a group's queue threshold when no
// per-group value is set, under the contract every resolver has (see
// WithMaxConcurrencyResolver), except that 0 is a valid answer, as for
// every queue threshold: returning a value below 0 makes the executor
// reject the group's task with an error naming the resolver and value.
func WithQueueThresholdResolver(f func(group string) (int, bool)) Option {
	return resolver("WithQueueThresholdResolver", f, func(p *Policy) { p.queueThresholdResolver = f })
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
