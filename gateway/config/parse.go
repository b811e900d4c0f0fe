package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// MaxFileBytes is the largest file Load reads: 64 MiB, some million
// tenants, where a config of many tenants is a few MiB.
const MaxFileBytes = 64 << 20

// Load reads and parses the file at path. A file larger than
// MaxFileBytes is refused (matching ErrInvalid) without being read whole:
// --config /dev/zero, or a log named for the config, would otherwise
// grow the process until the system killed it, on a reload too. A named
// pipe is read as a file's text given once (--check --config /dev/stdin);
// a gateway reloading the file reads it with LoadRegular.
func Load(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	return load(f, path)
}

// LoadRegular is Load for a file read again, as a reload reads it: path
// must be a regular file (a symlink to one is followed, as a Kubernetes
// ConfigMap's is), else it is refused at once, matching ErrInvalid. Load
// opening a named pipe waits for a writer, and reads a device (a
// terminal) until it ends: either way a reload waited for good, holding
// the reloads after it and the drain that waits for the one under way.
func LoadRegular(path string) (*Config, error) {
	f, err := openRegular(path)
	var nr *notRegularError
	switch {
	case errors.As(err, &nr):
		return nil, &Error{Reason: nr.Error() + ": not a config file"}
	case err != nil:
		return nil, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	return load(f, path)
}

// load reads f, the file at path, whole and parses it.
func load(f *os.File, path string) (*Config, error) {
	data, err := readCapped(f, path)
	switch {
	case errors.Is(err, errTooLarge):
		return nil, &Error{Reason: fmt.Sprintf("%s is larger than %d bytes (64 MiB): not a config file", path, MaxFileBytes)}
	case err != nil:
		return nil, fmt.Errorf("config: %w", err)
	}
	return Parse(data)
}

// Parse parses a YAML document, fills defaults, validates the result and
// loads the files it names (TLS certificates, the bearer token's key).
// Every error it returns matches ErrInvalid and names the line and, where it
// can, the key. All the problems of a file are reported at once, in line
// order (errors.Join of *Error); only a syntax error stops it early.
func Parse(data []byte) (*Config, error) {
	c, _, err := parse(data)
	return c, err
}

// parse is Parse, and returns the key index too (nil before it is built),
// for the test that counts its lookups.
func parse(data []byte) (*Config, *keyIndex, error) {
	// The node tree is parsed first: it reports syntax errors, and it is what
	// turns the decoder's and the validator's complaints into key paths and
	// lines.
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		if e := unknownAnchor(data, err); e != nil {
			return nil, nil, e
		}
		e := syntaxError(err)
		if e.Line == 0 {
			// The reader's errors have no line: the byte it refused
			// is found again, to name its line.
			if u := unreadableByte(data); u != nil {
				e = u
			}
		}
		return nil, nil, e
	}
	if root.Kind == 0 || len(root.Content) == 0 {
		return nil, nil, &Error{Reason: "empty file: at least `backends` is required"}
	}
	if errs := largeMappings(&root); len(errs) > 0 {
		return nil, nil, joinInLineOrder(errs)
	}
	// A tag the config does not take, an alias as a key and a merge of
	// what is no mapping are reported alone: the decoder stops at some
	// tags (!!null x) and at such a merge, and the checks below would
	// read a key so written otherwise than the decoder does (!!binary,
	// *name).
	errs := append(append(tagErrors(&root, newSource(data)), aliasKeys(&root)...), mergeErrors(&root)...)
	if len(errs) > 0 {
		return nil, nil, joinInLineOrder(errs)
	}
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	err := dec.Decode(&c)
	var te *yaml.TypeError
	if err != nil && !errors.As(err, &te) {
		// Before the keys are indexed: a document the decoder refuses
		// for its aliases (one containing itself, or expanding too far)
		// is not expanded here either.
		return nil, nil, syntaxError(err)
	}
	keys := indexKeys(&root, reflect.TypeOf(c))
	if err != nil {
		// A type error leaves the rest decoded: the other keys are still
		// checked, so that one run reports every problem.
		errs = decodeErrors(te, keys)
	}
	// The decoder cuts a number with a fraction to an integer where it
	// takes one (a share of 2.7 would be 2): refuse it instead.
	fractions(&root, reflect.TypeOf(c), "", 0, nil, &errs)
	nullKeys(&root, "", &errs)
	nullValues(keys, &errs)
	unitlessDurations(keys, &errs)
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		// Reported with the first document's problems, which are
		// checked as ever: the decoder read that one alone.
		errs = append(errs, &Error{Line: extra.Line, Reason: "more than one YAML document"})
	}
	// The decoder decodes, and refuses, an anchored value at each alias
	// that uses it, and names only the line it is written on: such an
	// error is reported once, and the keys the aliases bring in are not
	// checked (the decoder left them zero), as the key itself is not.
	seen := make(map[Error]bool, len(errs))
	errs = slices.DeleteFunc(errs, func(e *Error) bool {
		dup := seen[*e]
		seen[*e] = true
		return dup
	})
	failed := make(map[string]bool, len(errs))
	// The keys an error marks depend on its line and type alone: each pair
	// is marked once. An anchored mapping with many errors (unknown keys),
	// which every tenant aliases, has them all on its line, and marking
	// them for each error cost the product of its errors and the tenants'
	// keys: 4,000 tenants and 256 keys, a 49 KB file, took 44 s to load.
	type lineType struct {
		line int
		typ  string
	}
	marked := make(map[lineType]bool, len(errs))
	for _, e := range errs {
		failed[e.Key] = true
		typ := keys.typ(e.Key)
		if marked[lineType{e.Line, typ}] {
			continue
		}
		marked[lineType{e.Line, typ}] = true
		for _, i := range keys.valuesOn(e.Line) {
			if k := keys.list[i]; k.alias && k.typ == typ {
				failed[k.path] = true
			}
		}
	}
	// The decoder leaves a mapping with a key given twice undecoded, whole:
	// its keys are present but zero, and checking them would report
	// problems the file does not have (every key of the file, for a
	// duplicate at the top): they are not checked (undecoded).
	present := func(path string) bool { return keys.has(path) }
	c.setDefaults(present)
	for _, p := range c.validate(present, keys.itemLine) {
		if !failed[p.key] && !keys.undecoded(p.key) {
			line := p.line
			if line == 0 {
				line = keys.line(p.key)
			}
			errs = append(errs, &Error{Line: line, Key: p.key, Reason: p.reason})
		}
	}
	if len(errs) > 0 {
		return nil, keys, joinInLineOrder(errs)
	}
	c.keys = *keys
	return &c, keys, nil
}

