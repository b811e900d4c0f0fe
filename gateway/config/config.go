package config

import "time"

// Config is the gateway's configuration. Parse sets every key the file
// omits to its default (the Default* constants and the comments below);
// fields that map onto package policy are pointers, nil when omitted, so
// that policy's own defaults apply. A Config is meant to come from Parse or
// Load: the gateway relies on the defaults and checks they apply.
//
// The rule for 0: a key left out takes its default; a key given 0 means 0,
// which is valid only where the comment says what it means (a queue
// threshold of 0: nothing waits), and an error everywhere else.
type Config struct {
	Listen string `yaml:"listen"` // proxy address; default DefaultListen
	Admin  string `yaml:"admin"`  // /metrics, /healthz, /readyz, /reload; default DefaultAdmin
	// Backends are absolute http(s) URLs, at least one, each with a host
	// name and, if any, a port from 1 to 65535; no user info or fragment,
	// which would never be sent. A path is put before every proxied
	// path, a query before every request's own. Each backend is listed
	// once: two URLs the proxy sends the same requests to ("http://a:80/"
	// and "HTTP://A") are one backend, refused twice, as its breaker is
	// named by the URL as written (see backendKey).
	Backends []string `yaml:"backends"`
	TLS      TLS      `yaml:"tls"` // HTTPS on the proxy's address; zero: plain HTTP
	// MaxConns caps the client connections open at once. At the cap the
	// connection idle the longest (between requests, or yet to send its
	// first) is closed for a new one; with none idle, new connections wait
	// in the listen backlog. Default DefaultMaxConns.
	MaxConns int `yaml:"max_conns"`
	// MaxConnsPerClient caps the client connections one client address
	// (an IPv4 address, an IPv6 /64) holds at once; one more closes the
	// client's own connection idle the longest, or, with none idle, is
	// closed as soon as it is accepted. Connections from tenant.trusted_proxies are
	// not capped: each carries many clients. At most max_conns. Default
	// an eighth of max_conns (rounded up), at least
	// MinDefaultMaxConnsPerClient or max_conns if fewer: it takes eight
	// addresses to hold every place, and a NAT holding that many
	// connections is still served.
	MaxConnsPerClient int `yaml:"max_conns_per_client"`
	// AdminMaxConns caps the connections open at once on the admin
	// address, as max_conns caps the proxy's: at the cap the one idle the
	// longest (between requests, or yet to send its first) is closed for a
	// new one; with none idle, new connections wait in the listen
	// backlog. Its clients are few (a scraper, probes, a reload), but
	// anyone who reaches the address could otherwise open connections
	// until the process runs out of descriptors, the proxy's with them.
	// One client address (an IPv6 /64) holds an eighth of it at most,
	// rounded up: one more closes the client's own connection idle the
	// longest, or, with none idle, is answered 503 and closed, so that
	// one client cannot keep every admin connection busy while the
	// probes wait. Clients on the gateway's host, which reach the
	// address from itself and so cannot be told apart, are not capped
	// so. Default DefaultAdminMaxConns.
	AdminMaxConns int `yaml:"admin_max_conns"`
	// HTTP2MaxStreams caps the requests one HTTP/2 connection (over TLS)
	// carries at once, as its SETTINGS_MAX_CONCURRENT_STREAMS; an HTTP/1
	// connection carries one. With max_conns it bounds the requests being
	// received or answered, and so their buffers. Default
	// DefaultHTTP2MaxStreams.
	HTTP2MaxStreams int `yaml:"http2_max_streams"`
	// MaxHeaderBytes caps the request line and headers, on the admin
	// address too: net/http answers 431 beyond it plus 4 KiB, the slack
	// its reader allows over http.Server.MaxHeaderBytes. It caps a
	// backend's answer's headers too, each informational answer's: one
	// with more is a 502. At most MaxHeaderBytesLimit. Default
	// DefaultMaxHeaderBytes.
	MaxHeaderBytes int        `yaml:"max_header_bytes"`
	Tenant         Tenant     `yaml:"tenant"`     // where a request's tenant is read from, and whom to trust for it
	Limits         Limits     `yaml:"limits"`     // package policy's limits, with its defaults
	RateLimit      *RateLimit `yaml:"rate_limit"` // every tenant's; nil: none
	Tenants        TenantMap  `yaml:"tenants"`    // per-tenant overrides
	Breaker        Breaker    `yaml:"breaker"`    // circuit breakers, per backend or per tenant
	Timeouts       Timeouts   `yaml:"timeouts"`   // the client connection's and the backend's
	Body           Body       `yaml:"body"`       // request bodies: caps, decoding, spooling
	Response       Response   `yaml:"response"`   // backend answers kept before they are sent
	// DrainDelay is how long the gateway keeps serving after a shutdown
	// signal with /readyz failing, so that load balancers stop sending it
	// requests before its listener closes. 0 (the default): none.
	DrainDelay time.Duration `yaml:"drain_delay"`
	// DrainTimeout is how long in-flight requests may run once the listener
	// has closed before they are cancelled. Default DefaultDrainTimeout.
	DrainTimeout time.Duration `yaml:"drain_timeout"`
	Metrics      Metrics       `yaml:"metrics"` // the metrics' namespace

	tls  *tlsFiles // loaded from TLS's files by Parse
	keys keyIndex  // the file's keys and their lines
}

