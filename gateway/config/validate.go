package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"net/textproto"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/groupexec/groupexec/policy"
)

// problem is one invalid key, before it is given its line: the key's,
// unless line names another (a list item's).
type problem struct {
	key, reason string
	line        int
}

// checker collects problems; present tells which keys the file has, and
// itemLine the line of a list's item (0 if not known).
type checker struct {
	ps       []problem
	present  func(string) bool
	itemLine func(key string, i int) int
}

func (ck *checker) bad(key, format string, args ...any) {
	ck.ps = append(ck.ps, problem{key: key, reason: fmt.Sprintf(format, shownArgs(args)...)})
}

// badItem reports a problem of item i (from 1) of the list at key, on
// the item's line.
func (ck *checker) badItem(key string, i int, format string, args ...any) {
	ck.ps = append(ck.ps, problem{key: key, reason: fmt.Sprintf(format, shownArgs(args)...), line: ck.itemLine(key, i)})
}

// positive checks a key whose 0 means nothing: given 0 or less, it is an
// error (left out, it has its default).
func positive[T int | int64 | float64 | time.Duration](ck *checker, key string, v T) {
	switch {
	case v < 0:
		ck.bad(key, "%v is negative", v)
	case v == 0 && ck.present(key):
		ck.bad(key, "0 is not a valid value here: leave the key out for its default")
	}
}

// nonNegative checks a key whose 0 has a meaning (its comment says which).
func nonNegative[T int | int64 | time.Duration](ck *checker, key string, v T) {
	if v < 0 {
		ck.bad(key, "%v is negative", v)
	}
}

