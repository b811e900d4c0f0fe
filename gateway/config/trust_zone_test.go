package config_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/groupexec/groupexec/gateway/config"
)

// A peer reached over an IPv6 link-local address carries its interface's
// zone (net/http's RemoteAddr "[fe80::7%eth0]:5000"), which no CIDR has:
// netip.Prefix.Contains never matches a zoned address, so that a proxy on
// the link was never trusted, whatever trusted_proxies listed.
func TestTrustedProxiesMatchLinkLocalPeerWithZone(t *testing.T) {
	c, err := config.Parse([]byte("backends: [http://a:1]\ntenant: {trusted_proxies: [\"fe80::/10\", \"fe80::1\"]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	for addr, want := range map[string]bool{
		"fe80::7%eth0": true, "fe80::1%2": true, "fe80::7": true, "fd00::1%eth0": false,
	} {
		if got := c.Tenant.Trusts(netip.MustParseAddr(addr)); got != want {
			t.Errorf("Trusts(%s) = %v, want %v", addr, got, want)
		}
	}
}

// An entry with a zone ("fe80::1%eth0") names one interface's neighbour,
// which a CIDR cannot say: taken, the zone was dropped without a word and
// the entry trusted that address on every interface. It is refused,
// naming the entry and its line.
func TestTrustedProxyWithZoneRefused(t *testing.T) {
	_, err := config.Parse([]byte("backends: [http://a:1]\ntenant:\n  trusted_proxies: [\"fe80::1%eth0\"]\n"))
	want := `config: line 3: tenant.trusted_proxies: "fe80::1%eth0" has a zone`
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("got %v; want %q...", err, want)
	}
}