// TLS makes the proxy listener serve HTTPS. CertFile and KeyFile go
// together; ClientCAFile makes the gateway ask for client certificates and
// verify them against it (required by tenant.from: client_cert). Relative
// paths are relative to the working directory.
type TLS struct {
	CertFile     string `yaml:"cert_file"`      // the server's PEM certificate chain
	KeyFile      string `yaml:"key_file"`       // its PEM private key
	ClientCAFile string `yaml:"client_ca_file"` // PEM CAs that client certificates must chain to; "": none asked for
}

// Where a request's tenant key is read from (Tenant.From).
const (
	FromHeader     = "header"      // the header named by Tenant.Header
	FromHost       = "host"        // the Host as HostKey reads it (configure host tenants so)
	FromPath       = "path"        // the path segment right after Tenant.PathPrefix
	FromClientCert = "client_cert" // the verified client certificate's subject common name (none: 401)
	FromBearer     = "bearer"      // a claim of the verified bearer token (Tenant.Bearer; missing or empty: 401)
)

// Tenant says how a request's tenant is found and how many tenants may be live.
type Tenant struct {
	From   string `yaml:"from"`   // one of the From* values; default FromHeader
	Header string `yaml:"header"` // default DefaultTenantHeader; set on the proxied request to the tenant used
	// PathPrefix is, for FromPath, what precedes the tenant segment;
	// default "/". Both are read from the path as sent (escaped), so the
	// prefix is written as it appears in a URL, and a segment with an
	// escape ("%2F", "%61") is an invalid key, as is an empty segment
	// followed by more path ("/t//acme"); nothing after the prefix names
	// no tenant.
	PathPrefix string `yaml:"path_prefix"`
	// TrustedProxies are the CIDRs whose connections may name their tenant
	// with From header, host or path: a request from any other address is
	// served as the default tenant, whatever it names (refused, with
	// Require). Empty (the default):
	// every address is trusted, so any client can claim any tenant. An
	// IPv4-mapped entry ("::ffff:10.0.0.7", "::ffff:10.0.0.0/104") is its
	// IPv4 address or prefix: a dual-stack listener's peer address is
	// unmapped before it is matched.
	TrustedProxies []string `yaml:"trusted_proxies"`
	// Bearer verifies the token of From bearer.
	Bearer Bearer `yaml:"bearer"`
	// Default is the group of requests that carry no tenant key (unless
	// Require refuses them). A bearer token or client certificate that
	// names none (an empty claim or common name) is refused, never given
	// Default.
	Default string `yaml:"default"`
	// Require refuses a request that carries no tenant key instead of
	// serving it as Default: 401 with a Bearer challenge with From bearer
	// (a request without a token, or with other credentials), 400
	// missing_tenant with header, host and path (a request from an address
	// TrustedProxies leaves out names none). With it, no client can move
	// its requests onto the default tenant's capacity by naming none. With
	// client_cert it changes nothing: a request without a certificate is
	// refused (401) already. Default is then the name only of the group
	// that requests refused before their tenant is read are counted in,
	// and setting it in the file is an error. Default false.
	Require bool `yaml:"require"`
	// MaxGroups caps the unconfigured tenants with requests in flight at
	// once, each in its own group; a request of any other tenant goes to the
	// shared overflow group. Configured tenants and the default group are
	// not counted. 0: every unconfigured tenant shares the overflow group.
	// Default DefaultMaxGroups.
	MaxGroups int `yaml:"max_groups"`

	trusted []prefix // TrustedProxies, parsed
}

