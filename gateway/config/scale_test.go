package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
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

// manyTenantsYAML is a valid config whose tenants mapping has n keys, the
// last of them given again at the end when twice is set.
func manyTenantsYAML(n int, twice bool) []byte {
	var b strings.Builder
	b.WriteString("backends: [http://127.0.0.1:8081]\ntenants:\n")
	for i := range n {
		fmt.Fprintf(&b, "  t%06d: {share: 1}\n", i)
	}
	if twice {
		fmt.Fprintf(&b, "  t%06d: {share: 2}\n", n-1)
	}
	return []byte(b.String())
}

// TestTenantsDecodedInLinearSteps decodes a tenants mapping of 100,000
// tenants (200,000 keys) and counts the steps: a few per node, however many tenants there
// are. The YAML decoder's own check for a key given twice compares each
// key with every later one: a file with 100,000 tenants took minutes to
// load, on each reload under the reload lock. A key given twice is still
// refused, naming it and both its lines.
func TestTenantsDecodedInLinearSteps(t *testing.T) {
	const n = 100_000
	for _, twice := range []bool{false, true} {
		var root yaml.Node
		if err := yaml.Unmarshal(manyTenantsYAML(n, twice), &root); err != nil {
			t.Fatal(err)
		}
		tenants := root.Content[0].Content[3]
		d := &strictDecoder{budget: aliasBudget(tenants)}
		var m TenantMap
		d.tenants(tenants, &m, nil)
		if d.fatal != nil {
			t.Fatal(d.fatal)
		}
		nodes := 1 + 4*n // the mapping; each tenant's name, its mapping, share and 1
		if perNode := float64(d.probes) / float64(nodes); perNode > 2 {
			t.Errorf("twice %v: %d steps, %.1f for each of %d nodes: want at most 2", twice, d.probes, perNode, nodes)
		}
		if !twice {
			if len(d.errs) > 0 || len(m) != n || *m[fmt.Sprintf("t%06d", n-1)].Share != 1 {
				t.Errorf("%d tenants decoded, want %d: %v", len(m), n, d.errs)
			}
			continue
		}
		want := fmt.Sprintf(`line %d: mapping key "t%06d" already defined at line %d`, n+3, n-1, n+2)
		if len(d.errs) != 1 || d.errs[0] != want || m != nil {
			t.Errorf("a tenant given twice: %q, %d tenants decoded; want %q, none", d.errs, len(m), want)
		}
	}
}

// A file with 100,000 tenants loads, and one that gives a tenant twice is
// refused, naming the tenant and its lines.
func TestParseManyTenants(t *testing.T) {
	if testing.Short() {
		t.Skip("parses 100,000 tenants twice")
	}
	const n = 100_000
	c, err := Parse(manyTenantsYAML(n, false))
	if err != nil || len(c.Tenants) != n {
		t.Fatalf("%v", err)
	}
	_, err = Parse(manyTenantsYAML(n, true))
	want := fmt.Sprintf(`config: line %d: tenants.t%06d: mapping key "t%06d" already defined at line %d`, n+3, n-1, n-1, n+2)
	if err == nil || err.Error() != want {
		t.Errorf("a tenant given twice: %v, want %s", err, want)
	}
}

// Aliases in the tenants mapping are followed at each use, as the decoder
// follows them, but within a budget of a few steps per node of the
// mapping: tenants sharing a chain of 200 merged anchors, each use
// walking the whole chain, are refused as the decoder refuses excessive
// aliasing, in a bounded number of steps, where a shared rate_limit
// (TestParseLooksUpKeysInConstantTime) is not.
func TestTenantsAliasesWithinBudget(t *testing.T) {
	const chain, n = 200, 10_000
	var b strings.Builder
	b.WriteString("backends: [http://127.0.0.1:8081]\ntenants:\n  c0: &c0 {share: 1}\n")
	for i := 1; i < chain; i++ {
		fmt.Fprintf(&b, "  c%d: &c%d {<<: *c%d, share: 1}\n", i, i, i-1)
	}
	for i := range n {
		fmt.Fprintf(&b, "  t%d: *c%d\n", i, chain-1)
	}
	var root yaml.Node
	if err := yaml.Unmarshal([]byte(b.String()), &root); err != nil {
		t.Fatal(err)
	}
	tenants := root.Content[0].Content[3]
	d := &strictDecoder{budget: aliasBudget(tenants)}
	var m TenantMap
	d.tenants(tenants, &m, nil)
	if !errors.Is(d.fatal, errExcessiveAliasing) {
		t.Errorf("%d tenants each walking a chain of %d anchors: %v, want %v", n, chain, d.fatal, errExcessiveAliasing)
	}
	if limit := 2 * aliasBudget(tenants); d.probes > limit {
		t.Errorf("%d steps, over twice the budget, %d", d.probes, limit)
	}
	if _, err := Parse([]byte(b.String())); err == nil || err.Error() != "config: document contains excessive aliasing" {
		t.Errorf("Parse: %v", err)
	}
}

// TestParseMarksAnAnchorsKeysOnce counts the keys Parse looks at for a
// file whose tenants each use one anchored mapping with many errors (here
// unknown keys): each tenant's copy of each error was placed by looking
// at the mapping's keys again, and each error left once the copies are
// dropped marked every key an alias brings in from that line, the
// product of the mapping's errors and the tenants' keys. 4,000 tenants
// aliasing a mapping of 256 unknown keys, a 49 KB file, took 44 seconds to
// load. A copy is now dropped before it is placed, and each line and type
// marked once.
func TestParseMarksAnAnchorsKeysOnce(t *testing.T) {
	const tenants, fields = 200, 64
	var b strings.Builder
	b.WriteString("backends: [http://127.0.0.1:8081]\nlimits: &many {")
	for i := range fields {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "x%d: 1", i)
	}
	b.WriteString("}\ntenants:\n")
	for i := range tenants {
		fmt.Fprintf(&b, "  t%d: *many\n", i)
	}
	_, keys, err := parse([]byte(b.String()))
	if err == nil {
		t.Fatal("a mapping of unknown keys accepted")
	}
	if perKey := float64(keys.probes) / float64(len(keys.list)); perKey > 8 {
		t.Errorf("lookups looked at %d keys, %.1f for each of the file's %d: want at most 8",
			keys.probes, perKey, len(keys.list))
	}
}
