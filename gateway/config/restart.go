package config

import (
	"bytes"
	"slices"
	"time"

	"github.com/groupexec/groupexec/policy"
)

// RestartOnly returns, as *Error values naming each key and its line in c,
// the keys whose change from old a running gateway cannot apply: the
// addresses and TLS files it listens with (their paths, and what the files
// hold), the server's own limits
// (max_header_bytes, http2_max_streams, timeouts.read_header,
// timeouts.idle), the executor's
// fixed settings (limits.queue_timeout, limits.global_queue_threshold,
// tenant.max_groups, and the breakers when kept per tenant), breaker.per,
// breaker.enabled and metrics.namespace. Breakers disabled in both c and
// old are none to keep: breaker.per and their settings can change then.
// Every other key can change in place. It returns nil when there is none.
func (c *Config) RestartOnly(old *Config) []*Error {
	var errs []*Error
	check := func(key string, same bool) {
		if !same {
			errs = append(errs, &Error{Line: c.keys.line(key), Key: key,
				Reason: "cannot change without a restart"})
		}
	}
	check("listen", c.Listen == old.Listen)
	check("admin", c.Admin == old.Admin)
	check("tls", c.TLS == old.TLS)
	if c.TLS == old.TLS && !sameTLS(c.tls, old.tls) {
		// The listener keeps the certificate and CA it started with: a
		// reload taking new contents of the same files (a rotated
		// certificate) would only say it had.
		errs = append(errs, &Error{Line: c.keys.line("tls"), Key: "tls",
			Reason: "the files hold another certificate or CA: cannot change without a restart"})
	}
	check("max_header_bytes", c.MaxHeaderBytes == old.MaxHeaderBytes)
	check("http2_max_streams", c.HTTP2MaxStreams == old.HTTP2MaxStreams)
	check("tenant.max_groups", c.Tenant.MaxGroups == old.Tenant.MaxGroups)
	// The values the executor runs with, policy's default for an omitted
	// key: writing a key out with its default value changes nothing.
	check("limits.global_queue_threshold", valueOr(c.Limits.GlobalQueueThreshold, policy.DefaultQueueThreshold) ==
		valueOr(old.Limits.GlobalQueueThreshold, policy.DefaultQueueThreshold))
	check("limits.queue_timeout", valueOr(c.Limits.QueueTimeout, 0) == valueOr(old.Limits.QueueTimeout, 0))
	check("breaker.enabled", c.Breaker.On() == old.Breaker.On())
	// Breakers disabled before and after are built nowhere: where they
	// would be kept, and the executor's settings for them, are unread.
	if c.Breaker.On() || old.Breaker.On() {
		check("breaker.per", c.Breaker.Per == old.Breaker.Per)
		if c.Breaker.Per == PerTenant && old.Breaker.Per == PerTenant {
			check("breaker.consecutive_failures", c.Breaker.ConsecutiveFailures == old.Breaker.ConsecutiveFailures)
			check("breaker.timeout", c.Breaker.Timeout == old.Breaker.Timeout)
			check("breaker.max_requests", c.Breaker.MaxRequests == old.Breaker.MaxRequests)
		}
	}
	check("timeouts.read_header", c.Timeouts.ReadHeader == old.Timeouts.ReadHeader)
	check("timeouts.idle", c.Timeouts.Idle == old.Timeouts.Idle)
	check("metrics.namespace", c.Metrics.Namespace == old.Metrics.Namespace)
	return errs
}

// sameTLS reports whether a and b hold the same certificate chain and
// client CAs.
func sameTLS(a, b *tlsFiles) bool {
	if a == nil || b == nil {
		return a == b
	}
	return slices.EqualFunc(a.cert.Certificate, b.cert.Certificate, bytes.Equal) &&
		(a.cas == nil) == (b.cas == nil) && (a.cas == nil || a.cas.Equal(b.cas))
}

// valueOr returns *p, or def when p is nil (the key was left out).
func valueOr[T int | time.Duration](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

// SameBreakers reports whether a and b configure the breakers alike.
func SameBreakers(a, b Breaker) bool {
	return a.On() == b.On() && a.Per == b.Per && a.ConsecutiveFailures == b.ConsecutiveFailures &&
		a.Timeout == b.Timeout && a.MaxTimeout == b.MaxTimeout && a.MaxRequests == b.MaxRequests
}
