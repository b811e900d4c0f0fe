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
