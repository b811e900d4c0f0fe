package config_test

import (
	"strings"
	"testing"

	"github.com/groupexec/groupexec/gateway/config"
)

// A key an alias or a merge brings into a section that has no such key is
// reported as that section's unknown key, on the line of the alias or
// merge: the decoder names the line the key is anchored on, and the
// error named the key written there ("timeouts.read: unknown key"), a key
// the config has.
func TestMergedUnknownKeyNamedWhereMerged(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want []string
	}{
		{"timeouts: &t {read: 1s}\nbody: {<<: *t}", []string{`line 3: body.read: unknown key: it is a key of timeouts`}},
		{"tenant: &t {header: X-T}\nlimits: {<<: *t}", []string{`line 3: limits.header: unknown key: it is a key of tenant`}},
		{"timeouts: &t\n  read: 1s\nbody:\n  <<: *t", []string{`line 5: body.read: unknown key: it is a key of timeouts`}},
		{"rate_limit: &r {rps: 1, burst: 2}\nlimits: *r", []string{`line 3: limits.rps: unknown key: it is a key of rate_limit and of tenants.<name>.rate_limit`, `line 3: limits.burst: unknown key: it is a key of rate_limit and of tenants.<name>.rate_limit`}},
		{"rate_limit: &r {rps: 1}\ntenants: {vip: {<<: *r}}", []string{`line 3: tenants.vip.rps: unknown key: it is a key of rate_limit and of tenants.<name>.rate_limit`}},
		// Where the anchored mapping's section has no such key either,
		// it is reported there too.
		{"limits: &l {zz: 1}\nbody: {<<: *l}", []string{`line 2: limits.zz: unknown key`, `line 3: body.zz: unknown key`}},
	} {
		_, err := config.Parse([]byte("backends: [http://a:1]\n" + tc.yaml + "\n"))
		var got []string
		if err != nil {
			got = strings.Split(err.Error(), "\n")
		}
		if len(got) != len(tc.want) {
			t.Errorf("%q: %v; want %d errors: %q", tc.yaml, err, len(tc.want), tc.want)
			continue
		}
		for i, w := range tc.want {
			if got[i] != "config: "+w {
				t.Errorf("%q: error %d is %q; want config: %s", tc.yaml, i+1, got[i], w)
			}
		}
	}
}

// A null key, a tag refused and an alias as a key in a merged mapping are
// named as keys of the mapping it is merged into, as its other keys are,
// not under "<<".
func TestMergedKeyNamedWhereMerged(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"tenant: {<<: {~: 3}}", `line 2: tenant.~: "~" is a null key`},
		{"tenant:\n  <<: [{max_groups: 3}, {null: 3}]", `line 3: tenant.null: "null" is a null key`},
		{"tenant: {<<: {header: !foo x}}", `line 2: tenant.header: the tag !foo is not one the config takes`},
		{"tenant: {default: &n max_groups, <<: {*n : 3}}", `line 2: tenant.max_groups: the alias *n is a key here`},
	} {
		_, err := config.Parse([]byte("backends: [http://a:1]\n" + tc.yaml + "\n"))
		if err == nil || !strings.HasPrefix(err.Error(), "config: "+tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: %v; want the one error config: %s...", tc.yaml, err, tc.want)
		}
	}
}

// A merge key whose value is not a mapping, an alias of one or a list of
// those is refused, naming the mapping it is in and its line: the decoder
// refused the whole file, naming neither.
func TestMergeOfNoMappingRefused(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"tenant: {<<: 5}", `line 2: tenant: the merge key << takes a mapping, an alias of one, or a list of those: "5" is a scalar`},
		{"tenant:\n  max_groups: 3\n  <<: [{header: X-T}, 5]", `line 4: tenant: the merge key << takes a mapping, an alias of one, or a list of those: item 2 is a scalar`},
		{"tenant: {trusted_proxies: &p [10.0.0.1], <<: *p}", `line 2: tenant: the merge key << takes a mapping, an alias of one, or a list of those: *p is a list`},
		{"tenants: {<<: ~}", `line 2: tenants: the merge key << takes a mapping, an alias of one, or a list of those: "~" is a scalar`},
		{"<<: [[]]", `line 2: the merge key << takes a mapping, an alias of one, or a list of those: item 1 is a list`},
		{"tenant: {trusted_proxies: &p [10.0.0.1], <<: [{}, *p]}", `line 2: tenant: the merge key << takes a mapping, an alias of one, or a list of those: item 2 (*p) is a list`},
	} {
		_, err := config.Parse([]byte("backends: [http://a:1]\n" + tc.yaml + "\n"))
		if err == nil || !strings.HasPrefix(err.Error(), "config: "+tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: %v; want the one error config: %s...", tc.yaml, err, tc.want)
		}
	}
}