// JoinErrors joins errs sorted by line, as Parse does: errors without a
// line come last. It returns nil for none.
func JoinErrors(errs []*Error) error {
	if len(errs) == 0 {
		return nil
	}
	return joinInLineOrder(errs)
}

// joinInLineOrder joins errs sorted by line; errors without a line (a
// required key missing) come last.
func joinInLineOrder(errs []*Error) error {
	line := func(e *Error) int {
		if e.Line == 0 {
			return int(^uint(0) >> 1)
		}
		return e.Line
	}
	slices.SortStableFunc(errs, func(a, b *Error) int { return cmp.Compare(line(a), line(b)) })
	joined := make([]error, len(errs))
	for i, e := range errs {
		joined[i] = e
	}
	return errors.Join(joined...)
}

// MaxMappingKeys is the most keys a mapping of the file may have, but for
// tenants: no other takes more than a few dozen without an unknown key or
// one given twice.
const MaxMappingKeys = 256

// largeMappings refuses each mapping of more than MaxMappingKeys keys but
// the tenants mapping itself, unless it is anchored. The YAML decoder
// checks a mapping for a key given twice by comparing each key with every
// later one, the square of its keys; a file with a large mapping (its own
// keys unknown, a tenant's, an anchor used as tenants) would take minutes
// to load, on each reload under the reload lock. Capped, the decoder's
// work is linear in the file: TenantMap decodes the tenants itself, and an
// anchored mapping, which an alias could have the decoder decode
// elsewhere, is capped too. Such a file has nothing else checked: a
// mapping that large is its problem.
func largeMappings(root *yaml.Node) []*Error {
	var errs []*Error
	var walk func(n *yaml.Node, path string, line int, tenants bool)
	walk = func(n *yaml.Node, path string, line int, tenants bool) {
		if n.Kind == yaml.MappingNode && len(n.Content)/2 > MaxMappingKeys && (!tenants || n.Anchor != "") {
			errs = append(errs, &Error{Line: line, Key: path, Reason: fmt.Sprintf(
				"a mapping of %d keys: none but tenants may have more than %d", len(n.Content)/2, MaxMappingKeys)})
			return
		}
		for i, c := range n.Content {
			if n.Kind != yaml.MappingNode {
				walk(c, path, c.Line, false)
				continue
			}
			k := n.Content[i&^1]
			p := k.Value
			if path != "" {
				p = path + "." + k.Value
			}
			// A key is never a tenants mapping; a value is if its key
			// is tenants.
			walk(c, p, k.Line, i%2 == 1 && k.Value == "tenants")
		}
	}
	walk(root, "", 0, false)
	return errs
}