// validate checks the config after defaults are set and returns every
// problem it finds; Parse sorts them by line. It also loads what the
// config names (keys, certificates) and parses the trusted addresses.
func (c *Config) validate(present func(string) bool, itemLine func(key string, i int) int) []problem {
	ck := &checker{present: present, itemLine: itemLine}
	for _, a := range []struct{ key, addr string }{{"listen", c.Listen}, {"admin", c.Admin}} {
		_, port, err := net.SplitHostPort(a.addr)
		if err != nil {
			ck.bad(a.key, "%q is not host:port", a.addr)
			continue
		}
		if port == "" {
			// net.Listen takes it for 0 and listens wherever the
			// system picks: a port left out would serve on a port
			// nobody knows. 0 says so on purpose.
			ck.bad(a.key, "%q has no port: write one (0 lets the system pick a free one)", a.addr)
			continue
		}
		// The port listening would use: a number from 0 to 65535 or a
		// service name, looked up as net.Listen looks it up.
		if _, err := net.LookupPort("tcp", port); err != nil {
			ck.bad(a.key, "%q: port %q is not a port number (0 to 65535) or a known service", a.addr, port)
		}
	}
	if sameSocket(c.Listen, c.Admin) {
		ck.bad("admin", "%q must differ from listen (%s): the admin endpoints stay off the proxy port, and one address would take the other's", c.Admin, c.Listen)
	}
	if len(c.Backends) == 0 {
		ck.bad("backends", "at least one backend URL is required")
	}
	seen := make(map[string]int, len(c.Backends)) // backendKey (or the URL as written) to its number
	for i, raw := range c.Backends {
		// Every error names the backend without its password: a reload
		// refused is logged, and the log is no place for a credential.
		b := redactPassword(raw)
		u, err := url.Parse(raw)
		valid := err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
		key := raw
		if valid {
			key = backendKey(u)
		}
		// A backend's breaker, and its breaker_state series, are named
		// by its URL as written: listed twice, the two series collide
		// and every scrape of /metrics fails; written two ways, it has
		// two breakers, and twice its share of the requests.
		if j, ok := seen[key]; ok {
			c.twiceBackend(ck, i+1, j)
			continue
		}
		seen[key] = i + 1
		if !valid {
			ck.bad("backends", "backend %d (%q) is not an absolute http or https URL", i+1, b)
			continue
		}
		// What the proxy would drop or could never dial is refused
		// rather than ignored: an empty host dials this machine, a
		// port out of range fails every request, and neither user
		// info nor a fragment is ever sent to the backend.
		if u.Hostname() == "" {
			ck.bad("backends", "backend %d (%q) has no host name", i+1, b)
		}
		if p := u.Port(); p != "" {
			if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
				if b != raw {
					// The port url.Parse read may be a password's
					// digits, up to a "/", "?" or "#" in it.
					p = "xxxxx"
				}
				ck.bad("backends", "backend %d (%q): port %s is not a port number (1 to 65535)", i+1, b, p)
			}
		}
		if u.User != nil {
			ck.bad("backends", "backend %d (%q) has user info, which the proxy never sends to it", i+1, b)
		}
		if u.Fragment != "" || strings.HasSuffix(raw, "#") {
			ck.bad("backends", "backend %d (%q) has a fragment, which is never sent", i+1, b)
		}
	}
	c.checkTLS(ck)
	positive(ck, "max_conns", c.MaxConns)
	positive(ck, "max_conns_per_client", c.MaxConnsPerClient)
	if c.MaxConns > 0 && c.MaxConnsPerClient > c.MaxConns {
		// A client's share larger than the whole caps nothing max_conns
		// does not: the file means something else (a max_conns lowered
		// without its share), and the gateway would not do it.
		ck.bad("max_conns_per_client", "%d is more than max_conns (%d)", c.MaxConnsPerClient, c.MaxConns)
	}
	positive(ck, "admin_max_conns", c.AdminMaxConns)
	positive(ck, "http2_max_streams", c.HTTP2MaxStreams)
	if int64(c.HTTP2MaxStreams) > math.MaxUint32 {
		ck.bad("http2_max_streams", "%d is too large: at most %d (HTTP/2's own limit)", c.HTTP2MaxStreams, uint32(math.MaxUint32))
	}
	positive(ck, "max_header_bytes", c.MaxHeaderBytes)
	if c.MaxHeaderBytes > MaxHeaderBytesLimit {
		ck.bad("max_header_bytes", "%d is too large: at most %d (1 GiB)", c.MaxHeaderBytes, MaxHeaderBytesLimit)
	}
	c.checkTenant(ck)

	// Limits are checked by policy itself, one option at a time, so the rules
	// and their wording stay policy's.
	l := c.Limits
	checkOpt(ck, "limits.global_max_in_flight", l.GlobalMaxInFlight, policy.WithGlobalMaxInFlight)
	checkOpt(ck, "limits.max_in_flight_per_group", l.MaxInFlightPerGroup, policy.WithDefaultMaxInFlight)
	checkOpt(ck, "limits.max_concurrency_per_group", l.MaxConcurrencyPerGroup, policy.WithDefaultMaxConcurrency)
	checkOpt(ck, "limits.queue_threshold_per_group", l.QueueThresholdPerGroup, policy.WithDefaultQueueThreshold)
	checkOpt(ck, "limits.global_queue_threshold", l.GlobalQueueThreshold, policy.WithGlobalQueueThreshold)
	checkOpt(ck, "limits.queue_timeout", l.QueueTimeout, policy.WithQueueTimeout)
	checkRate(ck, "rate_limit", c.RateLimit)
	names := make([]string, 0, len(c.Tenants))
	for name := range c.Tenants {
		names = append(names, name)
	}
	sort.Strings(names)
	folded := make(map[string]string, len(names)) // with tenant.from path: lower-cased key to the first name
	for _, name := range names {
		t, k := c.Tenants[name], "tenants."+name
		if !ValidTenant(name) {
			ck.bad(k, "%q is not a valid tenant key (%s)", name, tenantRule)
			continue
		}
		if c.Tenant.From == FromPath {
			// A backend that matches paths without regard to case (IIS,
			// many Windows and some Java servers) serves one tenant's
			// paths for the other's, each under its own limits.
			if other, ok := folded[strings.ToLower(name)]; ok {
				ck.bad(k, "%q and %q differ only in case: with tenant.from path, a backend that ignores case serves one's paths for the other", name, other)
			} else {
				folded[strings.ToLower(name)] = name
			}
		}
		if key := HostKey(name); c.Tenant.From == FromHost && key == "" {
			ck.bad(k, "%q can never match: with tenant.from host a host whose last label is a number must be an IPv4 address", name)
		} else if c.Tenant.From == FromHost && strings.IndexByte(key, ':') >= 0 && !isIPv6(key) {
			// The gateway reads the Host without its port, and refuses
			// one with more colons that is no IPv6 address.
			ck.bad(k, "%q can never match: with tenant.from host the key is the Host without its port, and a key with a colon must be an IPv6 address", name)
		} else if c.Tenant.From == FromHost && key != name {
			ck.bad(k, "%q can never match: with tenant.from host the key is the Host lower-cased, without a trailing dot, an IP address in its canonical form; write %q", name, key)
		}
		group := func(f func(string, int) policy.Option) func(int) policy.Option {
			return func(n int) policy.Option { return f(name, n) }
		}
		checkOpt(ck, k+".max_concurrency", t.MaxConcurrency, group(policy.WithGroupMaxConcurrency))
		checkOpt(ck, k+".max_in_flight", t.MaxInFlight, group(policy.WithGroupMaxInFlight))
		checkOpt(ck, k+".queue_threshold", t.QueueThreshold, group(policy.WithGroupQueueThreshold))
		checkOpt(ck, k+".share", t.Share, group(policy.WithGroupShare))
		checkRate(ck, k+".rate_limit", t.RateLimit)
	}

	switch c.Breaker.Per {
	case PerBackend, PerTenant:
	default:
		ck.bad("breaker.per", "%q is not one of backend, tenant", c.Breaker.Per)
	}
	positive(ck, "breaker.consecutive_failures", c.Breaker.ConsecutiveFailures)
	positive(ck, "breaker.timeout", c.Breaker.Timeout)
	positive(ck, "breaker.max_timeout", c.Breaker.MaxTimeout)
	if c.Breaker.On() && c.Breaker.Per == PerTenant && ck.present("breaker.max_timeout") {
		// The tenants' breakers (the executor's) stay open
		// breaker.timeout each time, without backoff: the cap would be
		// dropped without a word, and breaker.per needs a restart.
		// Disabled breakers keep their keys for a later config.
		ck.bad("breaker.max_timeout", "%v is never used with breaker.per: tenant, whose breakers stay open breaker.timeout without backoff: leave it out", c.Breaker.MaxTimeout)
	} else if c.Breaker.MaxTimeout > 0 && c.Breaker.MaxTimeout < c.Breaker.Timeout {
		ck.bad("breaker.max_timeout", "%v is shorter than breaker.timeout (%v)", c.Breaker.MaxTimeout, c.Breaker.Timeout)
	}
	positive(ck, "breaker.max_requests", c.Breaker.MaxRequests)
	if int64(c.Breaker.MaxRequests) > math.MaxUint32 {
		ck.bad("breaker.max_requests", "%d is out of range (1 to %d)", c.Breaker.MaxRequests, uint32(math.MaxUint32))
	}
	for _, d := range []struct {
		key string
		d   time.Duration
	}{
		{"timeouts.read_header", c.Timeouts.ReadHeader}, {"timeouts.read", c.Timeouts.Read},
		{"timeouts.write", c.Timeouts.Write}, {"timeouts.idle", c.Timeouts.Idle},
		{"timeouts.upstream", c.Timeouts.Upstream},
	} {
		positive(ck, d.key, d.d)
	}
	positive(ck, "body.max_bytes", c.Body.MaxBytes)
	positive(ck, "body.max_decoded_bytes", c.Body.MaxDecodedBytes)
	positive(ck, "body.max_ratio", c.Body.MaxRatio)
	nonNegative(ck, "body.buffer_bytes", c.Body.BufferBytes)
	if d := c.Body.SpoolDir; d != "" {
		// Checked now, as the files a config names are loaded now: a
		// directory that is not there fails every body over
		// buffer_bytes (500 spool_failed), long after the config was
		// taken.
		if fi, err := os.Stat(d); err != nil {
			ck.bad("body.spool_dir", "%q: %v", d, errors.Unwrap(err))
		} else if !fi.IsDir() {
			ck.bad("body.spool_dir", "%q is not a directory", d)
		}
	}
	positive(ck, "body.spool_max_bytes", c.Body.SpoolMaxBytes)
	positive(ck, "body.spool_max_bytes_per_client", c.Body.SpoolMaxBytesPerClient)
	if c.Body.SpoolMaxBytes > 0 && c.Body.SpoolMaxBytesPerClient > c.Body.SpoolMaxBytes {
		// A share larger than the whole caps nothing the total does not.
		ck.bad("body.spool_max_bytes_per_client", "%d is more than body.spool_max_bytes (%d)",
			c.Body.SpoolMaxBytesPerClient, c.Body.SpoolMaxBytes)
	}
	nonNegative(ck, "response.buffer_bytes", c.Response.BufferBytes)
	nonNegative(ck, "drain_delay", c.DrainDelay)
	positive(ck, "drain_timeout", c.DrainTimeout)
	if c.Metrics.Namespace == "" {
		// No prefix: every metric would be outside the namespace the
		// docs put it under. Refused as a 0 is where it means nothing.
		ck.bad("metrics.namespace", "%q is not a metric name prefix ([a-zA-Z_][a-zA-Z0-9_]*): leave the key out for its default", c.Metrics.Namespace)
	} else if !validMetricPrefix(c.Metrics.Namespace) {
		ck.bad("metrics.namespace", "%q is not a metric name prefix ([a-zA-Z_][a-zA-Z0-9_]*)", c.Metrics.Namespace)
	}
	return ck.ps
}

