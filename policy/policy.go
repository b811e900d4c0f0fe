package policy

import (
	"fmt"
	"math"
	"time"
)

// Unlimited is the value of a limit or threshold that bounds nothing.
const Unlimited = math.MaxInt

// Defaults for the options not given to New. They are documented, with the
// reasons for each, in the README's limits table.
const (
	// DefaultGlobalMaxInFlight leaves the total unbounded: the per-group limits
	// already bound every tenant, and a safe global number depends on whether
	// tasks burn CPU or wait on I/O, which only the caller knows.
	DefaultGlobalMaxInFlight = Unlimited
	// DefaultMaxInFlight is every group's in-flight limit (its bulkhead)
	// unless WithDefaultMaxInFlight says otherwise: it bounds what one group
	// can have admitted, so an out-of-the-box executor never holds an
	// unbounded backlog for a tenant.
	DefaultMaxInFlight = 1024
	// DefaultMaxConcurrency is every group's concurrency limit unless
	// WithDefaultMaxConcurrency says otherwise: one task of a group runs at
	// a time, as the Java design does, since per-key serial execution is the
	// safe default for work that touches per-key state.
	DefaultMaxConcurrency = 1
	// DefaultQueueThreshold is every group's queue threshold, and the global
	// one, unless WithDefaultQueueThreshold or WithGlobalQueueThreshold says
	// otherwise: waiting is unbounded by count, since the group's in-flight
	// limit already bounds its queue.
	DefaultQueueThreshold = Unlimited
	// DefaultShare is a group's share of global capacity when the executor
	// divides it among groups waiting for it: with every group at the
	// default, each gets an equal share.
	DefaultShare = 1
)

// Policy is an immutable set of limits. Its zero value is not usable; build one
// with New. A Policy is safe for concurrent use.
type Policy struct {
	globalMaxInFlight      int
	globalQueueThreshold   int
	queueTimeout           time.Duration
	rejection              RejectionPolicy
	defaultMaxInFlight     int
	defaultMaxConcurrency  int
	defaultQueueThreshold  int
	defaultShare           int
	groupMaxInFlight       map[string]int
	groupMaxConcurrency    map[string]int
	groupQueueThreshold    map[string]int
	groupShare             map[string]int
	maxInFlightResolver    func(group string) (int, bool)
	maxConcurrencyResolver func(group string) (int, bool)
	queueThresholdResolver func(group string) (int, bool)
	shareResolver          func(group string) (int, bool)
}

// GroupLimits are the limits one group runs under, resolved once when the
// executor creates the group's state. They stay fixed until the group is
// evicted, unless the executor's SetGroupLimits changes them at runtime.
// Every field is meaningful, zero included: Validate tells which values are
// valid.
type GroupLimits struct {
	MaxInFlight    int // permits the group may have admitted (waiting + running)
	MaxConcurrency int // permits the group may have running
	QueueThreshold int // tasks the group may have waiting
	// Share is the group's weight when global capacity is divided among the
	// groups waiting for it: a group of share 3 is served 3 permits for every
	// permit a group of share 1 is served, while both have tasks waiting.
	Share int
}

