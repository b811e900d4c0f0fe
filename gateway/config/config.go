package config

import "time"

// Config is the gateway's configuration. Parse fills every omitted field with
// its default (the Default* constants and the comments below); fields that
// map onto package policy are pointers, nil when omitted, so that policy's own
// defaults apply.
type Config struct {
	Listen   string   `yaml:"listen"`   // proxy address; default DefaultListen
	Admin    string   `yaml:"admin"`    // /metrics, /healthz, /readyz; default DefaultAdmin
	Backends []string `yaml:"backends"` // absolute http(s) URLs; at least one

	Tenant   Tenant                  `yaml:"tenant"`
	Limits   Limits                  `yaml:"limits"`
	Tenants  map[string]TenantLimits `yaml:"tenants"` // per-tenant overrides of Limits
	Breaker  Breaker                 `yaml:"breaker"`
	Timeouts Timeouts                `yaml:"timeouts"`
	Body     Body                    `yaml:"body"`
	Response Response                `yaml:"response"`

	// MaxHeaderBytes caps the request line and headers (net/http answers 431
	// beyond it). Default DefaultMaxHeaderBytes.
	MaxHeaderBytes int `yaml:"max_header_bytes"`
	// DrainTimeout is how long in-flight requests may run after a shutdown
	// signal before they are cancelled. Default DefaultDrainTimeout.
	DrainTimeout time.Duration `yaml:"drain_timeout"`
}

// Where a request's tenant key is read from (Tenant.From).
const (
	FromHeader = "header" // the header named by Tenant.Header
	FromHost   = "host"   // the Host, lower-cased, without the port
	FromPath   = "path"   // the path segment right after Tenant.PathPrefix
)

// Tenant says how a request's tenant is found and how many tenants may be live.
type Tenant struct {
	From       string `yaml:"from"`        // FromHeader (default), FromHost or FromPath
	Header     string `yaml:"header"`      // default DefaultTenantHeader
	PathPrefix string `yaml:"path_prefix"` // for FromPath; default "/"
	// Default is the group of requests that carry no tenant key.
	Default string `yaml:"default"`
	// MaxGroups caps the tenants with requests in flight at once, each in its
	// own group; a request of any other tenant goes to the shared overflow
	// group. Configured tenants and the default group are not counted.
	MaxGroups int `yaml:"max_groups"`
}

// Limits map onto package policy: a nil field takes policy's default.
type Limits struct {
	GlobalMaxInFlight      *int           `yaml:"global_max_in_flight"`      // policy.WithGlobalMaxInFlight
	MaxInFlightPerGroup    *int           `yaml:"max_in_flight_per_group"`   // policy.WithMaxInFlightPerGroup
	MaxConcurrencyPerGroup *int           `yaml:"max_concurrency_per_group"` // policy.WithMaxConcurrencyPerGroup
	QueueThresholdPerGroup *int           `yaml:"queue_threshold_per_group"` // policy.WithQueueThresholdPerGroup
	GlobalQueueThreshold   *int           `yaml:"global_queue_threshold"`    // policy.WithGlobalQueueThreshold
	QueueTimeout           *time.Duration `yaml:"queue_timeout"`             // policy.WithQueueTimeout
}

// TenantLimits override Limits for one tenant; a nil field keeps the default.
type TenantLimits struct {
	MaxConcurrency *int `yaml:"max_concurrency"` // policy.WithGroupMaxConcurrency
	MaxInFlight    *int `yaml:"max_in_flight"`   // policy.WithGroupMaxInFlight
	QueueThreshold *int `yaml:"queue_threshold"` // policy.WithGroupQueueThreshold
	Share          *int `yaml:"share"`           // policy.WithGroupShare
}

// Breaker configures one circuit breaker per tenant (package breaker).
type Breaker struct {
	// Enabled defaults to true: a tenant whose requests keep failing stops
	// taking capacity. Set false to run without breakers.
	Enabled             *bool         `yaml:"enabled"`
	ConsecutiveFailures int           `yaml:"consecutive_failures"` // default 5
	Timeout             time.Duration `yaml:"timeout"`              // open for; default 30s
	MaxRequests         int           `yaml:"max_requests"`         // half-open probes; default 1
}

// On reports whether breakers are enabled.
func (b Breaker) On() bool { return b.Enabled == nil || *b.Enabled }

