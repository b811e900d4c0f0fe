package gateway

import (
	"iter"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/gateway/config"
)

// OverflowGroup is the group shared by the tenants that arrive while
// tenant.max_groups others are live. config.ValidTenant refuses keys starting
// with '_', so no request can name it.
const OverflowGroup = "_overflow"

// ExtractTenant returns the tenant key of r as t says where to find it: ""
// when r carries none (or names one from an address t does not trust), an
// error matching ErrInvalidTenant when the key breaks config.ValidTenant
// (with tenant.from path, an empty segment followed by more path too, a
// path that a lenient backend would read with a dot-segment or as naming
// another tenant, see lenientPath, casePrefix and pathInfos, and a query that names
// another tenant's path or has a parameter a backend routes by, see
// pathParam; with tenant.from host, a port that is not a
// number, or more than one colon in a host that is no IPv6 address),
// or one matching ErrUnauthenticated when its bearer token or client
// certificate is refused or names no tenant (an empty claim or common name),
// or r has more than one Authorization header or an access_token query
// parameter.
// The gateway also refuses a path key that is a configured tenant's only in
// another case, which t alone cannot tell (see state.caseTwin).
func ExtractTenant(t *config.Tenant, r *http.Request) (string, error) {
	return extractTenant(t, r, time.Now())
}

// extractTenant is ExtractTenant with the time bearer tokens are checked at.
func extractTenant(t *config.Tenant, r *http.Request, now time.Time) (string, error) {
	var key string
	switch t.From {
	case config.FromClientCert:
		// The handshake required and verified the certificate.
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
			return "", certError("none verified")
		}
		// A certificate without a common name names no tenant: it is
		// refused as a missing certificate is, not served as the default
		// tenant, a tenant the CA never vouched for.
		if key = r.TLS.VerifiedChains[0][0].Subject.CommonName; key == "" {
			return "", certError("it has no common name")
		}
	case config.FromBearer:
		tok, ok, err := bearerToken(r)
		if err != nil || !ok {
			return "", err
		}
		if key, err = verifyToken(&t.Bearer, tok, now); err != nil {
			return "", err
		}
	default:
		if len(t.TrustedProxies) > 0 && !t.Trusts(peer(r)) {
			return "", nil
		}
		switch t.From {
		case config.FromHost:
			key = r.Host
			if h, port, err := net.SplitHostPort(key); err == nil {
				if strings.Trim(port, "0123456789") != "" {
					// Neither net/http nor SplitHostPort checks the
					// port: "acme.example:1,victim.example" would be
					// acme's, while the backend gets the Host whole,
					// in X-Forwarded-Host, and one taking the last
					// host of a list there (Rails, Werkzeug's
					// ProxyFix) serves victim.example.
					return "", ErrInvalidTenant
				}
				key = h
			}
			// Each spelling of one host is one key: without this a
			// client could spread a host's requests over several
			// groups, each with the host's limits or the defaults.
			if key != "" {
				// A host that is no address however read
				// ("1.2.3.256") names no tenant, nor the default.
				if key = config.HostKey(strings.Trim(key, "[]")); key == "" {
					return "", ErrInvalidTenant
				}
				if strings.IndexByte(key, ':') >= 0 {
					// A colon left is an IPv6 address's, or one of a
					// Host SplitHostPort could not split:
					// "acme.example:1:2" is acme.example to a backend
					// taking the host up to its first colon (Express's
					// req.hostname, from X-Forwarded-Host), and kept, a
					// tenant of its own.
					if _, err := netip.ParseAddr(key); err != nil {
						return "", ErrInvalidTenant
					}
				}
			}
		case config.FromPath:
			// The path as sent, as the backend gets it: decoded, "%2F"
			// would split a segment in two and "%61" spell a key the
			// backend never sees. A segment with an escape breaks
			// config.ValidTenant, and a prefix matches only as written
			// (a path that matches it once decoded is refused, below).
			p := r.URL.EscapedPath()
			var err error
			if key, err = pathKey(p, t.PathPrefix); err != nil {
				return "", err
			}
			// A backend may read the path otherwise than as sent: the
			// key must be the one it names however it is read. A path
			// with none of "%", ";", "\" and "//" reads the same every
			// way, and costs nothing more, but a comparison of its
			// start with the prefix in any case (casePrefix).
			lp := p
			if strings.ContainsAny(p, "%;\\") || strings.Contains(p, "//") {
				lp = lenientPath(p)
			}
			lp = casePrefix(lp, t.PathPrefix)
			if hasDotSegment(lp) {
				// "/x/../t/acme" names no tenant as sent, but a backend
				// that cleans it serves acme's path, under the default
				// tenant's limits; so do "/x/..;/t/acme" to one that
				// drops path parameters (Tomcat) and "/x\..\t/acme"
				// to one taking a backslash for a slash. Clients remove
				// dot-segments before they send (RFC 3986, 5.2.4): one
				// that does not is refused.
				return "", ErrInvalidTenant
			}
			if lp != p {
				// "//t/acme", "/t;v=1/acme", "/t\acme", "/%74/acme" and
				// "/T/acme" name no tenant as sent, but a backend that
				// merges slashes (nginx's merge_slashes, a router that
				// cleans paths), drops path parameters, takes a
				// backslash for a slash, decodes escapes or matches
				// paths without regard to case before it routes serves
				// acme's path.
				if lk, err := pathKey(lp, t.PathPrefix); err != nil || lk != key {
					return "", ErrInvalidTenant
				}
			}
			for info := range pathInfos(lp) {
				// "/index.php/t/victim/x" names no tenant as sent, but
				// PHP runs index.php with the rest as its PATH_INFO, and
				// Symfony and Laravel, which strip the script's name
				// from the path, route it as "/t/victim/x".
				if ik, err := casePathKey(info, t.PathPrefix); err != nil || ik != "" && ik != key {
					return "", ErrInvalidTenant
				}
			}
			if q := r.URL.RawQuery; strings.HasPrefix(q, "/") {
				// "/index.php?/t/victim/x" or "/?/t/victim/x": CodeIgniter
				// routes a query starting with a slash, on a path naming
				// nothing past the script, as the path (the form nginx
				// setups rewrite to).
				q, _, _ = strings.Cut(q, "?")
				if qk, err := casePathKey(lenientPath(q), t.PathPrefix); err != nil || qk != "" && qk != key {
					return "", ErrInvalidTenant
				}
			}
			if r.URL.RawQuery != "" && hasParam(r.URL.RawQuery, pathParam) {
				// Phalcon routes by its _url parameter, not the path
				// ("/t/acme/x?_url=/t/victim/y" is victim's path to it),
				// and behind nginx's documented rewrite, which appends
				// the client's query after its own _url, PHP reads the
				// client's, the last.
				return "", ErrInvalidTenant
			}
		default:
			vs := r.Header.Values(t.Header)
			if len(vs) > 1 {
				// Two lines are one value, "a, b" (RFC 9110 5.3), which
				// names no tenant. Reading the first would let a client
				// speak for a proxy that adds its line after the
				// client's instead of replacing it.
				return "", ErrInvalidTenant
			}
			if len(vs) == 1 {
				key = strings.TrimSpace(vs[0])
			}
		}
	}
	if key == "" {
		return "", nil
	}
	if !config.ValidTenant(key) {
		return "", ErrInvalidTenant
	}
	return key, nil
}