// key is one mapping key of the document: its dotted path, line and, for a
// scalar value, that value.
type key struct {
	path  string
	line  int
	value string
	// alias is set for a key an alias brings in, or whose value is an
	// alias: the decoder decodes its value where it is anchored.
	alias bool
	// vline is the line the key's value starts on (an alias's, the
	// anchored value's), and typ the Go type it decodes into, as the
	// decoder names it ("" when the config has no such key): a value of
	// the wrong shape is refused by the decoder at vline, naming typ.
	vline int
	typ   string
	// nullLeaf is set for a key whose value is null (~, null, nothing)
	// where it takes a scalar or a list: see nullValues.
	nullLeaf bool
}

// keyIndex is the document's keys, indexed by path and by line: Parse
// looks a key up for each key the config has and for each error, so a
// scan of every key per lookup would make a file with many tenants cost
// the square of its keys (on each reload, under the reload lock).
type keyIndex struct {
	list   []key          // in document order
	byPath map[string]int // a path's first key in list
	// byLine and byValueLine list, in document order, the keys (their
	// indices in list) whose line, or vline, it is.
	byLine      map[int][]int
	byValueLine map[int][]int
	// twice holds the paths of the mappings that have a key twice ("" for
	// the document's own), which the decoder leaves undecoded.
	twice map[string]bool
	// items holds, for the path of a list written in place (not through
	// an alias), the lines of its items, in order.
	items map[string][]int
	// probes counts the keys (and mappings with a key twice) lookups have
	// looked at, so that a test can check that they stay a few per key,
	// however many keys there are.
	probes int
}

func newKeyIndex(list []key) *keyIndex {
	ix := &keyIndex{list: list, byPath: make(map[string]int, len(list)),
		byLine: make(map[int][]int), byValueLine: make(map[int][]int)}
	for i, k := range list {
		if _, ok := ix.byPath[k.path]; !ok {
			ix.byPath[k.path] = i
		}
		ix.byLine[k.line] = append(ix.byLine[k.line], i)
		ix.byValueLine[k.vline] = append(ix.byValueLine[k.vline], i)
	}
	return ix
}

// indexKeys lists every mapping key in document order, and the paths of
// the mappings that have a key twice. t is the type the document is decoded
// into. The keys an alias (*name) or a merge (<<: *name) brings in are
// listed under the key that uses them, at its line: they are set there
// as surely as if written out, and left out, an omitted key's default
// would replace what they set; but not a merged key that a key already in
// the mapping hides (keysInForce), which the decoder skips with the keys
// under it: listed, they would count as set. An alias is followed only
// where t says what it decodes into, which bounds the walk by the type's
// depth.
func indexKeys(root *yaml.Node, t reflect.Type) *keyIndex {
	var keys []key
	twice := make(map[string]bool)
	items := make(map[string][]int)
	// hidden is, for a mapping merged into another, the keys set in that
	// other mapping so far (merges): walk lists only the keys it does not
	// hide, and adds them to it.
	var walk func(n *yaml.Node, t reflect.Type, prefix string, at int, hidden map[string]bool)
	walk = func(n *yaml.Node, t reflect.Type, prefix string, at int, hidden map[string]bool) {
		for t != nil && t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch n.Kind {
		case yaml.AliasNode:
			// Followed where the decoder decodes the mapping it names
			// into a struct or map, as many times as it does: its own
			// limit on aliases bounds the walk's.
			if n.Alias != nil && n.Alias.Kind == yaml.MappingNode && t != nil &&
				(t.Kind() == reflect.Struct || t.Kind() == reflect.Map) {
				if at == 0 {
					at = n.Line
				}
				walk(n.Alias, t, prefix, at, hidden)
			}
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, t, prefix, at, nil)
			}
		case yaml.SequenceNode:
			var elem reflect.Type
			if t != nil && t.Kind() == reflect.Slice {
				elem = t.Elem()
			}
			if _, ok := items[prefix]; !ok && at == 0 {
				lines := make([]int, len(n.Content))
				for i, c := range n.Content {
					lines[i] = c.Line
				}
				items[prefix] = lines
			}
			for _, c := range n.Content {
				walk(c, elem, prefix, at, nil)
			}
		case yaml.MappingNode:
			skip, set := keysInForce(n, hidden)
			seen := make(map[string]bool, len(n.Content)/2)
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				if k.ShortTag() == "!!merge" {
					// Its mapping's keys (or each listed mapping's)
					// are this mapping's own, but those it has already.
					for _, m := range mergedOf(v) {
						walk(m, t, prefix, at, set)
					}
					continue
				}
				if seen[k.Value] {
					twice[prefix] = true
				}
				seen[k.Value] = true
				if skip != nil && skip[i/2] {
					continue
				}
				path := k.Value
				if prefix != "" {
					path = prefix + "." + k.Value
				}
				line := k.Line
				if at != 0 {
					line = at
				}
				var vt reflect.Type
				switch {
				case t == nil:
				case t.Kind() == reflect.Map:
					vt = t.Elem()
				case t.Kind() == reflect.Struct:
					if f, ok := yamlField(t, k.Value); ok {
						vt = f.Type
					}
				}
				kv := key{path: path, line: line, value: v.Value, alias: at != 0, vline: v.Line}
				if v.Kind == yaml.AliasNode && v.Alias != nil {
					kv.value, kv.vline, kv.alias = v.Alias.Value, v.Alias.Line, true
				}
				if vt != nil {
					for vt.Kind() == reflect.Pointer {
						vt = vt.Elem()
					}
					kv.typ = vt.String()
					nv := v
					if v.Kind == yaml.AliasNode && v.Alias != nil {
						nv = v.Alias
					}
					kv.nullLeaf = nv.Kind == yaml.ScalarNode && nv.ShortTag() == "!!null" &&
						vt.Kind() != reflect.Struct && vt.Kind() != reflect.Map
					if vt.Kind() == reflect.Map {
						// TenantMap refuses what is not a
						// mapping by decoding it as the map it
						// is, whose name the decoder gives.
						kv.typ = reflect.MapOf(vt.Key(), vt.Elem()).String()
					}
				}
				keys = append(keys, kv)
				walk(v, vt, path, at, nil)
			}
		}
	}
	walk(root, t, "", 0, nil)
	ix := newKeyIndex(keys)
	ix.twice = twice
	ix.items = items
	return ix
}