// New builds a Policy from opts, applied in order. It returns an error
// matching ErrInvalidOption, naming the option and value, for the first
// invalid option.
func New(opts ...Option) (*Policy, error) {
	p := &Policy{
		globalMaxInFlight:     DefaultGlobalMaxInFlight,
		globalQueueThreshold:  DefaultQueueThreshold,
		defaultMaxInFlight:    DefaultMaxInFlight,
		defaultMaxConcurrency: DefaultMaxConcurrency,
		defaultQueueThreshold: DefaultQueueThreshold,
		defaultShare:          DefaultShare,
		rejection:             Abort,
	}
	for _, o := range opts {
		if o == nil {
			return nil, &OptionError{Option: "New", Value: "nil Option", Reason: "options must not be nil"}
		}
		if err := o.apply(p); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// GlobalMaxInFlight is the number of permits that may be running across all
// groups.
func (p *Policy) GlobalMaxInFlight() int { return p.globalMaxInFlight }

// GlobalQueueThreshold is the number of tasks that may be waiting across all
// groups.
func (p *Policy) GlobalQueueThreshold() int { return p.globalQueueThreshold }

// QueueTimeout is the longest a task may wait before it starts; 0 means no
// limit.
func (p *Policy) QueueTimeout() time.Duration { return p.queueTimeout }

// RejectionPolicy is what happens to a task that is refused for lack of room.
func (p *Policy) RejectionPolicy() RejectionPolicy { return p.rejection }

// Group resolves the limits for group. For each of them a per-group value
// (WithGroup…) wins over the resolver (With…Resolver), which wins over the
// default (WithDefault…). It calls the resolvers of the limits without a
// per-group value, and returns an *OptionError, matching ErrInvalidOption,
// naming the resolver (Option), the group (Group) and the value (Value),
// when one answers with an invalid value (below 1; below 0 for the queue
// threshold).
func (p *Policy) Group(group string) (GroupLimits, error) {
	var l GroupLimits
	var err error
	if l.MaxInFlight, err = resolve(group, p.groupMaxInFlight, p.maxInFlightResolver, p.defaultMaxInFlight, "WithMaxInFlightResolver", 1, limitReason); err != nil {
		return GroupLimits{}, err
	}
	if l.MaxConcurrency, err = resolve(group, p.groupMaxConcurrency, p.maxConcurrencyResolver, p.defaultMaxConcurrency, "WithMaxConcurrencyResolver", 1, limitReason); err != nil {
		return GroupLimits{}, err
	}
	if l.QueueThreshold, err = resolve(group, p.groupQueueThreshold, p.queueThresholdResolver, p.defaultQueueThreshold, "WithQueueThresholdResolver", 0, thresholdReason); err != nil {
		return GroupLimits{}, err
	}
	if l.Share, err = resolve(group, p.groupShare, p.shareResolver, p.defaultShare, "WithShareResolver", 1, shareReason); err != nil {
		return GroupLimits{}, err
	}
	return l, nil
}

// String describes the policy's defaults, for logs.
func (p *Policy) String() string {
	return fmt.Sprintf("policy{global=%s groupInFlight=%s groupConcurrency=%s groupQueue=%s globalQueue=%s share=%s timeout=%v rejection=%v overrides=%d}",
		limitString(p.globalMaxInFlight), limitString(p.defaultMaxInFlight), limitString(p.defaultMaxConcurrency),
		limitString(p.defaultQueueThreshold), limitString(p.globalQueueThreshold), limitString(p.defaultShare), p.queueTimeout, p.rejection,
		len(p.groupMaxInFlight)+len(p.groupMaxConcurrency)+len(p.groupQueueThreshold)+len(p.groupShare))
}

func limitString(n int) string {
	if n == Unlimited {
		return "unlimited"
	}
	return fmt.Sprint(n)
}

// resolve picks a group's value: its per-group override, else the
// resolver's answer, else def. A resolver answer below least is an
// *OptionError naming the resolver (name), the value and the group (over
// 128 bytes, cut in the message as clip.Quote cuts it: the key may be a
// client's), and saying what a valid value looks like (reason).
func resolve(group string, overrides map[string]int, resolver func(string) (int, bool), def int, name string, least int, reason string) (int, error) {
	if n, ok := overrides[group]; ok {
		return n, nil
	}
	if resolver != nil {
		if n, ok := resolver(group); ok {
			if n < least {
				return 0, &OptionError{Option: name, Group: group, Value: n, Reason: reason, answered: true}
			}
			return n, nil
		}
	}
	return def, nil
}

func setGroup(m *map[string]int, group string, n int) {
	if *m == nil {
		*m = make(map[string]int)
	}
	(*m)[group] = n
}
