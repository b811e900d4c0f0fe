package config_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/groupexec/groupexec/gateway/config"
)

// An alias of an anchor the file does not define before it is refused
// naming its key and line, as every other problem is: the YAML parser's
// refusal, "unknown anchor 'nope' referenced", named neither. The first
// such alias is named, wherever it is: a value, a key, a list item, a
// merge, after a "*nope" that is no alias (in a comment, a quoted value),
// before the anchor it names.
func TestAliasOfAnUnknownAnchor(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"limits: {queue_timeout: *nope}", "line 2: limits.queue_timeout: the alias *nope names no anchor"},
		{"tenants:\n  acme:\n    share: *nope", "line 4: tenants.acme.share: the alias *nope names no anchor"},
		{"*nope : 5", "line 2: *nope: the alias *nope names no anchor"},
		{"tenant:\n  trusted_proxies:\n    - 10.0.0.1\n    - *nope", "line 5: tenant.trusted_proxies: the alias *nope names no anchor"},
		{"limits:\n  <<: *nope", "line 3: limits: the alias *nope names no anchor"},
		{"# *nope\ntenant: {header: \"*nope\", max_groups: *nope}", "line 3: tenant.max_groups: the alias *nope names no anchor"},
		{"# ünïcödé 日本\ntenant: {header: \"Ü*nope\", max_groups: *nope}", "line 3: tenant.max_groups: the alias *nope names no anchor"},
		{"limits: {global_max_in_flight: *n}\ntenant: {max_groups: &n 5}", "line 2: limits.global_max_in_flight: the alias *n names no anchor"},
		{"limits: {global_max_in_flight: *a}\ntenant: {max_groups: *b}", "line 2: limits.global_max_in_flight: the alias *a names no anchor"},
		{"limits: {global_max_in_flight: *nopeX}\ntenant: {max_groups: *nope}", "line 2: limits.global_max_in_flight: the alias *nopeX names no anchor"},
		{"limits: {global_max_in_flight: &nopeX 5}\ntenant: {max_groups: *nopeX, header: *nope}", "line 3: tenant.header: the alias *nope names no anchor"},
	} {
		_, err := config.Parse([]byte("backends: [http://a:1]\n" + tc.yaml + "\n"))
		var ce *config.Error
		if err == nil || !strings.HasPrefix(err.Error(), "config: "+tc.want) || strings.Contains(err.Error(), "\n") ||
			!errors.As(err, &ce) || ce.Line == 0 {
			t.Errorf("%q: %v; want the one error config: %s...", tc.yaml, err, tc.want)
		}
	}
	if _, err := config.Parse([]byte("*nope\n")); err == nil || !strings.HasPrefix(err.Error(), "config: line 1: the alias *nope names no anchor") {
		t.Errorf("a document that is an alias: %v", err)
	}
}
