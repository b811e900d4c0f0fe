package config_test

import (
	"strings"
	"testing"

	"github.com/groupexec/groupexec/gateway/config"
)

// A !!binary key or value is refused, naming its key and line, wherever
// it is: the decoder took a !!binary tenant key for the tenant its base64
// names while the config's own checks read its base64, and a !!binary
// listen key set the address for the decoder, which the defaults then
// replaced, the key being absent under its written name.
func TestBinaryRefused(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"tenants: {!!binary YWNtZQ==: {share: 2}}", `line 2: tenants.YWNtZQ==: !!binary "YWNtZQ=="`},
		{"tenants:\n  acme: {share: 2}\n  !!binary YWNtZQ==: {share: 3}", `line 4: tenants.YWNtZQ==: !!binary "YWNtZQ=="`},
		{"!!binary bGlzdGVu: 127.0.0.1:1", `line 2: bGlzdGVu: !!binary "bGlzdGVu"`},
		{"tenant: {default: !!binary YWNtZQ==}", `line 2: tenant.default: !!binary "YWNtZQ=="`},
		{"tenant:\n  header: !!binary WC1U", `line 3: tenant.header: !!binary "WC1U"`},
		{"tenant:\n  trusted_proxies:\n    - 10.0.0.1\n    - !!binary MTAuMC4wLjI=", `line 5: tenant.trusted_proxies: !!binary "MTAuMC4wLjI="`},
		{"metrics: {namespace: !!binary Zm9v}", `line 2: metrics.namespace: !!binary "Zm9v"`},
	} {
		_, err := config.Parse([]byte("backends: [http://a:1]\n" + tc.yaml + "\n"))
		if err == nil || !strings.HasPrefix(err.Error(), "config: "+tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: %v; want the one error config: %s...", tc.yaml, err, tc.want)
		}
	}
	if _, err := config.Parse([]byte("backends: [!!binary aHR0cDovL2E6MQ==]\n")); err == nil ||
		!strings.HasPrefix(err.Error(), `config: line 1: backends: !!binary "aHR0cDovL2E6MQ=="`) {
		t.Errorf("a !!binary backend: %v", err)
	}
}

