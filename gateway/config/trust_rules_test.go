package config_test

import (
	"strings"
	"testing"

	"github.com/groupexec/groupexec/gateway/config"
)

// A trusted_proxies CIDR with bits set past its length ("10.0.0.7/8") is
// refused, naming the entry and the prefix it would trust: its address
// bits would be dropped without a word, and the entry written for one
// proxy, its length mistyped, would trust every address of the /8 to
// name its tenant.
func TestTrustedProxyWithHostBitsRefused(t *testing.T) {
	for _, tc := range []struct{ entry, masked string }{
		{"10.0.0.7/8", "10.0.0.0/8"},
		{"192.168.1.7/24", "192.168.1.0/24"},
		{"fd00::1/8", "fd00::/8"},
		{"::ffff:10.0.0.7/104", "10.0.0.0/8"},
	} {
		_, err := config.Parse([]byte("backends: [http://a:1]\ntenant:\n  trusted_proxies: [\"" + tc.entry + "\"]\n"))
		want := `config: line 3: tenant.trusted_proxies: "` + tc.entry + `" has address bits set past its length`
		if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), tc.masked) {
			t.Errorf("%s: %v; want %q..., naming %s", tc.entry, err, want, tc.masked)
		}
	}
	for _, entry := range []string{"10.0.0.0/8", "10.0.0.7/32", "10.0.0.7", "0.0.0.0/0", "fd00::/8", "::ffff:10.0.0.0/104"} {
		if _, err := config.Parse([]byte("backends: [http://a:1]\ntenant: {trusted_proxies: [\"" + entry + "\"]}\n")); err != nil {
			t.Errorf("%s: %v", entry, err)
		}
	}
}