// keysInForce prepares a walk of n, a mapping, over the keys the decoder
// decodes. A merge is shallow: a key written in a mapping, wherever the
// merge is, or brought in by a mapping merged before (<<: [*a, *b]: a's),
// hides the same key of a merged mapping, with all its value holds, which
// the decoder then skips. hidden is the keys set in the mapping n is
// merged into (nil if n is merged into none): skip[i/2] tells whether it
// hides n's key n.Content[i]. n's keys are added to it, and set is what
// n's own merged mappings are walked with. Both are nil for a mapping
// neither merged nor merging, which hides nothing.
func keysInForce(n *yaml.Node, hidden map[string]bool) (skip []bool, set map[string]bool) {
	set = hidden
	if set == nil {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if isMergeKey(n.Content[i]) {
				set = make(map[string]bool)
				break
			}
		}
		if set == nil {
			return nil, nil
		}
	}
	skip = make([]bool, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; !isMergeKey(k) {
			skip[i/2] = set[k.Value]
		}
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; !isMergeKey(k) {
			set[k.Value] = true
		}
	}
	return skip, set
}

// isMergeKey reports whether k is a merge key (<<), its value first: most
// keys are not, and resolving a key's tag costs more.
func isMergeKey(k *yaml.Node) bool {
	return k.Value == "<<" && k.ShortTag() == "!!merge"
}

// mergedOf returns the mappings a merge key's value v names: itself, or
// each one listed.
func mergedOf(v *yaml.Node) []*yaml.Node {
	if v.Kind == yaml.SequenceNode {
		return v.Content
	}
	return []*yaml.Node{v}
}

// nullKeys reports every mapping key in n that is null (null, ~, Null or
// nothing): the decoder drops such a key and its value without a word,
// so that "tenants: {null: ...}" would configure no tenant, and an
// unknown key would go unreported. It reports every null list item too,
// which the decoder drops alike: a trusted_proxies list of one address
// left out (a dash and nothing) would be empty, trusting every address.
func nullKeys(n *yaml.Node, prefix string, errs *[]*Error) {
	for i := 0; i < len(n.Content); i++ {
		c := n.Content[i]
		if n.Kind == yaml.SequenceNode && c.Kind == yaml.ScalarNode && c.ShortTag() == "!!null" {
			v := c.Value
			if v == "" {
				v = "nothing"
			}
			*errs = append(*errs, &Error{Line: c.Line, Key: prefix,
				Reason: fmt.Sprintf("item %d is null (%s), which names nothing: remove it or give it a value", i+1, v)})
		}
		if n.Kind != yaml.MappingNode {
			nullKeys(c, prefix, errs)
			continue
		}
		if i%2 == 1 {
			continue
		}
		if isMergeKey(c) {
			// The merged mappings' keys are the mapping's own.
			nullKeys(n.Content[i+1], prefix, errs)
			continue
		}
		path := c.Value
		if prefix != "" {
			path = prefix + "." + c.Value
		}
		if c.Kind == yaml.ScalarNode && c.ShortTag() == "!!null" {
			*errs = append(*errs, &Error{Line: c.Line, Key: path,
				Reason: fmt.Sprintf("%q is a null key, which names nothing: quote it to use it as a name", c.Value)})
		}
		nullKeys(n.Content[i+1], path, errs)
	}
}

