package config

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// FuzzTenantMapAsDecoder checks that TenantMap decodes a tenants mapping
// as the YAML decoder with KnownFields decodes it into a plain map: the
// same tenants and limits, the same messages, and the same words for a
// document refused whole; but that a key given more than twice is
// reported against its first copy only (the decoder reports every pair).
// Left out are the documents where the decoder's own quirks decide: a
// list or mapping as a key beside a merge, on which it fails with a
// runtime error, and keys that are not strings beside a merge (see
// mergesNonStringKeys).
func FuzzTenantMapAsDecoder(f *testing.F) {
	for _, s := range []string{
		"tenants: {a: {share: 1}, b: {shar: 1, rate_limit: {rps: 1, burst: x}}}",
		"tenants: {a: {share: 1}, a: {share: 2}, a: {}}",
		"tenants:\n  a: {share: 1}\n  a: {share: 2}\n  a: {share: 3}\n",
		"r: &r {rps: 3}\ntenants: {<<: {a: {rate_limit: *r}}, b: {<<: [{share: 1}, {max_in_flight: 2}], share: 4}}",
		"tenants: {a: &t {share: x, zz: 1}, b: *t, {k: 1}: {}, ~: {}, 1: {queue_threshold: 1e3}}",
		"tenants: {a: {share: {x: 1, x: 2}}, b: {rate_limit: [1]}, c: ~, d: 5}",
		"tenants: {<<: 5}",
		// A key with a tag is read as the decoder reads it: !!binary
		// decoded, a tag its text does not fit refused, !!null skipped.
		"tenants: {!!binary YWNtZQ==: {share: 1}, !!int 7: {share: 2}}",
		"tenants: {!!null x: {share: 1}}",
		"tenants: {!!null ~: {share: 1}, !foo b: {}}",
		"tenants: {!!binary '%%%': {}}",
		"tenants: [a]",
	} {
		f.Add([]byte(s))
	}
	type plain struct {
		Tenants map[string]TenantLimits `yaml:"tenants"`
	}
	type own struct {
		Tenants TenantMap `yaml:"tenants"`
	}
	decode := func(data []byte, v any) (msgs []string, fatal error) {
		dec := yaml.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true)
		err := dec.Decode(v)
		var te *yaml.TypeError
		if errors.As(err, &te) {
			return te.Errors, nil
		}
		return nil, err
	}
	againstFirst := regexp.MustCompile(` already defined at line \d+$`)
	normal := func(msgs []string) []string {
		for i, m := range msgs {
			msgs[i] = strings.ReplaceAll(againstFirst.ReplaceAllString(m, ""), "config.own", "config.plain")
		}
		slices.Sort(msgs)
		return slices.Compact(msgs)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var root yaml.Node
		if yaml.Unmarshal(data, &root) != nil || len(largeMappings(&root)) > 0 || mergesNonStringKeys(&root) {
			return
		}
		var p plain
		var o own
		pm, pf := decode(data, &p)
		om, of := decode(data, &o)
		if pf != nil && strings.Contains(pf.Error(), "runtime error") {
			// The decoder's own failure (a list or mapping as a key of a
			// mapping with a merge): TenantMap refuses the key instead.
			return
		}
		if (pf == nil) != (of == nil) || pf != nil && pf.Error() != of.Error() {
			t.Fatalf("the decoder: %v; TenantMap: %v", pf, of)
		}
		if pf != nil {
			return
		}
		if pn, on := normal(pm), normal(om); !slices.Equal(pn, on) {
			t.Fatalf("the decoder's messages:\n%q\nTenantMap's:\n%q", pn, on)
		}
		if !reflect.DeepEqual(p.Tenants, map[string]TenantLimits(o.Tenants)) {
			t.Fatalf("the decoder decoded %v, TenantMap %v", p.Tenants, o.Tenants)
		}
	})
}

// mergesNonStringKeys reports whether a mapping of n with a merge key has a
// key that is not a string (1, true): the decoder tells the mapping's own
// keys from merged ones by their decoded values, so that its own 1 hides
// no merged "1" when decoded into a map of strings, which TenantMap,
// comparing names, hides.
func mergesNonStringKeys(n *yaml.Node) bool {
	if n.Kind == yaml.MappingNode {
		merges, other := false, false
		for i := 0; i+1 < len(n.Content); i += 2 {
			switch k := n.Content[i]; {
			case isMergeKey(k):
				merges = true
			case k.ShortTag() != "!!str":
				other = true
			}
		}
		if merges && other {
			return true
		}
	}
	for _, c := range n.Content {
		if mergesNonStringKeys(c) {
			return true
		}
	}
	return false
}

// Every tenant aliasing one large mapping is a document the decoder
// refuses whole, for its aliasing: TenantMap refuses it alike, instead of
// decoding the mapping again for each tenant (1,000 tenants of a 256-key
// mapping: 15 MB of messages and near 1 GB allocated).
func TestTenantMapRefusesExcessiveAliasingAsTheDecoder(t *testing.T) {
	var b strings.Builder
	b.WriteString("anchors:\n  - &a {")
	for i := range 256 {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "x%d: 1", i)
	}
	b.WriteString("}\ntenants:\n")
	for i := range 1000 {
		fmt.Fprintf(&b, "  t%d: *a\n", i)
	}
	type plain struct {
		A       any                     `yaml:"anchors"`
		Tenants map[string]TenantLimits `yaml:"tenants"`
	}
	type own struct {
		A       any       `yaml:"anchors"`
		Tenants TenantMap `yaml:"tenants"`
	}
	decode := func(v any) error {
		d := yaml.NewDecoder(strings.NewReader(b.String()))
		d.KnownFields(true)
		return d.Decode(v)
	}
	pe, oe := decode(&plain{}), decode(&own{})
	if pe == nil || oe == nil || pe.Error() != oe.Error() {
		t.Fatalf("the decoder: %.80v; TenantMap: %.80v", pe, oe)
	}
	// Aliases to small values, followed at each use, are no excess.
	var ok strings.Builder
	ok.WriteString("anchors: [&r {rps: 3, burst: 4}]\ntenants:\n")
	for i := range 2000 {
		fmt.Fprintf(&ok, "  t%d: {share: 1, rate_limit: *r}\n", i)
	}
	var o own
	d := yaml.NewDecoder(strings.NewReader(ok.String()))
	d.KnownFields(true)
	if err := d.Decode(&o); err != nil || len(o.Tenants) != 2000 {
		t.Fatalf("2,000 tenants sharing a rate limit: %d decoded, %v", len(o.Tenants), err)
	}
}