// An explicit tag is refused, naming its key and line, where its value is
// not what it says (!!null x, which the decoder refused with the whole
// file, naming neither), where the config does not take it (!foo,
// !!timestamp: the decoder took !foo text as a string and refused !foo
// numbers under the key's parent), where it does not fit the node's kind
// (!!seq on a mapping), and !!merge anywhere but on the merge key <<
// (the key index took "!!merge listen" for a merge, the decoder for the
// listen key). Every tag is checked on a key, a value and a list item.
func TestExplicitTags(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"tenant: {header: !!null x}", `line 2: tenant.header: "x" is not a null, as its tag !!null says`},
		{"tenant:\n  header: !!null x", `line 3: tenant.header: "x" is not a null, as its tag !!null says`},
		{"tenant: {header: !!int x}", `line 2: tenant.header: "x" is not an integer, as its tag !!int says`},
		{"tenant: {header: !!bool x}", `line 2: tenant.header: "x" is not a boolean, as its tag !!bool says`},
		{"tenant: {header: !!float x}", `line 2: tenant.header: "x" is not a number, as its tag !!float says`},
		{"tenant: {header: !foo x}", `line 2: tenant.header: the tag !foo is not one the config takes`},
		{"tenant: {header: !!timestamp 2001-12-14}", `line 2: tenant.header: the tag !!timestamp is not one the config takes`},
		{"tenant: {max_groups: !foo 5}", `line 2: tenant.max_groups: the tag !foo is not one the config takes`},
		{"tenant: {max_groups: !!null 5}", `line 2: tenant.max_groups: "5" is not a null, as its tag !!null says`},
		{"tenant: {require: !!int true}", `line 2: tenant.require: "true" is not an integer, as its tag !!int says`},
		{"timeouts:\n  read: !!int 5s", `line 3: timeouts.read: "5s" is not an integer, as its tag !!int says`},
		{"timeouts: {read: !foo 5s}", `line 2: timeouts.read: the tag !foo is not one the config takes`},
		{"limits: {queue_timeout: !!null 5s}", `line 2: limits.queue_timeout: "5s" is not a null, as its tag !!null says`},
		{"rate_limit: {rps: !!bool 5}", `line 2: rate_limit.rps: "5" is not a boolean, as its tag !!bool says`},
		{"tenants: {vip: {share: !foo 5}}", `line 2: tenants.vip.share: the tag !foo is not one the config takes`},
		{"tenants:\n  vip:\n    rate_limit: {rps: !!null 1}", `line 4: tenants.vip.rate_limit.rps: "1" is not a null, as its tag !!null says`},
		{"!!null listen: 127.0.0.1:1", `line 2: listen: "listen" is not a null, as its tag !!null says`},
		{"!foo listen: 127.0.0.1:1", `line 2: listen: the tag !foo is not one the config takes`},
		{"tenants: {!!null x: {share: 2}}", `line 2: tenants.x: "x" is not a null, as its tag !!null says`},
		{"tenants: {!foo x: {share: 2}}", `line 2: tenants.x: the tag !foo is not one the config takes`},
		{"tenant: !foo {header: X-T}", `line 2: tenant: the tag !foo is not one the config takes`},
		{"tenant: !!seq {header: X-T}", `line 2: tenant: the tag !!seq does not fit a mapping`},
		{"tenant: {trusted_proxies: !!map [10.0.0.1]}", `line 2: tenant.trusted_proxies: the tag !!map does not fit a list`},
		{"tenant: {header: !!map X-T}", `line 2: tenant.header: the tag !!map does not fit a scalar`},
		{"tenant: !!str {header: X-T}", `line 2: tenant: the tag !!str does not fit a mapping`},
		{"tenant:\n  trusted_proxies:\n    - !!null 10.0.0.1", `line 4: tenant.trusted_proxies: "10.0.0.1" is not a null, as its tag !!null says`},
		{"tenant: {trusted_proxies: [!foo 10.0.0.1]}", `line 2: tenant.trusted_proxies: the tag !foo is not one the config takes`},
		{"!!merge listen: 127.0.0.1:1", `line 2: listen: the tag !!merge marks the merge key << only`},
		{"tenants: {vip: {share: !!merge 2}}", `line 2: tenants.vip.share: the tag !!merge marks the merge key << only`},
		{"%TAG !e! tag:example.com,2000:\n---\nbackends: [http://a:1]\nlisten: !e!addr 127.0.0.1:1",
			`line 4: listen: the tag tag:example.com,2000:addr is not one the config takes`},
	} {
		yaml := tc.yaml + "\n"
		if !strings.HasPrefix(yaml, "%") {
			yaml = "backends: [http://a:1]\n" + yaml
		}
		_, err := config.Parse([]byte(yaml))
		if err == nil || !strings.HasPrefix(err.Error(), "config: "+tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: %v; want the one error config: %s...", tc.yaml, err, tc.want)
		}
	}
	if _, err := config.Parse([]byte("backends: [!foo http://a:1]\n")); err == nil ||
		!strings.HasPrefix(err.Error(), `config: line 1: backends: the tag !foo is not one the config takes`) {
		t.Errorf("a !foo backend: %v", err)
	}
	// The core schema's tags, on what they say, are taken.
	c, err := config.Parse([]byte(`!!map
!!str backends: !!seq [!!str "http://a:1"]
tenant: {header: !!str X-T, max_groups: !!int 5, require: !!bool false, trusted_proxies: !!seq [!!str 10.0.0.1]}
limits: {global_max_in_flight: !!float 50}
tenants: {!!str vip: !!map {share: !!int 2, rate_limit: {rps: !!float 1.5}}, !!int 7: {!!merge <<: {share: 3}}}
`))
	if err != nil {
		t.Fatalf("the core tags on what they say: %v", err)
	}
	if c.Tenant.Header != "X-T" || c.Tenant.MaxGroups != 5 || *c.Limits.GlobalMaxInFlight != 50 ||
		*c.Tenants["vip"].Share != 2 || *c.Tenants["7"].Share != 3 {
		t.Errorf("the core tags read otherwise: %+v", c)
	}
}
