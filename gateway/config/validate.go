package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"sort"
	"time"

	"github.com/groupexec/groupexec/policy"
)

// problem is one invalid key, before it is given its line.
type problem struct{ key, reason string }

// validate checks the config after defaults are set, in file order as far as
// that is cheap, and returns every problem it finds.
func (c *Config) validate() []problem {
	var ps []problem
	bad := func(key, format string, args ...any) {
		ps = append(ps, problem{key, fmt.Sprintf(format, args...)})
	}

	for _, a := range []struct{ key, addr string }{{"listen", c.Listen}, {"admin", c.Admin}} {
		if _, _, err := net.SplitHostPort(a.addr); err != nil {
			bad(a.key, "%q is not host:port", a.addr)
		}
	}
	if c.Listen == c.Admin {
		if _, port, _ := net.SplitHostPort(c.Listen); port != "0" {
			bad("admin", "must differ from listen (%s): the admin endpoints stay off the proxy port", c.Listen)
		}
	}

	if len(c.Backends) == 0 {
		bad("backends", "at least one backend URL is required")
	}
	for i, b := range c.Backends {
		if u, err := url.Parse(b); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("backends", "backend %d (%q) is not an absolute http or https URL", i+1, b)
		}
	}

	switch c.Tenant.From {
	case FromHeader, FromHost, FromPath:
	default:
		bad("tenant.from", "%q is not one of header, host, path", c.Tenant.From)
	}
	if !validHeaderName(c.Tenant.Header) {
		bad("tenant.header", "%q is not a valid header name", c.Tenant.Header)
	}
	if c.Tenant.PathPrefix[0] != '/' {
		bad("tenant.path_prefix", "%q must start with /", c.Tenant.PathPrefix)
	}
	if !ValidTenant(c.Tenant.Default) {
		bad("tenant.default", "%q is not a valid tenant key (%s)", c.Tenant.Default, tenantRule)
	}
	nonNegative(bad, "tenant.max_groups", c.Tenant.MaxGroups)

	// Limits are checked by policy itself, one option at a time, so the rules
	// and their wording stay policy's.
	l := c.Limits
	checkOpt(bad, "limits.global_max_in_flight", l.GlobalMaxInFlight, policy.WithGlobalMaxInFlight)
	checkOpt(bad, "limits.max_in_flight_per_group", l.MaxInFlightPerGroup, policy.WithMaxInFlightPerGroup)
	checkOpt(bad, "limits.max_concurrency_per_group", l.MaxConcurrencyPerGroup, policy.WithMaxConcurrencyPerGroup)
	checkOpt(bad, "limits.queue_threshold_per_group", l.QueueThresholdPerGroup, policy.WithQueueThresholdPerGroup)
	checkOpt(bad, "limits.global_queue_threshold", l.GlobalQueueThreshold, policy.WithGlobalQueueThreshold)
	checkOpt(bad, "limits.queue_timeout", l.QueueTimeout, policy.WithQueueTimeout)

	names := make([]string, 0, len(c.Tenants))
	for name := range c.Tenants {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		t, k := c.Tenants[name], "tenants."+name
		if !ValidTenant(name) {
			bad(k, "%q is not a valid tenant key (%s)", name, tenantRule)
			continue
		}
		group := func(f func(string, int) policy.Option) func(int) policy.Option {
			return func(n int) policy.Option { return f(name, n) }
		}
		checkOpt(bad, k+".max_concurrency", t.MaxConcurrency, group(policy.WithGroupMaxConcurrency))
		checkOpt(bad, k+".max_in_flight", t.MaxInFlight, group(policy.WithGroupMaxInFlight))
		checkOpt(bad, k+".queue_threshold", t.QueueThreshold, group(policy.WithGroupQueueThreshold))
		checkOpt(bad, k+".share", t.Share, group(policy.WithGroupShare))
	}

	nonNegative(bad, "breaker.consecutive_failures", c.Breaker.ConsecutiveFailures)
	nonNegative(bad, "breaker.timeout", c.Breaker.Timeout)
	if c.Breaker.MaxRequests < 0 || int64(c.Breaker.MaxRequests) > math.MaxUint32 {
		bad("breaker.max_requests", "%d is out of range (1 to %d)", c.Breaker.MaxRequests, uint32(math.MaxUint32))
	}
	for _, d := range []struct {
		key string
		d   time.Duration
	}{
		{"timeouts.read_header", c.Timeouts.ReadHeader}, {"timeouts.read", c.Timeouts.Read},
		{"timeouts.write", c.Timeouts.Write}, {"timeouts.idle", c.Timeouts.Idle},
		{"timeouts.upstream", c.Timeouts.Upstream}, {"drain_timeout", c.DrainTimeout},
	} {
		nonNegative(bad, d.key, d.d)
	}
	nonNegative(bad, "body.max_bytes", c.Body.MaxBytes)
	nonNegative(bad, "body.max_decoded_bytes", c.Body.MaxDecodedBytes)
	nonNegative(bad, "body.max_ratio", c.Body.MaxRatio)
	nonNegative(bad, "max_header_bytes", c.MaxHeaderBytes)
	return ps
}

// nonNegative reports v < 0. Zero is never seen here for keys with a default:
// setDefaults has replaced it.
func nonNegative[T int | int64 | time.Duration](bad func(string, string, ...any), key string, v T) {
	if v < 0 {
		bad(key, "%v is negative", v)
	}
}

// checkOpt hands a set value to policy.New through opt and reports policy's
// reason when it refuses it.
func checkOpt[T any](bad func(string, string, ...any), key string, v *T, opt func(T) policy.Option) {
	if v == nil {
		return
	}
	_, err := policy.New(opt(*v))
	var oe *policy.OptionError
	switch {
	case errors.As(err, &oe):
		bad(key, "%v is invalid: %s", *v, oe.Reason)
	case err != nil:
		bad(key, "%v", err)
	}
}

func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isTokenChar(s[i]) {
			return false
		}
	}
	return true
}

// isTokenChar reports whether c may appear in an HTTP token (RFC 9110 5.6.2).
func isTokenChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	switch c {
	case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~':
		return true
	}
	return false
}
