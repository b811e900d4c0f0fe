package config

import (
	"fmt"
	"strings"
	"testing"
)

// tenantsYAML is a valid config with n tenants, each setting four keys
// and a rate limit of two, as a large deployment's file does.
func tenantsYAML(n int) []byte {
	var b strings.Builder
	b.WriteString("backends: [http://127.0.0.1:8081]\nlimits:\n  global_max_in_flight: 100000\ntenants:\n")
	for i := range n {
		fmt.Fprintf(&b, "  tenant-%05d:\n    max_concurrency: 8\n    max_in_flight: 64\n    queue_threshold: 16\n    share: %d\n    rate_limit: {rps: 50, burst: 100}\n", i, 1+i%4)
	}
	return []byte(b.String())
}

// BenchmarkParseTenants measures Parse as the tenants grow: every reload
// parses the whole file under the reload lock, so its cost should grow
// with the file, not with its square.
func BenchmarkParseTenants(b *testing.B) {
	for _, n := range []int{1000, 8000} {
		b.Run(fmt.Sprintf("tenants=%d", n), func(b *testing.B) {
			data := tenantsYAML(n)
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				c, err := Parse(data)
				if err != nil {
					b.Fatal(err)
				}
				if len(c.Tenants) != n {
					b.Fatalf("%d tenants parsed, want %d", len(c.Tenants), n)
				}
			}
		})
	}
}