// Bearer says how a bearer token (a JWT, RFC 7519) is verified: with an
// HMAC secret (HS256) or a public key (RS256 for RSA, ES256 for ECDSA
// P-256), exactly one of them; the algorithm is the key's, whatever the
// token's header claims. The token must carry exp; nbf, iss and aud are
// checked when present in the token or set here.
type Bearer struct {
	Claim          string `yaml:"claim"`            // the claim naming the tenant; default "sub"
	HMACSecretFile string `yaml:"hmac_secret_file"` // the secret's bytes, whitespace trimmed; at least 32
	PublicKeyFile  string `yaml:"public_key_file"`  // a PEM "PUBLIC KEY"
	Issuer         string `yaml:"issuer"`           // iss must equal it, if set
	Audience       string `yaml:"audience"`         // aud must contain it, if set
	// Leeway is the clock skew allowed on exp and nbf. 0 (the default):
	// none.
	Leeway time.Duration `yaml:"leeway"`

	key any // []byte, *rsa.PublicKey or *ecdsa.PublicKey, loaded by Parse
}

// Limits map onto package policy: a nil field takes policy's default.
type Limits struct {
	GlobalMaxInFlight      *int           `yaml:"global_max_in_flight"`      // policy.WithGlobalMaxInFlight
	MaxInFlightPerGroup    *int           `yaml:"max_in_flight_per_group"`   // policy.WithDefaultMaxInFlight
	MaxConcurrencyPerGroup *int           `yaml:"max_concurrency_per_group"` // policy.WithDefaultMaxConcurrency
	QueueThresholdPerGroup *int           `yaml:"queue_threshold_per_group"` // policy.WithDefaultQueueThreshold; 0: nothing waits
	GlobalQueueThreshold   *int           `yaml:"global_queue_threshold"`    // policy.WithGlobalQueueThreshold; 0: nothing waits
	QueueTimeout           *time.Duration `yaml:"queue_timeout"`             // policy.WithQueueTimeout; 0: none
}

// TenantLimits override Limits for one tenant; a nil field keeps the default.
type TenantLimits struct {
	MaxConcurrency *int       `yaml:"max_concurrency"` // policy.WithGroupMaxConcurrency
	MaxInFlight    *int       `yaml:"max_in_flight"`   // policy.WithGroupMaxInFlight
	QueueThreshold *int       `yaml:"queue_threshold"` // policy.WithGroupQueueThreshold; 0: nothing waits
	Share          *int       `yaml:"share"`           // policy.WithGroupShare
	RateLimit      *RateLimit `yaml:"rate_limit"`      // instead of the top-level rate_limit
}

// RateLimit bounds a tenant's request rate (a token bucket): RPS requests
// per second on average, at most Burst at once. A request over it is
// refused with 429 and a Retry-After of when it would fit.
type RateLimit struct {
	RPS   float64 `yaml:"rps"`   // > 0
	Burst int     `yaml:"burst"` // default: RPS rounded up, at least 1
}

// Where breakers are kept (Breaker.Per).
const (
	PerBackend = "backend" // one breaker per backend: the default
	PerTenant  = "tenant"  // one per tenant, in the executor (no backoff)
)

// Breaker configures the circuit breakers.
type Breaker struct {
	// Enabled defaults to true. Set false to run without breakers.
	Enabled *bool `yaml:"enabled"`
	// Per is PerBackend (the default: a failing backend is skipped while
	// the others serve) or PerTenant (a tenant whose requests keep failing
	// stops taking capacity; trust the tenant key before choosing it).
	Per                 string        `yaml:"per"`
	ConsecutiveFailures int           `yaml:"consecutive_failures"` // default 5
	Timeout             time.Duration `yaml:"timeout"`              // open for, at first; default 5s
	// MaxTimeout caps the open time, which doubles each time the probe
	// after it fails (per backend only: given with PerTenant, whose
	// breakers have no backoff, it is refused). Default 60s, or Timeout
	// if longer (a default below Timeout would be refused).
	MaxTimeout  time.Duration `yaml:"max_timeout"`
	MaxRequests int           `yaml:"max_requests"` // half-open probes; default 1
}

// On reports whether breakers are enabled.
func (b Breaker) On() bool { return b.Enabled == nil || *b.Enabled }

// Timeouts bound the server's connections and the requests it proxies.
type Timeouts struct {
	ReadHeader time.Duration `yaml:"read_header"` // the request line and headers; default 5s
	Read       time.Duration `yaml:"read"`        // the body, from the end of the headers; default 5s
	Write      time.Duration `yaml:"write"`       // sending the answer, once it starts (admin too); default 5s
	Idle       time.Duration `yaml:"idle"`        // keep-alive (admin too); default 60s
	// Upstream is each request's deadline once its body is received:
	// queueing, every try and every backoff fit inside it. Default 10s.
	Upstream time.Duration `yaml:"upstream"`
}

