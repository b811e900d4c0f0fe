package config_test

import (
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/groupexec/groupexec/gateway/config"
)

// The non-specific tag "!" is refused, naming its key and line, wherever
// it is: on a value, a key, a list item, a mapping or a list, after an
// anchor or before one, and written as !<!>. YAML makes a scalar so
// tagged text, but the decoder drops the tag and read `max_groups: ! 5`
// as 5, and the config's checks never saw it. The line is found however
// the lines before it are written (CR LF, other characters than ASCII,
// UTF-16).
func TestNonSpecificTagRefused(t *testing.T) {
	const reason = ": the non-specific tag ! is not one the config takes"
	for _, tc := range []struct{ yaml, want string }{
		{"tenant: {max_groups: ! 5}", "line 2: tenant.max_groups"},
		{"tenant:\n  max_groups: ! 5", "line 3: tenant.max_groups"},
		{"tenant: {header: ! X-T}", "line 2: tenant.header"},
		{"tenant:\n  header: !", "line 3: tenant.header"},
		{"! tenant: {default: acme}", "line 2: tenant"},
		{"tenant: {! default: acme}", "line 2: tenant.default"},
		{"tenant:\n  ! default: acme", "line 3: tenant.default"},
		{"tenant: !\n  default: acme", "line 2: tenant"},
		{"tenant: ! {default: acme}", "line 2: tenant"},
		{"tenant: {max_groups: &n ! 5}", "line 2: tenant.max_groups"},
		{"tenant: {max_groups: ! &n 5}", "line 2: tenant.max_groups"},
		{"tenant:\n  max_groups: &n # the cap\n    ! 5", "line 3: tenant.max_groups"},
		{"tenant: {max_groups: !<!> 5}", "line 2: tenant.max_groups"},
		{"tenant:\n  trusted_proxies:\n    - 10.0.0.1\n    - ! 10.0.0.2", "line 5: tenant.trusted_proxies"},
		{"tenant:\n  trusted_proxies: ! [10.0.0.1]", "line 3: tenant.trusted_proxies"},
		{"# ünïcödé, 日本\ntenant: {header: \"Ü\", max_groups: ! 5}", "line 3: tenant.max_groups"},
		{"tenants: {ñ: {share: 2}, acme: {share: ! 2}}", "line 2: tenants.acme.share"},
	} {
		_, err := config.Parse([]byte("backends: [http://a:1]\n" + tc.yaml + "\n"))
		if err == nil || !strings.HasPrefix(err.Error(), "config: "+tc.want+reason) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: %v; want the one error config: %s%s...", tc.yaml, err, tc.want, reason)
		}
	}
	if _, err := config.Parse([]byte("backends: ! [http://a:1]\n")); err == nil ||
		!strings.HasPrefix(err.Error(), "config: line 1: backends"+reason) {
		t.Errorf("a tagged backends list: %v", err)
	}
	crlf := "backends: [http://a:1]\r\n# ünïcödé\r\ntenant: {max_groups: ! 5}\r\n"
	if _, err := config.Parse([]byte(crlf)); err == nil || !strings.HasPrefix(err.Error(), "config: line 3: tenant.max_groups"+reason) {
		t.Errorf("CR LF lines: %v", err)
	}
	units := utf16.Encode([]rune("\ufeffbackends: [http://a:1]\n# ünïcödé 日本\ntenant: {header: \"Ü\", max_groups: ! 5}\n"))
	le := make([]byte, 0, 2*len(units))
	for _, u := range units {
		le = append(le, byte(u), byte(u>>8))
	}
	if _, err := config.Parse(le); err == nil || !strings.HasPrefix(err.Error(), "config: line 3: tenant.max_groups"+reason) {
		t.Errorf("UTF-16: %v", err)
	}
}

// A "!" that is no tag is not refused: in a quoted value, a plain one, a
// comment, and a tag of its own (!!int).
func TestExclamationMarkThatIsNoTag(t *testing.T) {
	for _, y := range []string{
		"tenant: {header: 'X-a!'}",
		"tenant: {header: \"!X\"}",
		"tenant: {header: X!b}",
		"tenant: {max_groups: 5} # ! 5",
		"tenant: {max_groups: !!int 5}",
		"tenant: {max_groups: &n 5}\nlimits: {global_max_in_flight: *n}",
	} {
		if _, err := config.Parse([]byte("backends: [http://a:1]\n" + y + "\n")); err != nil {
			t.Errorf("%q: %v", y, err)
		}
	}
}
