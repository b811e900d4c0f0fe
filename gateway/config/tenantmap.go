package config

import (
	"errors"
	"fmt"
	"reflect"

	"go.yaml.in/yaml/v3"
)

// TenantMap is the tenants a config overrides limits for, by name.
//
// It decodes itself: the YAML decoder checks a mapping for a key given
// twice by comparing each key with every later one, so that a file with
// many tenants (a generated one, or one written to hurt) took the square
// of their number to load, on each reload under the reload lock: 200,000
// tenants, minutes. TenantMap finds a key given twice with a map of the
// keys seen, and decodes each tenant's limits as the decoder would, with
// the same messages (an unknown key is refused as with KnownFields).
type TenantMap map[string]TenantLimits

// UnmarshalYAML decodes a mapping of tenant names to their limits. Whatever
// else n is, the decoder's own decoding into a map refuses it, or, null,
// leaves the map empty.
func (m *TenantMap) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return n.Decode((*map[string]TenantLimits)(m))
	}
	d := &strictDecoder{budget: aliasBudget(n)}
	d.tenants(n, m, nil)
	if d.fatal != nil {
		return d.fatal
	}
	if len(d.errs) > 0 {
		return &yaml.TypeError{Errors: d.errs}
	}
	return nil
}

// strictDecoder decodes the tenants mapping as the YAML decoder with
// KnownFields does, but for its check of keys given twice, which is a
// map's here: each step is a constant cost, and probes counts them.
type strictDecoder struct {
	errs  []string
	fatal error // a document the decoder would refuse whole
	// budget is the nodes the decoding may still visit, aliases followed
	// as often as they are used: the decoder's own bound on alias
	// expansion does not reach the decoding done here.
	budget int
	probes int
	// visits, those of them inside an alias, and how deep in aliases the
	// decoding is: the decoder's measure of excessive aliasing
	// (aliasingExcessive).
	visits, aliased, aliasDepth int
	// merged is the keys set so far in the mapping merged mappings are
	// decoded into, as the decoder's mergedFields: a key already set
	// hides a merged one. nil outside a merge.
	merged    map[string]bool
	expanding map[*yaml.Node]bool // the aliased nodes being decoded, to refuse one containing itself
}

