package config

import (
	"math"
	"time"
)

// MaxHeaderBytesLimit is the largest max_header_bytes accepted. net/http
// adds its read slack to the cap, so a value near the largest int would
// overflow there and refuse every request.
const MaxHeaderBytesLimit = 1 << 30

// setDefaults gives every key the file omits its default. present reports
// whether the file has the key at a dotted path.
func (c *Config) setDefaults(present func(string) bool) {
	def := func(key string, p *string, v string) {
		if !present(key) {
			*p = v
		}
	}
	def("listen", &c.Listen, DefaultListen)
	def("admin", &c.Admin, DefaultAdmin)
	def("tenant.from", &c.Tenant.From, FromHeader)
	def("tenant.header", &c.Tenant.Header, DefaultTenantHeader)
	def("tenant.path_prefix", &c.Tenant.PathPrefix, "/")
	def("tenant.default", &c.Tenant.Default, DefaultTenant)
	def("tenant.bearer.claim", &c.Tenant.Bearer.Claim, DefaultBearerClaim)
	def("breaker.per", &c.Breaker.Per, PerBackend)
	def("metrics.namespace", &c.Metrics.Namespace, DefaultNamespace)
	setDefault(present, "max_conns", &c.MaxConns, DefaultMaxConns)
	setDefault(present, "max_conns_per_client", &c.MaxConnsPerClient, defaultMaxConnsPerClient(c.MaxConns))
	setDefault(present, "admin_max_conns", &c.AdminMaxConns, DefaultAdminMaxConns)
	setDefault(present, "http2_max_streams", &c.HTTP2MaxStreams, DefaultHTTP2MaxStreams)
	setDefault(present, "max_header_bytes", &c.MaxHeaderBytes, DefaultMaxHeaderBytes)
	setDefault(present, "tenant.max_groups", &c.Tenant.MaxGroups, DefaultMaxGroups)
	setDefault(present, "drain_timeout", &c.DrainTimeout, DefaultDrainTimeout)
	setDefault(present, "body.max_bytes", &c.Body.MaxBytes, DefaultMaxBodyBytes)
	setDefault(present, "body.max_decoded_bytes", &c.Body.MaxDecodedBytes, DefaultMaxDecodedBytes)
	setDefault(present, "body.max_ratio", &c.Body.MaxRatio, DefaultMaxRatio)
	setDefault(present, "body.buffer_bytes", &c.Body.BufferBytes, DefaultBodyBufferBytes)
	setDefault(present, "body.spool_max_bytes", &c.Body.SpoolMaxBytes, DefaultSpoolMaxBytes)
	setDefault(present, "body.spool_max_bytes_per_client", &c.Body.SpoolMaxBytesPerClient, defaultSpoolMaxBytesPerClient(c.Body.SpoolMaxBytes))
	setDefault(present, "response.buffer_bytes", &c.Response.BufferBytes, DefaultResponseBuffer)
	setDefault(present, "breaker.consecutive_failures", &c.Breaker.ConsecutiveFailures, DefaultBreakerFailures)
	setDefault(present, "breaker.timeout", &c.Breaker.Timeout, DefaultBreakerTimeout)
	setDefault(present, "breaker.max_timeout", &c.Breaker.MaxTimeout, max(DefaultBreakerMaxTimeout, c.Breaker.Timeout))
	setDefault(present, "breaker.max_requests", &c.Breaker.MaxRequests, DefaultBreakerProbes)
	setDefault(present, "timeouts.read_header", &c.Timeouts.ReadHeader, DefaultReadHeaderTimeout)
	setDefault(present, "timeouts.read", &c.Timeouts.Read, DefaultReadTimeout)
	setDefault(present, "timeouts.write", &c.Timeouts.Write, DefaultWriteTimeout)
	setDefault(present, "timeouts.idle", &c.Timeouts.Idle, DefaultIdleTimeout)
	setDefault(present, "timeouts.upstream", &c.Timeouts.Upstream, DefaultUpstreamTimeout)
	rateDefaults(present, "rate_limit", c.RateLimit)
	for name, t := range c.Tenants {
		rateDefaults(present, "tenants."+name+".rate_limit", t.RateLimit)
	}
}

func setDefault[T int | int64 | time.Duration](present func(string) bool, key string, p *T, v T) {
	if !present(key) {
		*p = v
	}
}

// rateDefaults sets an omitted burst to the rate rounded up, at least 1,
// and at most the largest int: converting a larger float overflows (to 1,
// after max, on amd64).
func rateDefaults(present func(string) bool, key string, r *RateLimit) {
	if r != nil && !present(key+".burst") && r.RPS > 0 {
		if f := r.RPS + 0.999999; f < math.MaxInt {
			r.Burst = max(1, int(f))
		} else {
			r.Burst = math.MaxInt
		}
	}
}

// defaultMaxConnsPerClient is max_conns_per_client's default: an eighth of
// max_conns, rounded up, so that it takes eight addresses to hold every
// place; but at least MinDefaultMaxConnsPerClient (or max_conns, if
// fewer), so that the clients behind one NAT of a small gateway are not
// turned away for sharing an address.
func defaultMaxConnsPerClient(maxConns int) int {
	if maxConns <= 0 {
		// max_conns is refused: derived from it, the default would be
		// refused too, a problem of a key the file does not have.
		return MinDefaultMaxConnsPerClient
	}
	share := maxConns/MaxConnsPerClientShare + min(maxConns%MaxConnsPerClientShare, 1)
	return min(maxConns, max(share, MinDefaultMaxConnsPerClient))
}

// defaultSpoolMaxBytesPerClient is body.spool_max_bytes_per_client's
// default: an eighth of spool_max_bytes, rounded up, so that it takes eight
// client addresses to fill the spool.
func defaultSpoolMaxBytesPerClient(spoolMax int64) int64 {
	if spoolMax <= 0 {
		// spool_max_bytes is refused: derived from it, the default would
		// be refused too, a problem of a key the file does not have.
		return 1
	}
	return spoolMax/SpoolMaxBytesPerClientShare + min(spoolMax%SpoolMaxBytesPerClientShare, 1)
}
