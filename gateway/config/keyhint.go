package config

import (
	"reflect"
	"strings"
)

// keysOf is the keys each mapping of the file takes, by the name the
// decoder gives its Go type ("config.Limits"): those an unknown key is
// weighed against for a hint.
var keysOf = mappingKeys(reflect.TypeOf(Config{}), map[string][]string{})

func mappingKeys(t reflect.Type, keys map[string][]string) map[string][]string {
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
		return mappingKeys(t.Elem(), keys)
	case reflect.Struct:
		if _, done := keys[t.String()]; done {
			return keys
		}
		keys[t.String()] = []string{}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name := yamlKey(f)
			if name == "" {
				continue
			}
			keys[t.String()] = append(keys[t.String()], name)
			mappingKeys(f.Type, keys)
		}
	}
	return keys
}

// unknownKey is the reason an unknown key name of a mapping decoded into
// goType is refused for, with the known key it most likely stands for:
// one spelt alike once case, '-' and '_' are set aside (maxConcurrency,
// trusted-proxies), or within two letters' edits of it (lisen,
// queue_timeuot, brust). A name far from every key gets no guess: a wrong one
// would mislead more than none.
func unknownKey(name, goType string) string {
	const reason = "unknown key"
	folded := foldKey(name)
	best, bestDist := "", 3
	for _, known := range keysOf[goType] {
		k := foldKey(known)
		if abs(len(folded)-len(k)) >= bestDist {
			continue // as many edits at least: and a long name costs nothing
		}
		d := editDistance(folded, k)
		// Two edits are a typo in a long key, another key in a short
		// one (rps and ttl).
		if d < bestDist && d <= len(folded)/3 {
			best, bestDist = known, d
		}
	}
	if best != "" {
		return reason + ": did you mean " + best + "?"
	}
	// A key of another mapping, written where it is not one
	// (queue_timeout at the top, rps under limits).
	if places := keyPlaces[folded]; len(places) > 0 {
		return reason + ": it is a key of " + strings.Join(places, " and of ")
	}
	// A key written as the dotted path that the errors and the docs
	// name it by (limits.queue_timeout at the top): where its last name
	// is taken, nested.
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		last := name[i+1:]
		if places := keyPlaces[foldKey(last)]; len(places) > 0 {
			return reason + ": keys are written nested, not dotted: " + last + " is a key of " + strings.Join(places, " and of ")
		}
	}
	return reason
}

// keyPlaces is the mappings each key is taken in, by the key's folded
// name: their paths, a tenant's as tenants.<name>, the file's own as
// "the top level".
var keyPlaces = placeKeys(reflect.TypeOf(Config{}), "", map[string][]string{}, map[reflect.Type]bool{})

func placeKeys(t reflect.Type, path string, places map[string][]string, open map[reflect.Type]bool) map[string][]string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Map:
		return placeKeys(t.Elem(), path+".<name>", places, open)
	case reflect.Struct:
		if open[t] {
			return places
		}
		open[t] = true
		defer delete(open, t)
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name := yamlKey(f)
			if name == "" {
				continue
			}
			place := path
			if place == "" {
				place = "the top level"
			}
			places[foldKey(name)] = append(places[foldKey(name)], place)
			child := name
			if path != "" {
				child = path + "." + name
			}
			placeKeys(f.Type, child, places, open)
		}
	}
	return places
}

// maxKeyLen bounds the length of the file's keys, which a test checks.
const maxKeyLen = 64

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// foldKey is name in lower case without its '_' and '-'.
func foldKey(name string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r == '-' {
			return -1
		}
		return r
	}, strings.ToLower(name))
}

// editDistance is the number of edits (a letter put in, taken out,
// changed, or two side by side swapped: brust) from a to b, in bytes,
// for b a known key: at most maxKeyLen long. Three rows of the table are
// all it takes.
func editDistance(a, b string) int {
	var rows [3][maxKeyLen + 1]int
	prev2, prev, cur := &rows[0], &rows[1], &rows[2]
	for j := 0; j <= len(b); j++ {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