// nullValues reports every key whose value is null (null, ~, Null or
// nothing) where it takes a scalar or a list: the decoder makes it the
// type's zero, or leaves a limit policy defaults out, without a word, so
// that "tenant.max_groups: ~" would send every unconfigured tenant to the
// overflow group and a trusted_proxies whose entries were commented out
// would trust every address. A null section (a struct or the tenants
// mapping) is one left empty, as "tenants: {vip: }" configures vip.
func nullValues(keys *keyIndex, errs *[]*Error) {
	for _, k := range keys.list {
		if !k.nullLeaf {
			continue
		}
		v := k.value
		if v == "" {
			v = "nothing"
		}
		*errs = append(*errs, &Error{Line: k.line, Key: k.path,
			Reason: fmt.Sprintf("the value is null (%s): give one, or leave the key out for its default", v)})
	}
}

// unitlessDurations reports every duration written as a 0 without its
// unit but quoted ("0", '+0', !!str -0): the decoder refuses a bare 0, an
// integer, but hands text to time.ParseDuration, which takes that one
// number without a unit. It is refused in the words the decoder refuses a
// bare one in, which Parse then reports once.
func unitlessDurations(keys *keyIndex, errs *[]*Error) {
	for _, k := range keys.list {
		if k.typ == "time.Duration" && (k.value == "0" || k.value == "+0" || k.value == "-0") {
			*errs = append(*errs, &Error{Line: k.line, Key: k.path,
				Reason: fmt.Sprintf("%q is not a valid %s", shown(k.value), typeName(k.typ))})
		}
	}
}

// has reports whether the file has a key at path.
func (ix *keyIndex) has(path string) bool {
	ix.probes++
	_, ok := ix.byPath[path]
	return ok
}

// typ returns the Go type of the first key at path, "" if none.
func (ix *keyIndex) typ(path string) string {
	ix.probes++
	if i, ok := ix.byPath[path]; ok {
		return ix.list[i].typ
	}
	return ""
}

// valuesOn returns the keys (their indices) whose value starts on line.
func (ix *keyIndex) valuesOn(line int) []int {
	ix.probes += 1 + len(ix.byValueLine[line])
	return ix.byValueLine[line]
}

// undecoded reports whether the key at path is in a mapping that has a
// key twice, or is one: its parents are looked up, not every such
// mapping, which a file with many might have.
func (ix *keyIndex) undecoded(path string) bool {
	ix.probes++
	if ix.twice[""] {
		return true
	}
	for p := path; ; {
		ix.probes++
		if ix.twice[p] {
			return true
		}
		i := strings.LastIndexByte(p, '.')
		if i < 0 {
			return false
		}
		p = p[:i]
	}
}

// itemLine returns the line of item i (from 1) of the list at path, or 0
// when the list is not written there (an alias names it).
func (ix *keyIndex) itemLine(path string, i int) int {
	ix.probes++
	if lines := ix.items[path]; i >= 1 && i <= len(lines) {
		return lines[i-1]
	}
	return 0
}

