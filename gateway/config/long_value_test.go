package config_test

import (
	"strings"
	"testing"

	"github.com/groupexec/groupexec/gateway/config"
)

// A long value or key is shown cut short in its error, which names its
// key and line as any other: the error quoted it whole, so that a 60 MB
// value (a file written to hurt, or a secret pasted in the wrong place)
// was a 60 MB line in the log of every reload refused, and in the answer
// to POST /reload.
func TestLongValueCutShortInItsError(t *testing.T) {
	long := strings.Repeat("x", 1<<20)
	for _, tc := range []struct{ yaml, want string }{
		{"listen: " + long, `config: line 2: listen: "xxxx`},
		{"limits: {max_concurrency_per_group: " + long + "}", `config: line 2: limits.max_concurrency_per_group: "xxxx`},
		{"tenant: {from: '" + long + "'}", `config: line 2: tenant.from: "xxxx`},
		{"? " + long + "\n: 1", `config: line 2: xxxx`},
	} {
		_, err := config.Parse([]byte("backends: [http://a:1]\n" + tc.yaml + "\n"))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) || len(err.Error()) > 1024 || strings.Contains(err.Error(), "\n") {
			msg, n := "<nil>", 0
			if err != nil {
				msg, n = err.Error(), len(err.Error())
				if n > 200 {
					msg = msg[:100] + "..." + msg[n-100:]
				}
			}
			t.Errorf("%.40q: %d bytes: %s; want one line of at most 1 KiB starting %s", tc.yaml, n, msg, tc.want)
		}
	}
}
