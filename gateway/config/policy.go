package config

import (
	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/policy"
)

// Policy builds the executor policy the config describes: the limits given,
// policy's defaults for the rest, and each configured tenant's overrides.
// extra options are applied last (the gateway adds its own groups' limits).
func (c *Config) Policy(extra ...policy.Option) (*policy.Policy, error) {
	var opts []policy.Option
	add := func(v *int, f func(int) policy.Option) {
		if v != nil {
			opts = append(opts, f(*v))
		}
	}
	l := c.Limits
	add(l.GlobalMaxInFlight, policy.WithGlobalMaxInFlight)
	add(l.MaxInFlightPerGroup, policy.WithDefaultMaxInFlight)
	add(l.MaxConcurrencyPerGroup, policy.WithDefaultMaxConcurrency)
	add(l.QueueThresholdPerGroup, policy.WithDefaultQueueThreshold)
	add(l.GlobalQueueThreshold, policy.WithGlobalQueueThreshold)
	if l.QueueTimeout != nil {
		opts = append(opts, policy.WithQueueTimeout(*l.QueueTimeout))
	}
	for name, t := range c.Tenants {
		group := func(f func(string, int) policy.Option) func(int) policy.Option {
			return func(n int) policy.Option { return f(name, n) }
		}
		add(t.MaxConcurrency, group(policy.WithGroupMaxConcurrency))
		add(t.MaxInFlight, group(policy.WithGroupMaxInFlight))
		add(t.QueueThreshold, group(policy.WithGroupQueueThreshold))
		add(t.Share, group(policy.WithGroupShare))
	}
	return policy.New(append(opts, extra...)...)
}

// BreakerSettings returns the settings of each tenant's breaker, and false
// when breakers are disabled.
func (c *Config) BreakerSettings() (breaker.Settings, bool) {
	if !c.Breaker.On() {
		return breaker.Settings{}, false
	}
	n := uint64(c.Breaker.ConsecutiveFailures)
	return breaker.Settings{
		MaxRequests: uint32(c.Breaker.MaxRequests),
		Timeout:     c.Breaker.Timeout,
		ReadyToTrip: func(counts breaker.Counts) bool { return counts.ConsecutiveFailures >= n },
	}, true
}
