package config_test

import (
	"strings"
	"testing"

	"github.com/groupexec/groupexec/gateway/config"
)

// A duration is written with its unit, 0s included: a bare 0 is refused,
// and so is one quoted ("0", '+0', !!str -0), which the decoder hands to
// time.ParseDuration, the one number it takes without a unit. Once, as
// the decoder refuses the bare one.
func TestZeroDurationNeedsItsUnit(t *testing.T) {
	for _, tc := range []struct{ yaml, key, value string }{
		{"drain_delay: 0", "drain_delay", "0"},
		{`drain_delay: "0"`, "drain_delay", "0"},
		{"limits: {queue_timeout: '+0'}", "limits.queue_timeout", "+0"},
		{"tenant: {bearer: {leeway: !!str -0}}", "tenant.bearer.leeway", "-0"},
		{"d: &z \"0\"\n", "", ""}, // an anchor outside the config: an unknown key, nothing else
	} {
		_, err := config.Parse([]byte("backends: [http://a:1]\n" + tc.yaml + "\n"))
		if tc.key == "" {
			if err == nil || strings.Contains(err.Error(), "duration") {
				t.Errorf("%q: %v; want the unknown key alone", tc.yaml, err)
			}
			continue
		}
		want := `config: line 2: ` + tc.key + `: "` + tc.value + `" is not a valid duration (e.g. 2s, 500ms)`
		if err == nil || err.Error() != want {
			t.Errorf("%q: %v; want the one error %q", tc.yaml, err, want)
		}
	}
	for _, yaml := range []string{"drain_delay: 0s", `limits: {queue_timeout: "0ms"}`, "tenant: {bearer: {leeway: -0s}}"} {
		if _, err := config.Parse([]byte("backends: [http://a:1]\n" + yaml + "\n")); err != nil {
			t.Errorf("%q: %v", yaml, err)
		}
	}
}
