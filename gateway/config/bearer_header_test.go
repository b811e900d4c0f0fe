package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/groupexec/groupexec/gateway/config"
)

// With tenant.from: bearer, tenant.header cannot be Authorization, in any
// case: the header the token is read from would be set to the tenant on
// the proxied request, and the backend sent "Authorization: acme" instead
// of the token it was verified by, without a word. With another from,
// Authorization is the header the tenant is read from and passed on in,
// as any other.
func TestTenantHeaderIsNotTheBearerToken(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte(strings.Repeat("k", 40)), 0o600)
	for _, h := range []string{"Authorization", "authorization"} {
		_, err := config.Parse([]byte("backends: [http://a:1]\ntenant:\n  from: bearer\n  header: " + h +
			"\n  bearer: {hmac_secret_file: " + secret + "}\n"))
		want := `config: line 4: tenant.header: "` + h + `" is the header the bearer token is read from`
		if err == nil || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("header %s with from: bearer: %v; want the one error %q...", h, err, want)
		}
	}
	if _, err := config.Parse([]byte("backends: [http://a:1]\ntenant: {from: header, header: Authorization}\n")); err != nil {
		t.Errorf("header Authorization with from: header: %v", err)
	}
}