func (c *Config) checkTenant(ck *checker) {
	t := &c.Tenant
	t.Bearer.checkValues(ck)
	switch t.From {
	case FromHeader, FromHost, FromPath:
	case FromClientCert:
		if c.TLS.ClientCAFile == "" {
			ck.bad("tenant.from", "client_cert needs tls.client_ca_file, to verify the certificates")
		}
	case FromBearer:
		t.Bearer.check(ck)
	default:
		ck.bad("tenant.from", "%q is not one of header, host, path, client_cert, bearer", t.From)
	}
	if !validHeaderName(t.Header) {
		ck.bad("tenant.header", "%q is not a valid header name", t.Header)
	} else if proxyHeaders[textproto.CanonicalMIMEHeaderKey(t.Header)] {
		ck.bad("tenant.header", "%q is a header net/http or the proxy reads, sets or drops itself: it cannot carry the tenant to the backend", t.Header)
	} else if t.From == FromBearer && textproto.CanonicalMIMEHeaderKey(t.Header) == "Authorization" {
		// Set to the tenant on the proxied request, it would replace
		// the token the backend is sent, without a word.
		ck.bad("tenant.header", "%q is the header the bearer token is read from: the tenant set in it would replace the token the backend is sent", t.Header)
	}
	t.Header = textproto.CanonicalMIMEHeaderKey(t.Header)
	if len(t.PathPrefix) == 0 || t.PathPrefix[0] != '/' {
		ck.bad("tenant.path_prefix", "%q must start with /", t.PathPrefix)
	} else if esc := (&url.URL{Path: t.PathPrefix}).EscapedPath(); esc != t.PathPrefix {
		// The prefix is matched against the path as sent, where such a
		// character arrives escaped.
		ck.bad("tenant.path_prefix", "%q can never match: a URL path carries it escaped (%q)", t.PathPrefix, esc)
	} else if why := lenientlyRead(t.PathPrefix); why != "" {
		ck.bad("tenant.path_prefix", "%q can never match: it has %s, which a backend may read otherwise, and the gateway refuses such a path", t.PathPrefix, why)
	}
	t.trusted = t.trusted[:0]
	for _, s := range t.TrustedProxies {
		p, err := parsePrefix(s)
		var hb *hostBitsError
		if errors.As(err, &hb) {
			ck.bad("tenant.trusted_proxies", "%q has address bits set past its length: it would trust all of %s; write that, or the address alone for one proxy", s, hb.masked)
			continue
		}
		if errors.Is(err, errZone) {
			ck.bad("tenant.trusted_proxies", "%q has a zone: entries are matched without one; write it without its %%zone (trusted on every interface)", s)
			continue
		}
		if err != nil {
			ck.bad("tenant.trusted_proxies", "%q is not a CIDR or an address", s)
			continue
		}
		t.trusted = append(t.trusted, p)
	}
	if !ValidTenant(t.Default) {
		ck.bad("tenant.default", "%q is not a valid tenant key (%s)", t.Default, tenantRule)
	} else if t.Require && ck.present("tenant.default") {
		// An operator setting both expects the default tenant to serve
		// something, which under require it never does.
		ck.bad("tenant.default", "%q is never used with tenant.require: true, which refuses a request naming no tenant: leave one of them out", t.Default)
	}
	nonNegative(ck, "tenant.max_groups", t.MaxGroups)
}