// Body caps request bodies. A body is received whole before its request is
// admitted: in memory up to BufferBytes, in a file in SpoolDir beyond.
type Body struct {
	MaxBytes        int64 `yaml:"max_bytes"`         // as received; default 1 MiB
	MaxDecodedBytes int64 `yaml:"max_decoded_bytes"` // a coded body once decoded; default 8 MiB
	MaxRatio        int64 `yaml:"max_ratio"`         // decoded:received bytes of a coded body; default 10
	// BufferBytes is how much of a body is kept in memory; 0: every body
	// goes to a file. Default 64 KiB.
	BufferBytes int64  `yaml:"buffer_bytes"`
	SpoolDir    string `yaml:"spool_dir"` // default: the system's temporary directory
	// SpoolMaxBytes caps the bytes of request bodies held in SpoolDir's
	// files at once, across all requests; memory is not counted (its
	// bound is BufferBytes per request). Without it each request could
	// hold up to MaxDecodedBytes there, and the requests one client can
	// keep open, their bodies' last bytes held back, could fill the
	// filesystem and fail every tenant's spooled bodies. A body that
	// would take the spool over it is refused 503 spool_full with a
	// Retry-After, before admission. Default DefaultSpoolMaxBytes.
	SpoolMaxBytes int64 `yaml:"spool_max_bytes"`
	// SpoolMaxBytesPerClient caps the bytes one client address (an IPv4
	// address, an IPv6 /64, as max_conns_per_client counts them) holds in
	// SpoolDir's files at once, so that one client cannot take all of
	// SpoolMaxBytes from the others; a body of a client at it is refused
	// as one over SpoolMaxBytes is. Bodies from tenant.trusted_proxies
	// are not capped by it: each proxy carries many clients. At most
	// SpoolMaxBytes. Default an eighth of spool_max_bytes, rounded up.
	SpoolMaxBytesPerClient int64 `yaml:"spool_max_bytes_per_client"`
}

// Response says how much of a backend's answer is kept in memory, so that
// the request's slot is released before a slow client has read it.
type Response struct {
	// BufferBytes is how much is kept; a longer answer is streamed, holding
	// its slot until the client has it. 0: every answer is streamed.
	// Default 64 KiB.
	BufferBytes int `yaml:"buffer_bytes"`
}

// Metrics names the gateway's Prometheus series.
type Metrics struct {
	// Namespace prefixes every gateway and executor metric
	// (groupexec_gateway_requests_total). Default DefaultNamespace; an
	// empty one, no prefix at all, is refused.
	Namespace string `yaml:"namespace"`
}

// max_conns_per_client defaults to max_conns / MaxConnsPerClientShare,
// rounded up, but at least MinDefaultMaxConnsPerClient, or max_conns if
// fewer.
const (
	MaxConnsPerClientShare      = 8
	MinDefaultMaxConnsPerClient = 64
)

// body.spool_max_bytes defaults to DefaultSpoolMaxBytes, and
// body.spool_max_bytes_per_client to body.spool_max_bytes /
// SpoolMaxBytesPerClientShare, rounded up: it takes eight client addresses
// to fill the spool.
//
// DefaultSpoolMaxBytes holds 128 bodies of DefaultMaxDecodedBytes at once
// (1024 of DefaultMaxBodyBytes), a client address 16 of them by default,
// while staying small beside the filesystem the default spool_dir is on:
// the system's temporary directory, often shared with other programs, or a
// tmpfs in memory.
const (
	DefaultSpoolMaxBytes        = 1 << 30
	SpoolMaxBytesPerClientShare = 8
)

// Defaults for omitted keys.
const (
	DefaultListen            = "127.0.0.1:8080"
	DefaultAdmin             = "127.0.0.1:9090"
	DefaultMaxConns          = 10000
	DefaultAdminMaxConns     = 64
	DefaultHTTP2MaxStreams   = 100 // RFC 9113 section 6.5.2's recommended floor
	DefaultTenantHeader      = "X-Tenant"
	DefaultTenant            = "anonymous"
	DefaultMaxGroups         = 10000
	DefaultBearerClaim       = "sub"
	DefaultMaxHeaderBytes    = 64 << 10
	DefaultDrainTimeout      = 5 * time.Second
	DefaultMaxBodyBytes      = 1 << 20
	DefaultMaxDecodedBytes   = 8 << 20
	DefaultMaxRatio          = 10
	DefaultBodyBufferBytes   = 64 << 10
	DefaultResponseBuffer    = 64 << 10
	DefaultBreakerFailures   = 5
	DefaultBreakerTimeout    = 5 * time.Second
	DefaultBreakerMaxTimeout = 60 * time.Second
	DefaultBreakerProbes     = 1
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultReadTimeout       = 5 * time.Second
	DefaultWriteTimeout      = 5 * time.Second
	DefaultIdleTimeout       = 60 * time.Second
	DefaultUpstreamTimeout   = 10 * time.Second
	DefaultNamespace         = "groupexec"
)
