package config_test

import (
	"errors"
	"testing"

	"github.com/groupexec/groupexec/gateway/config"
)

// FuzzParse checks that no input makes Parse panic, that every refusal is a
// *config.Error, and that every accepted config builds a policy and is
// complete (defaults set, values in range).
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		seedExample,
		"backends: [http://127.0.0.1:1]\n",
		"backends: [http://a:1]\nlimits: {queue_timeout: 2x}\n",
		"backends: [http://a:1]\ntenants: {vip: {share: 0}}\n",
		"backends: [http://a:1]\ntenant: {from: path, path_prefix: /t/}\n",
		"backends: [http://a:1]\n---\nx: 1\n",
		"a: &x [*x]\n",
		"backends: [http://a:1]\nbreaker: {max_requests: 99999999999}\n",
		"backends: [http://a:1, 'HTTP://A:1/']\ntenant: {header: !!null x, default: !foo y}\n",
		"backends: [http://a:1]\ntenant: {default: &n acme}\ntenants: {*n: {share: 2}, !!binary YWNtZQ==: {}}\n",
		"backends: [http://a:1]\nrate_limit: &r {rps: 1}\nbody: {<<: *r}\ntenant: {<<: {~: 1}}\n",
		"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := config.Parse(data)
		if err != nil {
			var ce *config.Error
			if !errors.As(err, &ce) || !errors.Is(err, config.ErrInvalid) {
				t.Fatalf("error %v (%T) is not a *config.Error", err, err)
			}
			return
		}
		if _, err := c.Policy(); err != nil {
			t.Fatalf("accepted config builds no policy: %v", err)
		}
		if len(c.Backends) == 0 || !config.ValidTenant(c.Tenant.Default) || c.Tenant.Header == "" ||
			c.Body.MaxBytes <= 0 || c.Timeouts.Upstream <= 0 || c.DrainTimeout <= 0 {
			t.Fatalf("accepted config is incomplete: %+v", c)
		}
	})
}