// Timeouts bound the server's connections and the requests it proxies.
type Timeouts struct {
	ReadHeader time.Duration `yaml:"read_header"` // default 5s
	Read       time.Duration `yaml:"read"`        // whole request, body included; default 5s
	Write      time.Duration `yaml:"write"`       // writing the response, after the upstream deadline; default 5s
	Idle       time.Duration `yaml:"idle"`        // keep-alive; default 60s
	// Upstream is each request's deadline from arrival: queueing, every try
	// and every backoff fit inside it. Default 10s.
	Upstream time.Duration `yaml:"upstream"`
}

// Body caps request bodies. A body is received whole before its request is
// admitted: in memory up to BufferBytes, in a file in SpoolDir beyond.
type Body struct {
	MaxBytes        int64  `yaml:"max_bytes"`         // as received; default 1 MiB
	MaxDecodedBytes int64  `yaml:"max_decoded_bytes"` // a coded body once decoded; default 8 MiB
	MaxRatio        int64  `yaml:"max_ratio"`         // decoded:received bytes of a coded body; default 10
	BufferBytes     int64  `yaml:"buffer_bytes"`      // kept in memory; default 64 KiB
	SpoolDir        string `yaml:"spool_dir"`         // default: the system's temporary directory
}

// Response says how much of a backend's answer is kept in memory, so that
// the request's slot is released before a slow client has read it.
type Response struct {
	BufferBytes int `yaml:"buffer_bytes"` // default 64 KiB; longer answers are streamed
}

// Defaults for omitted keys.
const (
	DefaultListen            = "127.0.0.1:8080"
	DefaultAdmin             = "127.0.0.1:9090"
	DefaultTenantHeader      = "X-Tenant"
	DefaultTenant            = "anonymous"
	DefaultMaxGroups         = 10000
	DefaultMaxHeaderBytes    = 64 << 10
	DefaultDrainTimeout      = 5 * time.Second
	DefaultMaxBodyBytes      = 1 << 20
	DefaultMaxDecodedBytes   = 8 << 20
	DefaultMaxRatio          = 10
	DefaultBodyBufferBytes   = 64 << 10
	DefaultResponseBuffer    = 64 << 10
	DefaultBreakerFailures   = 5
	DefaultBreakerTimeout    = 30 * time.Second
	DefaultBreakerProbes     = 1
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultReadTimeout       = 5 * time.Second
	DefaultWriteTimeout      = 5 * time.Second
	DefaultIdleTimeout       = 60 * time.Second
	DefaultUpstreamTimeout   = 10 * time.Second
)

// setDefaults fills the zero fields that have a default.
func (c *Config) setDefaults() {
	def := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	def(&c.Listen, DefaultListen)
	def(&c.Admin, DefaultAdmin)
	def(&c.Tenant.From, FromHeader)
	def(&c.Tenant.Header, DefaultTenantHeader)
	def(&c.Tenant.PathPrefix, "/")
	def(&c.Tenant.Default, DefaultTenant)
	setZero(&c.Tenant.MaxGroups, DefaultMaxGroups)
	setZero(&c.MaxHeaderBytes, DefaultMaxHeaderBytes)
	setZero(&c.DrainTimeout, DefaultDrainTimeout)
	setZero(&c.Body.MaxBytes, DefaultMaxBodyBytes)
	setZero(&c.Body.MaxDecodedBytes, DefaultMaxDecodedBytes)
	setZero(&c.Body.MaxRatio, DefaultMaxRatio)
	setZero(&c.Body.BufferBytes, DefaultBodyBufferBytes)
	setZero(&c.Response.BufferBytes, DefaultResponseBuffer)
	setZero(&c.Breaker.ConsecutiveFailures, DefaultBreakerFailures)
	setZero(&c.Breaker.Timeout, DefaultBreakerTimeout)
	setZero(&c.Breaker.MaxRequests, DefaultBreakerProbes)
	setZero(&c.Timeouts.ReadHeader, DefaultReadHeaderTimeout)
	setZero(&c.Timeouts.Read, DefaultReadTimeout)
	setZero(&c.Timeouts.Write, DefaultWriteTimeout)
	setZero(&c.Timeouts.Idle, DefaultIdleTimeout)
	setZero(&c.Timeouts.Upstream, DefaultUpstreamTimeout)
}

func setZero[T int | int64 | time.Duration](p *T, v T) {
	if *p == 0 {
		*p = v
	}
}