// sameSocket reports whether listening at a and then at b would take one
// port twice: the same port (not 0, which picks a free one) on the same
// host, or on any host where either address has none or the unspecified
// one (":8080", "0.0.0.0:8080", "[::]:8080" listen on every address).
func sameSocket(a, b string) bool {
	ha, pa, errA := net.SplitHostPort(a)
	hb, pb, errB := net.SplitHostPort(b)
	if errA != nil || errB != nil {
		return false
	}
	na, errA := net.LookupPort("tcp", pa)
	nb, errB := net.LookupPort("tcp", pb)
	if errA != nil || errB != nil || na != nb || na == 0 {
		return false
	}
	every := func(h string) bool {
		ip := net.ParseIP(h)
		return h == "" || ip != nil && ip.IsUnspecified()
	}
	return ha == hb || every(ha) || every(hb) || sameHost(ha, hb)
}

// sameHost reports whether the listen hosts a and b name one address: the
// same IP written two ways ("::ffff:127.0.0.1" and "127.0.0.1"), or
// localhost, which Go listens on as 127.0.0.1 or ::1, and an IP of those.
// Other host names are not looked up: what they resolve to is the
// running machine's to say.
func sameHost(a, b string) bool {
	loopback := func(h string) bool {
		return strings.EqualFold(strings.TrimSuffix(h, "."), "localhost")
	}
	ia, errA := netip.ParseAddr(a)
	ib, errB := netip.ParseAddr(b)
	switch {
	case errA == nil && errB == nil:
		return ia.Unmap() == ib.Unmap()
	case errA == nil && loopback(b):
		ia = ia.Unmap()
		return ia == netip.IPv6Loopback() || ia == netip.AddrFrom4([4]byte{127, 0, 0, 1})
	case errB == nil && loopback(a):
		return sameHost(b, a)
	}
	return loopback(a) && loopback(b)
}

