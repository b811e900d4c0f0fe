package config_test

import (
	"fmt"

	"github.com/groupexec/groupexec/gateway/config"
)

func ExampleParse() {
	cfg, err := config.Parse([]byte(`
backends: [http://127.0.0.1:8081]
tenants: {vip: {max_concurrency: 16, share: 3}}
`))
	if err != nil {
		panic(err)
	}
	p, _ := cfg.Policy()
	vip, _ := p.Group("vip")
	fmt.Println(cfg.Listen, cfg.Tenant.Header, vip.MaxConcurrency, vip.Share)

	_, err = config.Parse([]byte(`
backends: [http://127.0.0.1:8081]
limits:
  queue_timeuot: 2s
`))
	fmt.Println(err)
	// Output:
	// 127.0.0.1:8080 X-Tenant 16 3
	// config: line 4: limits.queue_timeuot: unknown key: did you mean queue_timeout?
}
