package config_test

import (
	"strings"
	"testing"

	"github.com/groupexec/groupexec/gateway/config"
)

// A key given a null value (~, null, or nothing after the colon) where it
// takes a number, string, duration, boolean or list is refused, naming
// the key and what was written. The decoder makes such a value the type's
// zero, or, for a limit policy defaults, leaves it out: "max_groups: ~"
// sent every unconfigured tenant to the overflow group, "buffer_bytes:"
// spooled every body to a file, a "trusted_proxies:" whose entries were
// commented out trusted every address, "global_max_in_flight: ~" took
// policy's default, and "max_conns: ~" was refused as the 0 it was not.
// A null section (limits:, rate_limit: ~, a tenant with nothing under it)
// is one left empty, and taken.
func TestNullValueRefused(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"tenant: {max_groups: ~}", `line 2: tenant.max_groups: the value is null (~)`},
		{"body:\n  buffer_bytes:\n", `line 3: body.buffer_bytes: the value is null (nothing)`},
		{"tenant:\n  trusted_proxies:\n  # - 10.0.0.0/8\n", `line 3: tenant.trusted_proxies: the value is null (nothing)`},
		{"limits: {global_max_in_flight: null}", `line 2: limits.global_max_in_flight: the value is null (null)`},
		{"max_conns: ~", `line 2: max_conns: the value is null (~)`},
		{"listen: Null", `line 2: listen: the value is null (Null)`},
		{"breaker: {enabled: ~}", `line 2: breaker.enabled: the value is null (~)`},
		{"drain_delay: ~", `line 2: drain_delay: the value is null (~)`},
		{"rate_limit: {rps: ~}", `line 2: rate_limit.rps: the value is null (~)`},
		{"tenants:\n  vip: {share: ~}", `line 3: tenants.vip.share: the value is null (~)`},
		{"tenants:\n  a: &x {share: ~}\n  b: *x", `line 3: tenants.a.share: the value is null (~)`},
	} {
		_, err := config.Parse([]byte("backends: [http://a:1]\n" + tc.yaml + "\n"))
		if err == nil || !strings.HasPrefix(err.Error(), "config: "+tc.want) || !strings.Contains(err.Error(), "leave the key out for its default") {
			t.Errorf("%q: %v; want config: %s...", tc.yaml, err, tc.want)
			continue
		}
		// One error for the key, not another for the zero it would be.
		if n := strings.Count(err.Error(), "\n"); n != 0 && !strings.Contains(tc.yaml, "*x") {
			t.Errorf("%q: %d errors; want the one:\n%v", tc.yaml, n+1, err)
		}
	}
	for _, yaml := range []string{
		"limits:", "tenant: ~", "rate_limit: ~", "tenants:", "tenants: {vip: ~}", "tenants:\n  vip:\n",
		"tenants: {vip: {rate_limit: ~}}", "body: {spool_dir: \"\"}", "tenant: {trusted_proxies: []}",
	} {
		if _, err := config.Parse([]byte("backends: [http://a:1]\n" + yaml + "\n")); err != nil {
			t.Errorf("%q: %v", yaml, err)
		}
	}
}
