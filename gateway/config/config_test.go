package config_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/groupexec/groupexec/gateway/config"
)

// seedExample is the gateway's reference configuration: the keys a first
// configuration sets, in flow and block style, with comments.
const seedExample = `listen: 127.0.0.1:8080          # proxy port
admin: 127.0.0.1:9090           # /metrics, /healthz, /readyz
backends: [http://127.0.0.1:8081]
tenant: {header: X-Tenant, default: anonymous, max_groups: 10000}
limits:                         # maps onto policy; same meaning and defaults
  global_max_in_flight: 256
  max_in_flight_per_group: 64
  max_concurrency_per_group: 4
  queue_threshold_per_group: 100
  global_queue_threshold: 10000
  queue_timeout: 2s
tenants: {vip: {max_concurrency: 16, max_in_flight: 256, share: 3}}
breaker: {consecutive_failures: 5, timeout: 30s, max_requests: 1}
timeouts: {read_header: 5s, read: 5s, write: 5s, idle: 60s, upstream: 10s}
body: {max_bytes: 1048576, max_decoded_bytes: 8388608, max_ratio: 10}
drain_timeout: 5s
`

func TestParseSeedExample(t *testing.T) {
	c, err := config.Parse([]byte(seedExample))
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:8080" || c.Admin != "127.0.0.1:9090" || len(c.Backends) != 1 {
		t.Errorf("addresses: %+v", c)
	}
	if c.Tenant.Header != "X-Tenant" || c.Tenant.Default != "anonymous" || c.Tenant.MaxGroups != 10000 || c.Tenant.From != config.FromHeader {
		t.Errorf("tenant: %+v", c.Tenant)
	}
	if *c.Limits.QueueTimeout != 2*time.Second || *c.Limits.GlobalMaxInFlight != 256 {
		t.Errorf("limits: %+v", c.Limits)
	}
	p, err := c.Policy()
	if err != nil {
		t.Fatal(err)
	}
	vip, err := p.Group("vip")
	if err != nil {
		t.Fatal(err)
	}
	if vip.MaxConcurrency != 16 || vip.MaxInFlight != 256 || vip.Share != 3 || vip.QueueThreshold != 100 {
		t.Errorf("vip limits: %+v", vip)
	}
	other, _ := p.Group("other")
	if other.MaxConcurrency != 4 || other.MaxInFlight != 64 || other.Share != 1 {
		t.Errorf("default limits: %+v", other)
	}
	if p.GlobalMaxInFlight() != 256 || p.GlobalQueueThreshold() != 10000 || p.QueueTimeout() != 2*time.Second {
		t.Errorf("policy: %v", p)
	}
	if s, on := c.BreakerSettings(); !on || s.Timeout != 30*time.Second || s.MaxRequests != 1 {
		t.Errorf("breaker: %+v %v", s, on)
	}
	if c.DrainTimeout != 5*time.Second || c.Body.MaxRatio != 10 || c.Timeouts.Upstream != 10*time.Second {
		t.Errorf("rest: %+v", c)
	}
}

