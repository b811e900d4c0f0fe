package config_test

import (
	"testing"

	"github.com/groupexec/groupexec/gateway/config"
)

// A misspelt key is refused naming the key it is closest to, among those
// of its own mapping: "unknown key" alone leaves the operator to find, in
// the example file, that limits takes max_concurrency_per_group and not
// max_concurency_per_group. Case, '-' for '_' and a word run together
// count for nothing (maxConcurrency, max-concurrency). A key of another
// mapping (queue_timeout at the top, where limits takes it) is named as
// such; a key like none gets no guess.
func TestUnknownKeyNamesTheClosestKnown(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"lisen: x", `line 2: lisen: unknown key: did you mean listen?`},
		{"Listen: x", `line 2: Listen: unknown key: did you mean listen?`},
		{"limits: {max_concurency_per_group: 3}", `line 2: limits.max_concurency_per_group: unknown key: did you mean max_concurrency_per_group?`},
		{"limits:\n  queue_timeuot: 2s", `line 3: limits.queue_timeuot: unknown key: did you mean queue_timeout?`},
		{"tenants: {vip: {maxConcurrency: 3}}", `line 2: tenants.vip.maxConcurrency: unknown key: did you mean max_concurrency?`},
		{"tenants: {vip: {shar: 3}}", `line 2: tenants.vip.shar: unknown key: did you mean share?`},
		{"tenant: {trusted-proxies: [10.0.0.0/8]}", `line 2: tenant.trusted-proxies: unknown key: did you mean trusted_proxies?`},
		{"rate_limit: {rps: 1, brust: 2}", `line 2: rate_limit.brust: unknown key: did you mean burst?`},
		// Another mapping's key is named as such.
		{"queue_timeout: 2s", `line 2: queue_timeout: unknown key: it is a key of limits`},
		{"limits: {rps: 1}", `line 2: limits.rps: unknown key: it is a key of rate_limit and of tenants.<name>.rate_limit`},
		{"limits: {max_concurrency: 1}", `line 2: limits.max_concurrency: unknown key: it is a key of tenants.<name>`},
		{"tenant: {listen: x}", `line 2: tenant.listen: unknown key: it is a key of the top level`},
		// A key like none.
		{"frobnicate: 1", `line 2: frobnicate: unknown key`},
	} {
		_, err := config.Parse([]byte("backends: [http://a:1]\n" + tc.yaml + "\n"))
		if err == nil || err.Error() != "config: "+tc.want {
			t.Errorf("%q: %v; want config: %s", tc.yaml, err, tc.want)
		}
	}
}
