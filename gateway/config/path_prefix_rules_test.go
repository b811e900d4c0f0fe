package config_test

import (
	"strings"
	"testing"

	"github.com/groupexec/groupexec/gateway/config"
)

// A tenant.path_prefix that a lenient backend would read otherwise (two
// slashes in a row, a segment's parameters, a dot-segment) can never name
// a tenant: the gateway refuses every path a backend may read otherwise
// (400 invalid_tenant), and every path under such a prefix is one. The
// config refuses it, naming the key, its line and the value, as it refuses
// a prefix a URL path carries escaped; a prefix that names segments
// plainly is taken.
func TestPathPrefixThatCanNeverMatchRefused(t *testing.T) {
	for _, prefix := range []string{"/t//", "//t", "/a//t/", "/t;v", "/t;/", "/./t", "/t/.", "/t/../u", "/.."} {
		_, err := config.Parse([]byte("backends: [http://a:1]\ntenant:\n  from: path\n  path_prefix: '" + prefix + "'\n"))
		if err == nil {
			t.Errorf("%s: accepted", prefix)
			continue
		}
		for _, want := range []string{"line 4", "tenant.path_prefix", `"` + prefix + `"`, "can never match"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %v; want it to say %s", prefix, err, want)
			}
		}
	}
	for _, prefix := range []string{"/", "/t", "/t/", "/api/v1/t/", "/x.php/t", "/t.v/", "/..t/", "/t-./"} {
		if _, err := config.Parse([]byte("backends: [http://a:1]\ntenant:\n  from: path\n  path_prefix: '" + prefix + "'\n")); err != nil {
			t.Errorf("%s: %v", prefix, err)
		}
	}
}