// pathParam is the query parameter a backend may route by instead of the
// path: Phalcon's _url, its name read as PHP reads it (queryParams).
const pathParam = "_url"

// hasParam reports whether the escaped query q has a parameter that PHP
// reads as name.
func hasParam(q, name string) bool {
	found := false
	queryParams(q, name, func(string) bool {
		found = true
		return false
	})
	return found
}

// pathKey returns the segment of the escaped path p after prefix, "" when
// p does not start with it, or ErrInvalidTenant when the segment is empty
// and more path follows.
func pathKey(p, prefix string) (string, error) {
	rest, ok := strings.CutPrefix(p, prefix)
	if !ok {
		return "", nil
	}
	return keyAfter(rest, prefix)
}

// casePathKey is pathKey of casePrefix(p, prefix), without building that
// path: a path may hold thousands of ".php" segments, each with a
// PATH_INFO to check (pathInfos), and a copy of the rest of the path for
// each cost the square of the path's length (a quarter of a second of CPU
// for one request within max_header_bytes' 64 KiB), before the request's
// rate limit.
func casePathKey(p, prefix string) (string, error) {
	n := len(prefix)
	if !strings.HasPrefix(p, prefix) {
		if n = foldedPrefixLen(p, prefix); n < 0 {
			return "", nil
		}
	}
	return keyAfter(p[n:], prefix)
}

