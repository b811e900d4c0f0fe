package config

import (
	"net/netip"
	"strings"
)

// MaxTenantLen is the longest tenant key accepted.
const MaxTenantLen = 128

const tenantRule = "1 to 128 of A-Z a-z 0-9 . _ : -, starting with a letter or digit"

// ValidTenant reports whether s may name a tenant: 1 to MaxTenantLen bytes of
// ASCII letters, digits, '.', '_', ':' and '-', starting with a letter or
// digit. Tenant keys come from requests, so they are attacker-controlled; the
// rule keeps them printable in logs and metrics, and leaves names starting
// with '_' to the gateway's own groups, so a request cannot claim one.
func ValidTenant(s string) bool {
	if len(s) == 0 || len(s) > MaxTenantLen || !isAlnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '.' && c != '_' && c != ':' && c != '-' {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// HostKey returns the tenant key that tenant.from host reads from host, a
// request's Host without its port or an IPv6 literal's brackets: the host
// lower-cased, without trailing dots, and an IP address in its canonical
// form (RFC 5952; an IPv4-mapped address as its IPv4 address), so that
// each spelling of one host is one tenant. A canonical form starting with
// "::" is written with a leading 0 ("0::1"), which ValidTenant accepts and
// names the same address. An address with a zone ("fe80::1%eth0") keeps
// it, '%' and all, which ValidTenant refuses: a zone names an interface of
// the client's, never a host of the gateway's.
func HostKey(host string) string {
	// Only a host with a colon is parsed: for a name, a failed parse
	// would cost its error on every request.
	if strings.IndexByte(host, ':') >= 0 {
		if a, err := netip.ParseAddr(host); err == nil && a.Zone() == "" {
			// "[0:0:0:0:0:0:0:1]", "[0::1]" and "[::1]" are one
			// host, and "[::ffff:127.0.0.1]" is 127.0.0.1.
			k := a.Unmap().String()
			if k[0] == ':' {
				k = "0" + k
			}
			return k
		}
	}
	// A fully qualified name's trailing dot (the root's empty label) names
	// the same host, as crypto/tls and crypto/x509 take it, and so do
	// several: kept, each would make a tenant of its own.
	return strings.TrimRight(strings.ToLower(host), ".")
}