// aliasBudget bounds the nodes the decoding of the tenants mapping n may
// visit: a few times its own nodes, aliases to small values (a shared
// rate_limit) followed at each use, and a margin for aliases to values
// outside it; not an alias to a large mapping used by every tenant.
func aliasBudget(n *yaml.Node) int {
	count := 0
	var walk func(*yaml.Node)
	walk = func(n *yaml.Node) {
		count++
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(n)
	return 1_000_000 + 8*count
}

// The decoder's words for a document it refuses whole.
var errExcessiveAliasing = errors.New("yaml: document contains excessive aliasing")

// visit counts a node visited, and reports whether the budget and the
// decoder's measure of aliasing allow it.
func (d *strictDecoder) visit() bool {
	d.probes++
	d.visits++
	if d.aliasDepth > 0 {
		d.aliased++
	}
	if d.budget--; (d.budget < 0 || aliasingExcessive(d.visits, d.aliased)) && d.fatal == nil {
		d.fatal = errExcessiveAliasing
	}
	return d.fatal == nil
}

// aliasingExcessive is the decoder's rule for a document that is mostly
// aliases followed (yaml.v3's decoder.unmarshal and allowedAliasRatio):
// past 100 nodes decoded through aliases and 1,000 in all, their share
// may be 99% up to 400,000 nodes, falling to 10% at 4,000,000. Without
// it, every tenant aliasing one large mapping was decoded whole, a
// document the decoder refuses.
func aliasingExcessive(visits, aliased int) bool {
	if aliased <= 100 || visits <= 1000 {
		return false
	}
	const low, high = 400_000, 4_000_000
	allowed := 0.99
	switch {
	case visits >= high:
		allowed = 0.10
	case visits > low:
		allowed = 0.99 - 0.89*float64(visits-low)/float64(high-low)
	}
	return float64(aliased)/float64(visits) > allowed
}

// twice reports the keys of the mapping n given twice, each against its
// first, in the decoder's words, and whether there were any: the decoder
// refuses such a mapping without decoding any of it.
func (d *strictDecoder) twice(n *yaml.Node) bool {
	first := make(map[string]*yaml.Node, len(n.Content)/2)
	found := false
	for i := 0; i+1 < len(n.Content) && d.visit(); i += 2 {
		k := n.Content[i]
		// The decoder compares keys by kind and text: "1" and 1 are one
		// key, a key and an alias of the same text two.
		id := fmt.Sprint(int(k.Kind)) + ":" + k.Value
		if f, ok := first[id]; ok {
			d.errs = append(d.errs, fmt.Sprintf("line %d: mapping key %#v already defined at line %d", k.Line, k.Value, f.Line))
			found = true
			continue
		}
		first[id] = k
	}
	return found
}

// resolve follows an alias, refusing one whose value contains it.
func (d *strictDecoder) resolve(n *yaml.Node, in func(*yaml.Node)) {
	if n.Kind != yaml.AliasNode {
		in(n)
		return
	}
	if n.Alias == nil {
		// The decoder fails on it, and decoding the node says how.
		d.decodeErr(n.Decode(new(string)))
		return
	}
	if d.expanding[n.Alias] {
		d.fatal = fmt.Errorf("yaml: anchor '%s' value contains itself", n.Value)
		return
	}
	if d.expanding == nil {
		d.expanding = make(map[*yaml.Node]bool)
	}
	d.expanding[n.Alias] = true
	d.aliasDepth++
	in(n.Alias)
	d.aliasDepth--
	delete(d.expanding, n.Alias)
}

// decodeErr keeps the decoder's messages of err.
func (d *strictDecoder) decodeErr(err error) bool {
	var te *yaml.TypeError
	switch {
	case err == nil:
		return true
	case errors.As(err, &te):
		d.errs = append(d.errs, te.Errors...)
	case d.fatal == nil:
		d.fatal = err
	}
	return false
}

// leaf decodes n, not an alias, into out, a pointer to a value n holds
// no mapping of (a number, a string, a struct n is not a mapping for),
// with the decoder's own messages. Given a mapping, the decoder checks it
// for a key given twice before it refuses it: here that is checked in
// time linear in its keys, and the decoder is given the mapping bare.
func (d *strictDecoder) leaf(n *yaml.Node, out any) bool {
	if n.Kind == yaml.MappingNode {
		if d.twice(n) {
			return false
		}
		bare := *n
		bare.Content = nil
		n = &bare
	}
	return d.decodeErr(n.Decode(out))
}

// key returns the name a mapping key decodes to, and false for a key the
// decoder skips (null) or refuses (a mapping or list, a tag its text does
// not fit).
func (d *strictDecoder) key(k *yaml.Node) (name string, ok bool) {
	switch {
	case k.Kind == yaml.AliasNode && k.Alias != nil:
		d.resolve(k, func(a *yaml.Node) { name, ok = d.key(a) })
		return name, ok
	case k.Kind == yaml.ScalarNode && k.Style&yaml.TaggedStyle != 0:
		// Its text is not always its name: the decoder decodes a
		// !!binary key's base64, and refuses the whole document for
		// a tag the text does not fit (!!null x). Parse refuses such
		// keys before (tagErrors); decoded here as the decoder does,
		// a TenantMap decoded on its own names the tenants it would.
		var v any
		if !d.decodeErr(k.Decode(&v)) || v == nil {
			return "", false
		}
		return name, d.leaf(k, &name)
	case k.Kind == yaml.ScalarNode && k.ShortTag() == "!!null":
		return "", false
	case k.Kind == yaml.ScalarNode:
		return k.Value, true
	}
	return name, d.leaf(k, &name)
}

// tenants decodes the mapping n (tenant names to limits) into *m, as the
// decoder decodes a map: a key given twice leaves it undecoded, whole.
func (d *strictDecoder) tenants(n *yaml.Node, m *TenantMap, merged map[string]bool) {
	if !d.visit() || d.twice(n) {
		return
	}
	fresh := *m == nil
	if fresh {
		*m = make(TenantMap)
	}
	merge := d.pairs(n, merged, func(name string, _, v *yaml.Node) {
		var tl TenantLimits
		if d.value(v, reflect.ValueOf(&tl).Elem()) || v.ShortTag() == "!!null" && (fresh || !hasTenant(*m, name)) {
			(*m)[name] = tl
		}
	})
	if merge != nil && d.fatal == nil {
		if merged == nil {
			merged = d.ownKeys(n)
		}
		d.merge(merge, func(mn *yaml.Node) { d.tenants(mn, m, merged) })
	}
}

// pairs calls set for each key of the mapping n, in the file's order, with
// its name, key and value, until a fatal error: not for a key the decoder
// skips or refuses (key), nor for one merged already, if merged is not nil
// (a merged mapping's keys give way to those set before them), which it
// then records. It returns the value of n's merge key (<<), if any, for the
// caller to decode after n's own keys.
func (d *strictDecoder) pairs(n *yaml.Node, merged map[string]bool, set func(name string, k, v *yaml.Node)) (merge *yaml.Node) {
	for i := 0; i+1 < len(n.Content) && d.fatal == nil; i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if isMergeKey(k) {
			merge = v
			continue
		}
		name, ok := d.key(k)
		if !ok {
			continue
		}
		if merged != nil {
			if merged[name] {
				continue
			}
			merged[name] = true
		}
		set(name, k, v)
	}
	return merge
}

