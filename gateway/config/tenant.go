package config

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
