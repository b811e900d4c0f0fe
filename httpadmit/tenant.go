package httpadmit

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"

	"github.com/groupexec/groupexec/internal/adapt"
	"github.com/groupexec/groupexec/internal/clip"
)

// DefaultHeader is the header Handler reads the tenant from by default.
const DefaultHeader = "X-Tenant"

// DefaultGroup is the group of the requests that name no tenant, unless
// WithDefaultGroup says otherwise.
const DefaultGroup = "default"

// MaxTenantLen is the longest tenant key accepted, in bytes.
const MaxTenantLen = adapt.MaxTenantLen

// ValidTenant reports whether s may name a tenant: 1 to MaxTenantLen bytes,
// each a printable ASCII character other than space (0x21 to 0x7E). Keys come
// from clients and end up in logs and metrics; the rule keeps them short and
// printable, with no control characters and nothing to split on.
func ValidTenant(s string) bool { return adapt.ValidTenant(s) }

// tenantFunc returns a request's tenant key: "" when the request names none,
// or an error matching ErrInvalidTenant.
type tenantFunc func(*http.Request) (string, error)

// fromHeader reads the tenant from header name. An absent header names no
// tenant; a header present more than once, or empty once spaces and tabs
// around it are trimmed, is invalid: a client or proxy that sends one has
// said something, and guessing which value it meant would let a second
// header line pick the group.
func fromHeader(name string) tenantFunc {
	key := http.CanonicalHeaderKey(name)
	where := "header " + key
	return func(r *http.Request) (string, error) { return adapt.One(where, r.Header[key]) }
}

