package config_test

import (
	"strings"
	"testing"

	"github.com/groupexec/groupexec/gateway/config"
)

// An alias used as a mapping key is refused, naming the key it stands for
// and its line: the decoder decodes it as the key it names, but the
// config's checks read it by the alias's name, so that a tenant's burst
// given under an aliased key was replaced by its default, and an aliased
// listen key by the default address.
func TestAliasKeyRefused(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"tenant: {default: &n acme}\ntenants: {*n: {rate_limit: {rps: 10, burst: 1}}}",
			`line 3: tenants.acme: the alias *n is a key here: write the key itself`},
		{"tenant: {default: &n listen}\n*n: 127.0.0.1:1", `line 3: listen: the alias *n is a key here: write the key itself`},
		{"tenants:\n  vip: &v {share: 2}\n  *v : {share: 3}", `line 4: tenants.*v: the alias *v is a key here: write the key itself`},
	} {
		_, err := config.Parse([]byte("backends: [http://a:1]\n" + tc.yaml + "\n"))
		if err == nil || !strings.HasPrefix(err.Error(), "config: "+tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: %v; want the one error config: %s...", tc.yaml, err, tc.want)
		}
	}
	// An alias as a value, and a merge of one, are what anchors are for.
	c, err := config.Parse([]byte("backends: [http://a:1]\nrate_limit: &r {rps: 10, burst: 1}\n" +
		"tenants: {acme: {rate_limit: *r}, b: {<<: {share: 2}}}\n"))
	if err != nil || c.Tenants["acme"].RateLimit.Burst != 1 || *c.Tenants["b"].Share != 2 {
		t.Fatalf("aliases as values: %v", err)
	}
}