// line returns the line of the key at path, or of its nearest parent present
// in the file (a missing required key is reported where its parent is), or 0.
func (ix *keyIndex) line(path string) int {
	for p := path; p != ""; {
		ix.probes++
		if i, ok := ix.byPath[p]; ok {
			return ix.list[i].line
		}
		i := strings.LastIndexByte(p, '.')
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return 0
}

// at returns the key on line whose path's last element is name, or whose
// value is value; failing both, the first key on line. Several keys share a
// line in flow mappings ({a: 1, b: 2}). The decoder quotes a value of more
// than 10 bytes by its first 7 and "...": such a value matches a key's
// value that starts with them.
func (ix *keyIndex) at(line int, name, value string) key {
	first := key{}
	cut, truncated := strings.CutSuffix(value, "...")
	truncated = truncated && len(cut) == 7
	for _, i := range ix.byLine[line] {
		ix.probes++
		k := ix.list[i]
		if first.path == "" {
			first = k
		}
		if (name != "" && (k.path == name || strings.HasSuffix(k.path, "."+name))) ||
			(value != "" && (k.value == value || truncated && len(k.value) > 10 && strings.HasPrefix(k.value, cut))) {
			return k
		}
	}
	return first
}

// unknownAt returns the key the decoder found no field name for in the
// struct type goType, on line. The decoder names the line the key is
// written on, which for a key an alias or merge brings in is the line it
// is anchored on, where another section (the one the anchor is written
// in) may have a key of that name: the key is the first on line, or,
// failing that, the first brought in whose value starts on line, that is
// name in a mapping decoded into goType. Failing both, it is at(line,
// name, "").
func (ix *keyIndex) unknownAt(line int, name, goType string) key {
	for _, lines := range []map[int][]int{ix.byLine, ix.byValueLine} {
		for _, i := range lines[line] {
			ix.probes++
			k := ix.list[i]
			parent, last := "", k.path
			if dot := strings.LastIndexByte(k.path, '.'); dot >= 0 {
				parent, last = k.path[:dot], k.path[dot+1:]
			}
			if last != name {
				continue
			}
			parentType := rootType
			if parent != "" {
				parentType = ix.typ(parent)
			}
			if parentType == goType {
				return k
			}
		}
	}
	return ix.at(line, name, "")
}

// rootType is the type the document is decoded into, as the decoder
// names it.
var rootType = reflect.TypeOf(Config{}).String()

// valueAt returns the key whose value, decoded into goType, starts on
// line, where the decoder refuses a value: a block value starts on the
// line after its key, and an alias's where it is anchored. Of several (a
// flow mapping's), it takes the first whose value is value (as the
// decoder quotes it: see at) and that used does not hold, as the decoder
// reports them in order. A key written with the value comes before one
// an alias gives it, and is taken again rather than one of those: the
// decoder refuses an anchored value at each alias that repeats it, and
// it is reported where written. Failing all, it returns at(line, "",
// value).
func (ix *keyIndex) valueAt(line int, goType, value string, used map[int]bool) key {
	cut, truncated := strings.CutSuffix(value, "...")
	truncated = truncated && len(cut) == 7
	for _, alias := range []bool{false, true} {
		found, free := -1, -1
		for _, i := range ix.byValueLine[line] {
			ix.probes++
			k := ix.list[i]
			if k.typ != goType || k.alias != alias {
				continue
			}
			if value != "" && k.value != value && !(truncated && len(k.value) > 10 && strings.HasPrefix(k.value, cut)) {
				continue
			}
			if found < 0 {
				found = i
			}
			if !used[i] {
				free = i
				break
			}
		}
		if free >= 0 {
			used[free] = true
			return ix.list[free]
		}
		if found >= 0 {
			return ix.list[found]
		}
	}
	return ix.at(line, "", value)
}

var (
	lineRe    = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)
	unknownRe = regexp.MustCompile(`^field (\S+) not found in type (\S+)`)
	valueRe   = regexp.MustCompile("^cannot unmarshal !!\\w+ `(.*)` into (\\S+)$")
	shapeRe   = regexp.MustCompile(`^cannot unmarshal !!(\w+) into (\S+)$`)
)

func syntaxError(err error) *Error {
	if m := lineRe.FindStringSubmatch(err.Error()); m != nil {
		n, _ := strconv.Atoi(m[1])
		return &Error{Line: n, Reason: m[2]}
	}
	return &Error{Reason: strings.TrimPrefix(err.Error(), "yaml: ")}
}