// proxyHeaders are the headers tenant.header cannot be: the server takes
// Host out of the header and frames the message with Content-Length and
// Transfer-Encoding, the proxy drops the hop-by-hop headers (RFC 9110
// 7.6.1) and Forwarded and writes the X-Forwarded ones and X-Real-IP, and
// the gateway drops Expect and Content-Encoding once it has the body. The
// tenant set in one of them would not reach the backend, and with
// tenant.from header, Host would never be read.
var proxyHeaders = map[string]bool{
	"Host": true, "Content-Length": true, "Transfer-Encoding": true, "Trailer": true, "Te": true,
	"Connection": true, "Proxy-Connection": true, "Keep-Alive": true, "Upgrade": true,
	"Proxy-Authenticate": true, "Proxy-Authorization": true,
	"X-Forwarded-For": true, "X-Forwarded-Host": true, "X-Forwarded-Proto": true, "X-Real-Ip": true,
	"Forwarded": true, "Expect": true, "Content-Encoding": true,
}

func checkRate(ck *checker, key string, r *RateLimit) {
	if r == nil {
		return
	}
	if r.RPS <= 0 || math.IsInf(r.RPS, 0) || math.IsNaN(r.RPS) {
		ck.bad(key+".rps", "%v is not a rate: it must be > 0 (leave rate_limit out for none)", r.RPS)
	}
	positive(ck, key+".burst", r.Burst)
}

// checkOpt hands a set value to policy.New through opt and reports policy's
// reason when it refuses it.
func checkOpt[T any](ck *checker, key string, v *T, opt func(T) policy.Option) {
	if v == nil {
		return
	}
	_, err := policy.New(opt(*v))
	var oe *policy.OptionError
	switch {
	case errors.As(err, &oe):
		ck.bad(key, "%v is invalid: %s", *v, oe.Reason)
	case err != nil:
		ck.bad(key, "%v", err)
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

func validMetricPrefix(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// redactPassword returns the backend URL raw with the password of its user
// info, if any, replaced by "xxxxx", as url.URL.Redacted does; raw is read
// as written even where url.Parse refuses it or reads it otherwise, since
// the errors about such a URL name it too. The user info ends at the last
// "@": a host holds none, and a password may hold a "/", "?" or "#" its
// writer did not escape, which url.Parse takes for the path, query or
// fragment (and then refuses the port, or names the user a host). A URL
// without "://" (the scheme forgotten) is read from its start. A path
// holding an "@" after a ":" is masked as well: better a part of a URL
// not shown in an error than a password shown in the log.
func redactPassword(raw string) string {
	prefix, rest := "", raw
	if scheme, after, ok := strings.Cut(raw, "://"); ok {
		prefix, rest = scheme+"://", after
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return raw
	}
	user, _, hasPassword := strings.Cut(rest[:at], ":")
	if !hasPassword {
		return raw
	}
	return prefix + user + ":xxxxx" + rest[at:]
}

// isIPv6 reports whether s is an IPv6 address (HostKey's canonical form of
// one has a colon; no host name does).
func isIPv6(s string) bool {
	a, err := netip.ParseAddr(s)
	return err == nil && a.Is6()
}

// lenientlyRead says what of the path prefix p a lenient backend reads
// otherwise ("" if nothing): two slashes in a row (merged), a segment's
// parameters (dropped from ';' on) or a dot-segment (removed). With
// tenant.from path the gateway refuses a path that a backend may read
// otherwise than as sent, and every path under such a prefix is one:
// taken, the prefix named no tenant, each request under it refused 400
// invalid_tenant.
func lenientlyRead(p string) string {
	switch {
	case strings.Contains(p, "//"):
		return "two slashes in a row"
	case strings.IndexByte(p, ';') >= 0:
		return "a ';' (path parameters)"
	}
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "." || seg == ".." {
			return "a dot-segment (" + seg + ")"
		}
	}
	return ""
}
