package config_test

import (
	"strings"
	"testing"

	"github.com/groupexec/groupexec/gateway/config"
)

// A listen or admin address without a port ("127.0.0.1:", ":") is
// refused, naming the key and the address: net.Listen takes the empty
// port for 0 and listens wherever the system picks, so that a port left
// out served on a port nobody knew. 0 says so on purpose, and is taken.
func TestListenWithoutPortRefused(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{`listen: "127.0.0.1:"`, `config: line 2: listen: "127.0.0.1:" has no port`},
		{`admin: ":"`, `config: line 2: admin: ":" has no port`},
		{`admin: "[::1]:"`, `config: line 2: admin: "[::1]:" has no port`},
	} {
		_, err := config.Parse([]byte("backends: [http://a:1]\n" + tc.yaml + "\n"))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v; want the one error %q...", tc.yaml, err, tc.want)
		}
	}
	if _, err := config.Parse([]byte("backends: [http://a:1]\nlisten: 127.0.0.1:0\nadmin: \":0\"\n")); err != nil {
		t.Errorf("port 0: %v", err)
	}
}
