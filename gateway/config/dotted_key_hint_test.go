package config_test

import (
	"testing"

	"github.com/groupexec/groupexec/gateway/config"
)

// A key written as the dotted path the errors and the docs name it by
// (limits.queue_timeout at the top) is refused with where its last name
// is taken, nested: "unknown key" alone left the operator looking at a
// key that the error for it, and the docs, spell the same way.
func TestDottedKeyNamesWhereItIsWrittenNested(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"limits.queue_timeout: 2s", `line 2: limits.queue_timeout: unknown key: keys are written nested, not dotted: queue_timeout is a key of limits`},
		{"tenant:\n  bearer.leeway: 1s", `line 3: tenant.bearer.leeway: unknown key: keys are written nested, not dotted: leeway is a key of tenant.bearer`},
		{"rate_limit.rps: 1", `line 2: rate_limit.rps: unknown key: keys are written nested, not dotted: rps is a key of rate_limit and of tenants.<name>.rate_limit`},
		// A dotted name whose last part is no key gets no guess.
		{"limits.frobnicate: 1", `line 2: limits.frobnicate: unknown key`},
	} {
		_, err := config.Parse([]byte("backends: [http://a:1]\n" + tc.yaml + "\n"))
		if err == nil || err.Error() != "config: "+tc.want {
			t.Errorf("%q: %v; want config: %s", tc.yaml, err, tc.want)
		}
	}
}