// fromHost reads the tenant from the request's Host, lower-cased, without
// its port, an IPv6 literal's brackets or a name's trailing dots, an IPv6
// address in its canonical form (an IPv4-mapped one as its IPv4 address),
// and an internationalized name in its ASCII form (a Transport's outgoing
// request may carry the Unicode one, which net/http sends as ASCII):
// each spelling of one virtual host is one group, so that a client cannot
// spread a host's requests over several groups, each with the host's
// limits, by respelling it. An outgoing request without a Host is read
// by its URL's host, which net/http sends then (httputil.ReverseProxy's
// SetURL leaves Host empty); a server's request without one (HTTP/1.0)
// has none in its URL either, and names no tenant. One whose port is not
// a number is invalid, and so is one with a colon that is neither an IPv6
// address's nor the port's ("acme.example:1:2").
func fromHost(r *http.Request) (string, error) {
	host := r.Host
	if host == "" && r.URL != nil {
		host = r.URL.Host // as net/http's Request.Write sends it
	}
	if host == "" {
		return "", nil
	}
	sent := host
	if h, port, err := net.SplitHostPort(host); err == nil {
		if strings.Trim(port, "0123456789") != "" {
			// net/http takes a Host such as "acme.example:1,victim.example",
			// and a proxy in next passes it whole in X-Forwarded-Host, where
			// a backend taking the last host of a list (Rails, Werkzeug's
			// ProxyFix) serves victim.example under acme.example's limits.
			return "", fmt.Errorf("%w: host %s: its port is not a number", ErrInvalidTenant, clip.Quote(host))
		}
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.Contains(host, ":") {
		if _, err := netip.ParseAddr(host); err != nil {
			// A colon is no part of a name (RFC 3986 3.2.2): net/http
			// takes "acme.example:1:2", which a backend reading the host
			// up to its first colon serves as acme.example, and each such
			// spelling would be a group of its own, with the host's
			// limits.
			return "", fmt.Errorf("%w: host %s: a colon that is neither an IPv6 address's nor the port's", ErrInvalidTenant, clip.Quote(sent))
		}
	}
	return adapt.Checked("host", canonicalHost(host))
}

// canonicalHost returns host (without port or brackets) lower-cased, without
// a name's trailing dots, an IPv6 address in its canonical form (an
// IPv4-mapped one as its IPv4 address) and an internationalized name in
// its ASCII form (idnaHost): the one spelling of each host, so that the
// spellings of a host are one group, not one each with the host's limits.
func canonicalHost(host string) string {
	if strings.Contains(host, ":") { // only IPv6 is parsed: a failed parse allocates its error
		if a, err := netip.ParseAddr(host); err == nil {
			// An IPv4-mapped address ("::ffff:192.0.2.1") is its IPv4
			// address: one host, one group.
			host = a.Unmap().String()
		}
	} else if h := strings.TrimRight(idnaHost(host), "."); h != "" {
		// "acme.example." is "acme.example", and so is "acme.example..":
		// with one dot trimmed, each added dot would spell a group of its
		// own, with the host's limits (the gateway trims them all too).
		host = h
	}
	return strings.ToLower(host)
}

// idnaHost returns an internationalized host name in its ASCII form, as
// net/http dials it and sends it as the Host header (idna.Lookup, Unicode
// case and dots mapped): each of its Unicode spellings and its Punycode
// one are one host. An ASCII host, which needs nothing, is returned as it
// is without a call, and one that idna refuses is left as it is, as
// net/http leaves it; so is one too long to be a DNS name (dnsSized),
// which idna would take time in the square of its labels' lengths to map.
func idnaHost(host string) string {
	for i := 0; i < len(host); i++ {
		if host[i] >= utf8.RuneSelf {
			if !dnsSized(host) {
				return host
			}
			if a, err := idna.Lookup.ToASCII(host); err == nil {
				return a
			}
			return host
		}
	}
	return host
}

// dnsSized reports whether host, an internationalized name, has at most
// 253 characters, and at most 63 in each label: each character of a name
// takes at least one of its ASCII form, and DNS allows no more. The Lookup
// profile checks no length, and its Punycode takes time in the square of a
// label's characters: the Host of an HTTP/2 request (which net/http does
// not hold to ASCII, as it does HTTP/1's) of 48 KB, distinct characters in
// one label, took seconds to map, only for the tenant to be refused as too
// long. Such a host names nothing DNS can resolve.
func dnsSized(host string) bool {
	n, label := 0, 0
	for _, r := range host {
		switch r {
		case '.', '\u3002', '\uff0e', '\uff61': // the dots idna maps to "."
			label = 0
		default:
			if label++; label > 63 {
				return false
			}
		}
		if n++; n > 253 {
			return false
		}
	}
	return true
}

// fromPathSegment reads the tenant from the i-th segment (0 is the first) of
// the request's URL path, decoded: segment 1 of "/t/acme/orders" is "acme".
// A path with fewer segments, or an empty one there ("/t//orders"), names no
// tenant.
//
// The segments are those of the path as sent, each decoded after the split,
// as http.ServeMux matches its patterns: splitting the decoded path instead
// would read "/t/ac%2Fme/x" as tenant "ac", while the mux routes it to
// "/t/{tenant}/x" as tenant "ac/me". A path with an escaped slash in or
// before the tenant's segment, which the two readings split otherwise (and
// a handler reading r.URL.Path sees as other segments than the mux), is
// invalid.
func fromPathSegment(i int) tenantFunc {
	return func(r *http.Request) (string, error) {
		// Without RawPath, the path as sent is Path escaped, and holds no
		// escaped slash: Path splits as it does.
		p, raw := r.URL.Path, r.URL.RawPath != ""
		if raw {
			p = r.URL.EscapedPath()
		}
		rest := strings.TrimPrefix(p, "/")
		for range i {
			var ok bool
			if _, rest, ok = strings.Cut(rest, "/"); !ok {
				return "", nil
			}
		}
		seg, _, _ := strings.Cut(rest, "/")
		if !raw {
			if seg == "" {
				return "", nil
			}
			return adapt.Checked("path segment", seg)
		}
		if hasEscapedSlash(p[:len(p)-len(rest)+len(seg)]) {
			return "", fmt.Errorf("%w: an escaped slash in or before path segment %d", ErrInvalidTenant, i)
		}
		key, err := url.PathUnescape(seg)
		if err != nil {
			return "", fmt.Errorf("%w: path segment %d: %v", ErrInvalidTenant, i, err)
		}
		if key == "" {
			return "", nil
		}
		return adapt.Checked("path segment", key)
	}
}

// hasEscapedSlash reports whether the escaped path p holds "%2F" (or "%2f").
func hasEscapedSlash(p string) bool {
	for {
		i := strings.Index(p, "%2")
		if i < 0 || i+2 >= len(p) {
			return false
		}
		if p[i+2] == 'F' || p[i+2] == 'f' {
			return true
		}
		p = p[i+2:]
	}
}

// fromContext reads the tenant from a context value, as set by an
// authentication middleware before Handler. No value names no tenant; a value
// that is not a string is invalid, so that a key set with the wrong type shows
// as refused requests rather than every tenant served in the default group.
func fromContext(key any) tenantFunc {
	return func(r *http.Request) (string, error) {
		v := r.Context().Value(key)
		if v == nil {
			return "", nil
		}
		s, ok := v.(string)
		if !ok {
			return "", fmt.Errorf("%w: context value of type %T, want string", ErrInvalidTenant, v)
		}
		return adapt.Checked("context value", s)
	}
}

// fromFunc adapts a user's tenant function: its error makes the request
// invalid, and the key it returns must pass ValidTenant.
func fromFunc(f func(*http.Request) (string, error)) tenantFunc {
	return func(r *http.Request) (string, error) { return adapt.FromFunc(f(r)) }
}
