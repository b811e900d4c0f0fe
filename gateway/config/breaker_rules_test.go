package config_test

import (
	"strings"
	"testing"

	"github.com/groupexec/groupexec/gateway/config"
)

// breaker.max_timeout caps the backoff of the backends' breakers; the
// tenants' breakers (breaker.per: tenant) have none, their open time
// fixed at breaker.timeout. Given with per: tenant it would be dropped
// without a word, and breaker.per needs a restart to change: it is
// refused, naming the key and its value. With breakers disabled every
// breaker key is kept for a later config, and it is taken.
func TestMaxTimeoutRefusedWithTenantBreakers(t *testing.T) {
	_, err := config.Parse([]byte("backends: [http://a:1]\nbreaker:\n  per: tenant\n  max_timeout: 10m\n"))
	const want = "config: line 4: breaker.max_timeout: 10m0s is never used with breaker.per: tenant"
	if err == nil || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Errorf("max_timeout with per: tenant: %v; want the one error %q...", err, want)
	}
	for _, yaml := range []string{
		"breaker: {per: tenant, timeout: 2m}",                      // max_timeout left out: its default
		"breaker: {per: backend, max_timeout: 10m}",                // the backends' backoff
		"breaker: {enabled: false, per: tenant, max_timeout: 10m}", // no breakers
	} {
		if _, err := config.Parse([]byte("backends: [http://a:1]\n" + yaml + "\n")); err != nil {
			t.Errorf("%s: %v", yaml, err)
		}
	}
}