func hasTenant(m TenantMap, name string) bool {
	_, ok := m[name]
	return ok
}

// ownKeys returns the names of the keys n, a mapping, sets itself.
func (d *strictDecoder) ownKeys(n *yaml.Node) map[string]bool {
	set := make(map[string]bool, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		d.probes++
		if k := n.Content[i]; k.Kind == yaml.ScalarNode && !isMergeKey(k) {
			set[k.Value] = true
		}
	}
	return set
}

// merge decodes each mapping a merge key's value v names with into,
// refusing anything else as the decoder does.
func (d *strictDecoder) merge(v *yaml.Node, into func(*yaml.Node)) {
	mappings := []*yaml.Node{v}
	if v.Kind == yaml.SequenceNode {
		mappings = v.Content
	}
	for _, mn := range mappings {
		if d.fatal != nil {
			return
		}
		target := mn
		if mn.Kind == yaml.AliasNode && mn.Alias != nil {
			target = mn.Alias
		}
		if target.Kind != yaml.MappingNode {
			d.fatal = errors.New("yaml: map merge requires map or sequence of maps as the value")
			return
		}
		d.resolve(mn, into)
	}
}

// value decodes n into out as the decoder with KnownFields does, and
// reports whether it did.
func (d *strictDecoder) value(n *yaml.Node, out reflect.Value) (ok bool) {
	if !d.visit() {
		return false
	}
	if n.Kind == yaml.AliasNode {
		d.resolve(n, func(a *yaml.Node) { ok = d.value(a, out) })
		return ok
	}
	switch {
	case out.Kind() == reflect.Pointer:
		if n.ShortTag() == "!!null" {
			out.Set(reflect.Zero(out.Type()))
			return true
		}
		if out.IsNil() {
			out.Set(reflect.New(out.Type().Elem()))
		}
		return d.value(n, out.Elem())
	case out.Kind() == reflect.Struct && n.Kind == yaml.MappingNode:
		return d.fields(n, out)
	default:
		return d.leaf(n, out.Addr().Interface())
	}
}

// fields decodes the mapping n into the struct out, field by field in
// the file's order, then the mappings merged into it.
func (d *strictDecoder) fields(n *yaml.Node, out reflect.Value) bool {
	if d.twice(n) {
		return false
	}
	merged := d.merged
	d.merged = nil
	merge := d.pairs(n, merged, func(name string, k, v *yaml.Node) {
		f, ok := yamlField(out.Type(), name)
		if !ok {
			d.errs = append(d.errs, fmt.Sprintf("line %d: field %s not found in type %s", k.Line, name, out.Type()))
			return
		}
		d.value(v, out.FieldByIndex(f.Index))
	})
	if merge != nil && d.fatal == nil {
		if merged == nil {
			merged = d.ownKeys(n)
		}
		d.merge(merge, func(mn *yaml.Node) {
			d.merged = merged
			d.value(mn, out)
			d.merged = nil
		})
	}
	return true
}