// decodeErrors turns the decoder's messages ("line 3: field foo not found in
// type config.Limits") into Errors naming the key and line.
func decodeErrors(te *yaml.TypeError, keys *keyIndex) []*Error {
	var errs []*Error
	used := make(map[int]bool) // keys a refused value was found for
	// The messages placed the same way each time they come (all but a
	// refused value's, which its copies place on the next key with that
	// value): a copy is dropped, as Parse drops the same error twice. An
	// anchored mapping of unknown keys that every tenant aliases gives
	// the same message for each key and tenant, and placing each copy
	// looked at the mapping's keys again.
	once := make(map[string]bool)
	for _, msg := range te.Errors {
		if once[msg] {
			continue
		}
		m := lineRe.FindStringSubmatch(msg)
		if m == nil {
			once[msg] = true
			errs = append(errs, &Error{Reason: msg})
			continue
		}
		line, _ := strconv.Atoi(m[1])
		reason := m[2]
		var path string
		if u := unknownRe.FindStringSubmatch(reason); u != nil {
			once[msg] = true
			k := keys.unknownAt(line, u[1], u[2])
			path, reason = k.path, unknownKey(u[1], u[2])
			if k.path != "" {
				line = k.line
			}
		} else if v := valueRe.FindStringSubmatch(reason); v != nil {
			// The key whose value it is, and that value whole: the
			// decoder's message cuts a long one short.
			k, value := keys.valueAt(line, v[2], v[1], used), v[1]
			if cut, ok := strings.CutSuffix(value, "..."); ok && strings.HasPrefix(k.value, cut) {
				value = k.value
			}
			path, reason = k.path, fmt.Sprintf("%q is not a valid %s", shownValue(k.path, value), typeName(v[2]))
			if k.path != "" {
				line = k.line
			}
		} else if v := shapeRe.FindStringSubmatch(reason); v != nil {
			k := keys.valueAt(line, v[2], "", used)
			path, reason = k.path, fmt.Sprintf("a %s is not a valid %s", yamlKind(v[1]), typeName(v[2]))
			if k.path != "" {
				// The key's line, not its value's, which the decoder
				// names: a block value starts on the next line.
				line = k.line
			}
		} else {
			once[msg] = true
			path = keys.at(line, "", "").path
		}
		errs = append(errs, &Error{Line: line, Key: path, Reason: reason})
	}
	return errs
}

// typeName says what a Go type is in the file's terms.
func typeName(goType string) string {
	switch {
	case goType == "time.Duration":
		return "duration (e.g. 2s, 500ms)"
	case strings.HasPrefix(goType, "int"):
		return "integer"
	case strings.HasPrefix(goType, "float"):
		return "number" // a rate: "float64" is Go's word, not the file's
	case goType == "bool":
		return "boolean"
	case strings.HasPrefix(goType, "[]"):
		return "list"
	case strings.HasPrefix(goType, "map[") || strings.HasPrefix(goType, "config."):
		return "mapping"
	default:
		return goType
	}
}

func yamlKind(tag string) string {
	switch tag {
	case "map":
		return "mapping"
	case "seq":
		return "list"
	default:
		return tag
	}
}

// fractions walks the node n, decoded into a value of type t at the dotted
// path (its key on line), and reports every number with a fraction given
// where t takes an integer: the decoder would cut it to the integer below.
// Floats with an integral value (2.0, 1e3) are the integers they are. It
// reports too every number with a leading 0 the decoder reads as octal
// (octalLooking).
// hidden is keysInForce's, for a mapping merged into another.
func fractions(n *yaml.Node, t reflect.Type, path string, line int, hidden map[string]bool, errs *[]*Error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			fractions(c, t, path, line, nil, errs)
		}
	case yaml.SequenceNode:
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			for _, c := range n.Content {
				fractions(c, t.Elem(), path, c.Line, nil, errs)
			}
		}
	case yaml.MappingNode:
		skip, set := keysInForce(n, hidden)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.ShortTag() == "!!merge" {
				// The merged mapping's keys (or each listed one's)
				// are decoded as this mapping's own, but those it
				// has already.
				for _, m := range mergedOf(v) {
					fractions(m, t, path, line, set, errs)
				}
				continue
			}
			if skip != nil && skip[i/2] {
				continue
			}
			p := k.Value
			if path != "" {
				p = path + "." + k.Value
			}
			switch t.Kind() {
			case reflect.Map:
				fractions(v, t.Elem(), p, k.Line, nil, errs)
			case reflect.Struct:
				if f, ok := yamlField(t, k.Value); ok {
					fractions(v, f.Type, p, k.Line, nil, errs)
				}
			}
		}
	case yaml.ScalarNode:
		if (isInteger(t) || isFloat(t)) && n.ShortTag() == "!!int" && octalLooking(n.Value) {
			var v int64
			read := ""
			if n.Decode(&v) == nil {
				read = fmt.Sprintf(" (%d)", v)
			}
			*errs = append(*errs, &Error{Line: line, Key: path, Reason: fmt.Sprintf(
				"%q has a leading 0, which YAML reads as octal%s: write the number without it, or with 0o for octal", shown(n.Value), read)})
			return
		}
		if !isInteger(t) || n.ShortTag() != "!!float" {
			return
		}
		// Beyond int64's range, the decoder refuses a float above 2^63
		// itself, but converts 2^63 and any float below -2^63 (-.inf
		// too) to whatever the machine gives (-2^63 on amd64): refused
		// as negative, or taken, the value would not be the file's.
		var f float64
		if n.Decode(&f) != nil || math.IsNaN(f) || f > 1<<63 {
			return
		}
		if f != math.Trunc(f) || f == 1<<63 || f < -(1<<63) || writtenFraction(n.Value) {
			*errs = append(*errs, &Error{Line: line, Key: path, Reason: fmt.Sprintf("%q is not a valid integer", shown(n.Value))})
		} else if !writtenAs(n.Value, int64(f)) {
			// An integer of more digits than a float64 holds, written
			// as a float: rounded, it would not be the file's.
			*errs = append(*errs, &Error{Line: line, Key: path, Reason: fmt.Sprintf(
				"%q is read as a float, %d: write the integer without a fraction or an exponent", shown(n.Value), int64(f))})
		}
	}
}

