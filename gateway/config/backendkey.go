package config

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// backendKey returns what the proxy makes of the backend URL u, an
// absolute http or https one: two URLs with one key are one backend,
// which the config refuses to list twice. The gateway keys a backend's
// breaker and its breaker_state series by the URL as written, so that
// two spellings of one backend would be two backends, with two breakers
// (one left closed while the other is open) and twice the backend's
// share of the requests; refused, they are neither, and the URL the
// gateway names the backend by stays the one the file wrote.
//
// Two URLs are one backend where the proxy sends the same request to the
// same origin (RFC 9110 4.2.3): the scheme and host in any case, an IP
// address in any spelling (an IPv4-mapped one as its IPv4 address), the
// scheme's default port written or left out; an empty path or "/", and a
// path with or without its trailing slash, which the request's path is
// joined to with one slash either way; an empty query or none. A host
// name's trailing dot is kept: a resolver with search domains may take
// "a" for another host than "a.". A path's case and its escapes are
// kept: the backend is sent them as written.
func backendKey(u *url.URL) string {
	host := u.Hostname()
	if a, err := netip.ParseAddr(host); err == nil {
		host = a.Unmap().String()
	} else {
		host = strings.ToLower(host)
	}
	port := u.Port()
	if n, err := strconv.Atoi(port); err == nil {
		port = strconv.Itoa(n)
	} else if port == "" && u.Scheme == "https" {
		port = "443"
	} else if port == "" {
		port = "80"
	}
	return u.Scheme + "://" + net.JoinHostPort(host, port) + strings.TrimSuffix(u.EscapedPath(), "/") + "?" + u.RawQuery
}

// twiceBackend reports backend i (from 1) as backend j listed again, by
// the backends' numbers as written, with j's spelling and line where i's
// is another.
func (c *Config) twiceBackend(ck *checker, i, j int) {
	b, first := redactPassword(c.Backends[i-1]), redactPassword(c.Backends[j-1])
	if c.Backends[i-1] == c.Backends[j-1] {
		ck.badItem("backends", i, "backend %d (%q) is backend %d again: list each backend once", i, b, j)
		return
	}
	where := ""
	if line := ck.itemLine("backends", j); line > 0 {
		where = fmt.Sprintf(", line %d", line)
	}
	ck.badItem("backends", i, "backend %d (%q) is backend %d (%q%s) again, written otherwise: list each backend once", i, b, j, first, where)
}
