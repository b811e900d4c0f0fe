package config_test

import (
	"strings"
	"testing"

	"github.com/groupexec/groupexec/gateway/config"
)

// A backend refused before it is read as a URL (written as a single
// string rather than a list, or under a tag its text does not fit) is
// named without its password, as a backend refused as a URL is: a reload
// refused is logged with its errors, and the log is no place for a
// credential.
func TestBackendPasswordHiddenWhereTheValueIsRefused(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"backends: http://user:s3cret@a:1",
			`line 1: backends: "http://user:xxxxx@a:1" is not a valid list`},
		{"backends: !!str http://user:s3cret@a:1",
			`line 1: backends: "http://user:xxxxx@a:1" is not a valid list`},
		{"backends:\n  - !!int http://user:s3cret@a:1",
			`line 2: backends: "http://user:xxxxx@a:1" is not an integer, as its tag !!int says`},
		{"backends: [!!null http://user:s3cret@a:1]",
			`line 1: backends: "http://user:xxxxx@a:1" is not a null, as its tag !!null says`},
	} {
		_, err := config.Parse([]byte(tc.yaml + "\n"))
		if err == nil || strings.Contains(err.Error(), "s3c") || !strings.HasPrefix(err.Error(), "config: "+tc.want) {
			t.Errorf("%q: %v; want config: %s...", tc.yaml, err, tc.want)
		}
	}
}