// writtenFraction reports whether s, a float as written, has a fraction
// that its float64 does not hold: "5.0000000000000001" is read as the
// float 5, which would pass for an integer. It reads the digits as
// written, not the number they make: math/big reading "1e-1000000"
// exactly takes tens of milliseconds, and a file may hold millions of
// such values. Text it cannot read (.inf) is left to the float's own
// checks.
func writtenFraction(s string) bool {
	digits, point, ok := floatDigits(s)
	// The last digit that is not 0 must fall before the point.
	last := strings.LastIndexFunc(digits, func(r rune) bool { return r != '0' })
	return ok && last >= point
}

// writtenAs reports whether s, a float as written without a fraction
// (writtenFraction), is the integer v: "9007199254740993.0" is not the
// 9007199254740992 its float64 holds. Text it cannot read is taken to be.
func writtenAs(s string, v int64) bool {
	digits, point, ok := floatDigits(s)
	if !ok {
		return true
	}
	whole := strings.TrimLeft(digits[:max(0, min(point, len(digits)))], "0")
	zeros := point - len(digits) // the exponent's 0s after the digits
	if whole == "" {
		return v == 0
	}
	if len(whole)+max(zeros, 0) > 19 {
		return false // beyond int64, which v is not
	}
	if strings.HasPrefix(s, "-") {
		whole = "-" + whole // -2^63 has no positive twin
	}
	w, err := strconv.ParseInt(whole+strings.Repeat("0", max(zeros, 0)), 10, 64)
	return err == nil && w == v
}

// floatDigits returns the digits of s, a float as written (without its
// sign and the decoder's "_"s), and where its point falls among them once
// the exponent has moved it; false for text it does not read so (.inf).
func floatDigits(s string) (digits string, point int, ok bool) {
	s = strings.TrimLeft(strings.ReplaceAll(s, "_", ""), "+-")
	mant, exp := s, 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.Atoi(s[i+1:])
		if err != nil {
			return "", 0, false
		}
		// Past a 64 MiB file's digits either way, and far from
		// overflowing point.
		mant, exp = s[:i], max(-1<<40, min(e, 1<<40))
	}
	whole, frac, _ := strings.Cut(mant, ".")
	digits = whole + frac
	if digits == "" || strings.Trim(digits, "0123456789") != "" {
		return "", 0, false
	}
	return digits, len(whole) + exp, true
}

// octalLooking reports whether s is written with a leading 0 and more
// than one digit after the zeros ("010", "-0_10", "0800"), where a leading
// 0 may change the number: the decoder reads such an integer as octal, as
// YAML 1.1 did (YAML 1.2 writes octal 0o10). Its caller asks only of what
// the decoder tagged !!int, which "0800", with digits that are no octal
// ones, is not (the decoder reads it as 800, a float). One digit after the
// zeros ("007") is the same number either way.
func octalLooking(s string) bool {
	s = strings.ReplaceAll(strings.TrimLeft(s, "+-"), "_", "")
	if len(s) < 2 || s[0] != '0' || s[1] < '0' || s[1] > '9' {
		return false // "0", "0x1c0", "0o700", "0.5"
	}
	return len(strings.TrimLeft(s, "0")) > 1
}

// yamlField returns the field of struct type t that the YAML key name sets.
func yamlField(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		if f := t.Field(i); name != "" && yamlKey(f) == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// yamlKey is the key that sets field f in a file, by its yaml tag: ""
// for a field no key sets (unexported, untagged, or tagged "-").
func yamlKey(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if !f.IsExported() || name == "-" {
		return ""
	}
	return name
}

// isFloat reports whether t holds a number that may have a fraction.
func isFloat(t reflect.Type) bool {
	return t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64
}

// isInteger reports whether t holds an integer given as a number (a
// duration is given as text, which the decoder checks itself).
func isInteger(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return t != reflect.TypeOf(time.Duration(0))
	}
	return false
}
