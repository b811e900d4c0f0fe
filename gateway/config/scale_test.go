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

// TestParseLooksUpKeysInConstantTime counts the keys Parse's lookups look
// at, in a valid file and in one where every tenant has an error of each
// kind Parse places (a value the decoder refuses, an unknown key, a value
// out of range, one an alias brings in), and in one where half the
// tenants have a key twice, which leaves them unchecked, and the other
// half a value out of range: a few per key, however many tenants there
// are. Looking each up by scanning every key made a reload
// of a file with 8,000 tenants take seconds, under the reload lock.
func TestParseLooksUpKeysInConstantTime(t *testing.T) {
	const n = 2000
	var bad strings.Builder
	bad.WriteString("backends: [http://127.0.0.1:8081]\nrate_limit: &slow {rps: 0}\ntenants:\n")
	for i := range n {
		fmt.Fprintf(&bad, "  tenant-%05d:\n    max_concurrency: -1\n    share: many\n    queue_treshold: 3\n    rate_limit: *slow\n", i)
	}
	var twice strings.Builder
	twice.WriteString("backends: [http://127.0.0.1:8081]\ntenants:\n")
	for i := range n / 2 {
		fmt.Fprintf(&twice, "  twice-%05d: {share: 1, share: 2}\n  wrong-%05d: {max_concurrency: -1}\n", i, i)
	}
	for _, tc := range []struct {
		name       string
		data       []byte
		wantErrors int
	}{
		{"valid", tenantsYAML(n), 0},
		// The top-level rate_limit's rps, and four per tenant.
		{"invalid", []byte(bad.String()), 1 + 4*n},
		// A key given twice, and a value out of range, per two tenants.
		{"twice", []byte(twice.String()), n},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, keys, err := parse(tc.data)
			var got int
			if err != nil {
				got = len(err.(interface{ Unwrap() []error }).Unwrap())
			}
			if got != tc.wantErrors {
				t.Fatalf("%d errors, want %d: %v", got, tc.wantErrors, err)
			}
			if perKey := float64(keys.probes) / float64(len(keys.list)); perKey > 8 {
				t.Errorf("lookups looked at %d keys, %.1f for each of the file's %d: want at most 8",
					keys.probes, perKey, len(keys.list))
			}
		})
	}
}