// keyAfter is pathKey given rest, the path after prefix.
func keyAfter(rest, prefix string) (string, error) {
	if !strings.HasSuffix(prefix, "/") {
		// The prefix names whole segments: "/t" is followed by "/",
		// else the path only starts with the same letters.
		var ok bool
		if rest, ok = strings.CutPrefix(rest, "/"); !ok {
			return "", nil
		}
	}
	key, _, more := strings.Cut(rest, "/")
	if key == "" && more {
		// "/t//acme": the segment is there, but empty. Served as the
		// default tenant, its path would reach a backend that may clean
		// it into acme's.
		return "", ErrInvalidTenant
	}
	return key, nil
}

// casePrefix returns p with its start written as prefix when it is prefix
// in another case ("/T/acme" for "/t"), else p itself: the path as a
// backend matching paths without regard to case reads it. Express and
// ASP.NET Core route so by default, and IIS serves files so; each serves
// "/T/acme/x" as acme's path, which names no tenant as sent. The case is
// Unicode's, as strings.EqualFold folds it: the Kelvin sign K (U+212A) is
// a k and the long s ſ (U+017F) an s, though longer in bytes, to a
// backend folding so (Go's EqualFold, a regular expression matching
// Unicode without regard to case, .NET's OrdinalIgnoreCase for ſ); such a
// start was compared byte for byte as long as the prefix, which it never
// matched, and "/ſ/acme" for "/s" was the default tenant's.
func casePrefix(p, prefix string) string {
	if strings.HasPrefix(p, prefix) {
		return p
	}
	if n := foldedPrefixLen(p, prefix); n >= 0 {
		return prefix + p[n:]
	}
	return p
}

// foldedPrefixLen returns the length in bytes of the start of p that is
// prefix under Unicode case folding, each character of p folding to the
// one of prefix in its place, or -1 when p does not so start.
func foldedPrefixLen(p, prefix string) int {
	i := 0
	for _, want := range prefix {
		if i == len(p) {
			return -1
		}
		r, size := utf8.DecodeRuneInString(p[i:])
		if r != want && !foldsTo(r, want) {
			return -1
		}
		i += size
	}
	return i
}

// foldsTo reports whether r and want are one character under Unicode's
// simple case folding, as strings.EqualFold compares them.
func foldsTo(r, want rune) bool {
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		if f == want {
			return true
		}
	}
	return false
}

// lenientPath returns the escaped path p as the most lenient backend reads
// it: its escapes decoded ("%2F" a slash, "%2e" a dot), a backslash taken
// for a slash, each segment's path parameters (from ';' on, as Tomcat and
// other servlet containers drop them) removed, and every run of slashes
// made one.
func lenientPath(p string) string {
	if d, err := url.PathUnescape(p); err == nil {
		p = d
	}
	b := make([]byte, 0, len(p))
	param := false // in a segment's parameters, dropped up to the next slash
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == '/' || c == '\\':
			param = false
			if len(b) == 0 || b[len(b)-1] != '/' {
				b = append(b, '/')
			}
		case param:
		case c == ';':
			param = true
		default:
			b = append(b, c)
		}
	}
	return string(b)
}

// pathInfos yields, for each segment of the path p that ends in ".php" (in
// any case) with more path after it, that path, from its slash: the
// PATH_INFO PHP runs the script with, which a front controller may route
// by instead of the path. A path without a dot costs a byte search.
func pathInfos(p string) iter.Seq[string] {
	return func(yield func(string) bool) {
		for i := 0; ; i++ {
			j := strings.IndexByte(p[i:], '.')
			if j < 0 {
				return
			}
			i += j
			if i+5 <= len(p) && lower(p[i+1]) == 'p' && lower(p[i+2]) == 'h' && lower(p[i+3]) == 'p' && p[i+4] == '/' &&
				!yield(p[i+4:]) {
				return
			}
		}
	}
}

// hasDotSegment reports whether the escaped path p has a "." or ".."
// segment, its dots escaped or not.
func hasDotSegment(p string) bool {
	for seg := range strings.SplitSeq(p, "/") {
		if len(seg) == 0 || len(seg) > 6 {
			continue // "%2e%2e" is the longest
		}
		switch strings.ReplaceAll(strings.ToLower(seg), "%2e", ".") {
		case ".", "..":
			return true
		}
	}
	return false
}

// certError says why a client certificate names no tenant; it matches
// ErrUnauthenticated.
type certError string

func (e certError) Error() string        { return "gateway: client certificate: " + string(e) }
func (e certError) Is(target error) bool { return target == ErrUnauthenticated }

// peer returns the address of r's connection (the zero Addr if unknown,
// which no prefix contains).
func peer(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr()
}

