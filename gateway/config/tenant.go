package config

import (
	"net/netip"
	"strconv"
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
//
// A host whose last label is a number is an IPv4 address as browsers
// (the WHATWG URL standard) and resolvers (inet_aton) read it, in any of
// the spellings they accept: "127.1", "0x7f.0.0.1", "0177.0.0.1" and
// "2130706433" are 127.0.0.1, and are keyed so. One that is no address so
// read ("1.2.3.256", "a.0x1") names no host a client could reach, and
// has the empty key, which names no tenant: the request is refused.
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
	host = strings.TrimRight(strings.ToLower(host), ".")
	if host != "" && endsInNumber(host) {
		// netip reads only the dotted quad of four decimal parts; the
		// other spellings name the same address to a browser and a
		// resolver, and kept as sent each would make a tenant of its own.
		a, ok := parseIPv4(host)
		if !ok {
			return ""
		}
		return a.String()
	}
	return host
}

// endsInNumber reports whether host's last label is a number, decimal or
// 0x-hexadecimal: such a host is an IPv4 address or nothing (WHATWG URL,
// "ends in a number").
func endsInNumber(host string) bool {
	last := host[strings.LastIndexByte(host, '.')+1:]
	if last == "" {
		return false
	}
	if strings.Trim(last, "0123456789") == "" {
		return true
	}
	_, ok := ipv4Number(last)
	return ok
}

// parseIPv4 reads host as inet_aton and the WHATWG URL standard do: one to
// four parts, each decimal, octal (a leading 0) or hexadecimal (0x), the
// last filling the bytes the others leave.
func parseIPv4(host string) (netip.Addr, bool) {
	parts := strings.Split(host, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var v uint64
	for i, p := range parts {
		n, ok := ipv4Number(p)
		if !ok {
			return netip.Addr{}, false
		}
		if i < len(parts)-1 {
			if n > 255 {
				return netip.Addr{}, false
			}
			v |= n << (8 * (3 - i))
			continue
		}
		if n >= 1<<(8*(5-len(parts))) {
			return netip.Addr{}, false
		}
		v |= n
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

// ipv4Number reads one part of an IPv4 address: "0x" (or "0X") and hex
// digits, possibly none; a leading 0 and octal digits; or decimal digits.
func ipv4Number(p string) (uint64, bool) {
	if p == "" {
		return 0, false
	}
	base := 10
	switch {
	case len(p) >= 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X'):
		base, p = 16, p[2:]
		if p == "" {
			return 0, true
		}
	case len(p) >= 2 && p[0] == '0':
		base, p = 8, p[1:]
	}
	n, err := strconv.ParseUint(p, base, 64)
	return n, err == nil
}
