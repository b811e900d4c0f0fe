package config_test

import (
	"testing"

	"github.com/groupexec/groupexec/gateway/config"
)

// A rate the decoder cannot read is named in the file's terms, a number,
// not in Go's (float64).
func TestRateNotANumberSaysSo(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{`rate_limit: {rps: "5"}`, `config: line 2: rate_limit.rps: "5" is not a valid number`},
		{"rate_limit: {rps: 1e400}", `config: line 2: rate_limit.rps: "1e400" is not a valid number`},
		{"tenants: {vip: {rate_limit: {rps: fast}}}", `config: line 2: tenants.vip.rate_limit.rps: "fast" is not a valid number`},
	} {
		if _, err := config.Parse([]byte("backends: [http://a:1]\n" + tc.yaml + "\n")); err == nil || err.Error() != tc.want {
			t.Errorf("%q: %v; want %q", tc.yaml, err, tc.want)
		}
	}
}