func TestParseDefaults(t *testing.T) {
	c, err := config.Parse([]byte("backends: [http://127.0.0.1:1]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != config.DefaultListen || c.Admin != config.DefaultAdmin || c.Tenant.Header != "X-Tenant" ||
		c.Tenant.Default != "anonymous" || c.DrainTimeout != 5*time.Second || c.Body.MaxBytes != 1<<20 ||
		c.Body.MaxDecodedBytes != 8<<20 || c.Timeouts.Idle != 60*time.Second || !c.Breaker.On() {
		t.Errorf("defaults not applied: %+v", c)
	}
	p, err := c.Policy()
	if err != nil {
		t.Fatal(err)
	}
	// Omitted limits are policy's defaults.
	g, _ := p.Group("x")
	if g.MaxConcurrency != 1 || g.MaxInFlight != 1024 {
		t.Errorf("policy defaults: %+v", g)
	}
}

func TestParseErrorsNameKeyAndLine(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string // substrings of the error
	}{
		{"unknown top-level key", "backends: [http://a:1]\nlisten: 127.0.0.1:1\nlisen: x\n",
			[]string{"line 3", "lisen", "unknown key"}},
		{"unknown nested key", "backends: [http://a:1]\nlimits:\n  global_max_in_flight: 3\n  queue_timeuot: 2s\n",
			[]string{"line 4", "limits.queue_timeuot", "unknown key"}},
		{"unknown key in flow mapping", "backends: [http://a:1]\ntenant: {header: X-T, defualt: a}\n",
			[]string{"line 2", "tenant.defualt", "unknown key"}},
		{"unknown tenant override", "backends: [http://a:1]\ntenants:\n  vip:\n    max_concurency: 3\n",
			[]string{"line 4", "tenants.vip.max_concurency", "unknown key"}},
		{"bad duration", "backends: [http://a:1]\nlimits:\n  queue_timeout: 2x\n",
			[]string{"line 3", "limits.queue_timeout", `"2x"`, "duration"}},
		{"integer where a duration belongs", "backends: [http://a:1]\ndrain_timeout: 5\n",
			[]string{"line 2", "drain_timeout", "duration"}},
		{"bad integer", "backends: [http://a:1]\nlimits: {max_in_flight_per_group: lots}\n",
			[]string{"line 2", "limits.max_in_flight_per_group", "integer"}},
		{"policy refuses a value", "backends: [http://a:1]\n\nlimits:\n  max_concurrency_per_group: 0\n",
			[]string{"line 4", "limits.max_concurrency_per_group", "0 is invalid"}},
		{"bad tenant override value", "backends: [http://a:1]\ntenants: {vip: {share: -1}}\n",
			[]string{"line 2", "tenants.vip.share"}},
		{"bad tenant name", "backends: [http://a:1]\ntenants:\n  _x: {share: 2}\n",
			[]string{"line 3", "tenants._x", "not a valid tenant key"}},
		{"no backends", "listen: 127.0.0.1:1\n", []string{"backends", "at least one"}},
		{"bad backend", "backends:\n  - ftp://x\n", []string{"line 1", "backends", "backend 1"}},
		{"bad listen", "backends: [http://a:1]\nlisten: nope\n", []string{"line 2", "listen", "host:port"}},
		{"admin on the proxy port", "backends: [http://a:1]\nlisten: 127.0.0.1:80\nadmin: 127.0.0.1:80\n",
			[]string{"line 3", "admin", "differ"}},
		{"bad from", "backends: [http://a:1]\ntenant:\n  from: cookie\n", []string{"line 3", "tenant.from", "cookie"}},
		{"tenant header the server takes", "backends: [http://a:1]\ntenant:\n  header: host\n",
			[]string{"line 3", "tenant.header", `"host"`}},
		{"tenant header hop-by-hop", "backends: [http://a:1]\ntenant: {header: Connection}\n",
			[]string{"line 2", "tenant.header", `"Connection"`}},
		{"tenant header the proxy sets", "backends: [http://a:1]\ntenant: {header: X-Forwarded-For}\n",
			[]string{"line 2", "tenant.header", `"X-Forwarded-For"`}},
		{"tenant header the gateway sets", "backends: [http://a:1]\ntenant: {header: x-real-ip}\n",
			[]string{"line 2", "tenant.header", `"x-real-ip"`}},
		{"path tenants one case apart", "backends: [http://a:1]\ntenant: {from: path, path_prefix: /t/}\ntenants:\n  acme: {share: 2}\n  Acme: {share: 3}\n",
			[]string{"line 4", "tenants.acme", `"Acme"`, "case"}},
		{"tenant header the proxy drops", "backends: [http://a:1]\ntenant: {header: Forwarded}\n",
			[]string{"line 2", "tenant.header", `"Forwarded"`}},
		{"path prefix a URL escapes", "backends: [http://a:1]\ntenant:\n  path_prefix: /my tenants/\n",
			[]string{"line 3", "tenant.path_prefix", `"/my%20tenants/"`}},
		{"negative timeout", "backends: [http://a:1]\ntimeouts:\n  idle: -1s\n", []string{"line 3", "timeouts.idle", "negative"}},
		{"negative body cap", "backends: [http://a:1]\nbody: {max_ratio: -2}\n", []string{"line 2", "body.max_ratio"}},
		{"syntax error", "backends: [http://a:1\nlisten: x\n", []string{"line"}},
		{"wrong shape", "backends: {a: b}\n", []string{"line 1", "backends", "list"}},
		{"empty file", "", []string{"empty"}},
		{"two documents", "backends: [http://a:1]\n---\nlisten: x\n", []string{"line 2", "more than one"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse([]byte(tc.yaml))
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, config.ErrInvalid) {
				t.Errorf("%v does not match ErrInvalid", err)
			}
			var ce *config.Error
			if !errors.As(err, &ce) {
				t.Errorf("%v is not a *config.Error", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestParseReportsEveryProblem(t *testing.T) {
	_, err := config.Parse([]byte("backends: [http://a:1]\nlimits:\n  global_max_in_flight: 0\n  max_in_flight_per_group: 0\n"))
	if err == nil || !strings.Contains(err.Error(), "line 3") || !strings.Contains(err.Error(), "line 4") {
		t.Fatalf("want both lines reported, got %v", err)
	}
}

func TestBreakerDisabled(t *testing.T) {
	c, err := config.Parse([]byte("backends: [http://a:1]\nbreaker: {enabled: false}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, on := c.BreakerSettings(); on {
		t.Error("breaker on")
	}
}

func TestValidTenant(t *testing.T) {
	for s, want := range map[string]bool{
		"acme": true, "a": true, "tenant-1.eu:prod_x": true, strings.Repeat("a", 128): true,
		"": false, "_overflow": false, "-x": false, "a b": false, "ä": false, strings.Repeat("a", 129): false,
		"a/b": false, "a\x00": false,
	} {
		if got := config.ValidTenant(s); got != want {
			t.Errorf("ValidTenant(%q) = %v, want %v", s, got, want)
		}
	}
}