// groups caps how many unconfigured tenants have groups of their own at
// once. A tenant is live while it has a request being admitted or run
// (Gateway.admit: from the end of its body to the backend's answer, not
// while its client sends the body or reads a kept answer); the map holds
// only live tenants, so its size is bounded by max whatever keys arrive.
// Configured tenants and the default group are always their own groups.
//
// After a reload that changed the limits of unconfigured tenants, a tenant
// is given them (Executor.SetGroupLimits) as it becomes live and has them
// dropped (ResetGroupLimits) as it leaves, so that the executor keeps such
// limits for live tenants only. A tenant configured once (state.limited) is
// not: every reload gives it its limits, which dropping would turn back into
// those of the config the gateway started with.
type groups struct {
	ex    *executor.Executor
	fixed atomic.Pointer[map[string]bool]
	max   int

	mu sync.Mutex
	// cur is the state reload last gave: a tenant becoming live is given
	// its defaults, not those of the state its request read on arrival,
	// which a reload may have replaced since (and, having found the tenant
	// not live, left it out).
	cur  *state
	live map[string]*liveTenant // by unconfigured tenant

	// tenantLimits, if not nil, is called with a tenant each time the
	// executor is given its limits as it becomes live, or has them dropped
	// as it leaves (tests).
	tenantLimits func(tenant string)
}

type liveTenant struct {
	n   int  // requests in the gateway
	set bool // given the reloaded defaults
}

func newGroups(st *state, ex *executor.Executor) *groups {
	g := &groups{ex: ex, max: st.cfg.Tenant.MaxGroups, cur: st, live: make(map[string]*liveTenant)}
	g.fixed.Store(&st.fixed)
	return g
}

// acquire returns the group a request of tenant runs in, and whether it
// was counted: the caller must pass both to release when the request is
// done. The group is the state in force's, not that of the state the
// request read on arrival, which a reload may have replaced since: the
// executor already applies the new state's limits, so a tenant the reload
// removed is counted (or sent to the overflow group) as any unconfigured
// one, and one it added is its own group. A tenant becoming live gets the
// state in force's limits too.
func (g *groups) acquire(tenant string) (string, bool) {
	if (*g.fixed.Load())[tenant] {
		return tenant, false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	cur := g.cur
	if cur.fixed[tenant] {
		return tenant, false // configured by a reload since the check above
	}
	lt := g.live[tenant]
	if lt == nil {
		if len(g.live) >= g.max {
			return OverflowGroup, false
		}
		lt = &liveTenant{}
		g.live[tenant] = lt
		if cur.changed && !cur.limited[tenant] {
			lt.set = g.ex.SetGroupLimits(tenant, cur.defaults) == nil
			if g.tenantLimits != nil {
				g.tenantLimits(tenant)
			}
		}
	}
	lt.n++
	return tenant, true
}

// lookup returns the group acquire would return for tenant now, without
// acquiring it: a tenant made live and let go at once would, after a
// reload that changed the defaults, have them given to the executor and
// dropped again, and meanwhile hold a place, sending another new tenant to
// the overflow group.
func (g *groups) lookup(tenant string) string {
	if (*g.fixed.Load())[tenant] {
		return tenant
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cur.fixed[tenant] || g.live[tenant] != nil || len(g.live) < g.max {
		return tenant
	}
	return OverflowGroup
}

func (g *groups) release(group string, counted bool) {
	if !counted {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	lt := g.live[group]
	if lt.n--; lt.n > 0 {
		return
	}
	delete(g.live, group)
	if lt.set {
		_ = g.ex.ResetGroupLimits(group)
		if g.tenantLimits != nil {
			g.tenantLimits(group)
		}
	}
}

// reload gives the live unconfigured tenants st's defaults, or drops the
// ones they were given, and makes st's configured groups the labelled ones.
func (g *groups) reload(st *state) {
	g.mu.Lock()
	defer g.mu.Unlock()
	// Stored with cur, so that acquire, finding a tenant unconfigured in
	// fixed, finds it so in cur unless a reload has configured it since.
	g.fixed.Store(&st.fixed)
	g.cur = st
	for tenant, lt := range g.live {
		switch {
		case st.limited[tenant]:
			lt.set = false // configured now or before: the reload sets its limits
		case st.changed:
			lt.set = g.ex.SetGroupLimits(tenant, st.defaults) == nil
		case lt.set:
			_ = g.ex.ResetGroupLimits(tenant)
			lt.set = false
		}
	}
}

// labelled reports whether group gets metric series of its own: only groups
// whose names the operator chose, so metrics stay bounded.
func (g *groups) labelled(group string) bool { return (*g.fixed.Load())[group] }

// count returns how many unconfigured tenants are live.
func (g *groups) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.live)
}
