// Package claims keeps the names that the OpenTelemetry exporters'
// registrations hold on a MeterProvider (metrics/otel's Collectors,
// Bulkheads and ObserveBreakers, clusterotel's Observe), so that a second
// live registration of a name is refused: two registrations of one name
// report into the same series, their counters summed and each gauge the
// last callback's, with nothing to tell the two apart. The names of
// metrics/otel's instruments are claimed too, shared by the registrations
// of one kind and namespace (Share), so that exporters of two kinds or
// namespaces never make two instruments of one name.
package claims

import (
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"weak"
)

// Key is a MeterProvider, only when it is a pointer, a namespace, and what
// in it is claimed: a kind of registration and a name. The provider is held
// weakly, by its address and type: a provider that the program drops
// without unregistering what it observed (one per test, or one replaced as
// its configuration changes) is collected with all it holds, not kept by
// the claims for the life of the process.
type Key struct {
	mp   weak.Pointer[struct{}]
	typ  reflect.Type // two providers of zero size may share an address
	ns   string
	kind string
	Name string
}

// holder is a key's owner, held weakly too: a registered owner is kept by
// its provider, whose callback holds it, and a provider that only the
// claims would keep is collected, its owners with it. id is the owner's
// weak pointer, equal for one owner; live reports whether it is still
// reachable. by is, for a key held in common (Share), what the owners that
// hold it together are; empty for a key held alone (Take).
type holder struct {
	id   any
	live func() bool
	by   string
}

// claims are the keys held by the registrations not unregistered, each by
// its owners: one, or those of one by.
var claims struct {
	sync.Mutex
	m map[Key][]holder
}

// KeyOf returns the key of kind and name in mp's namespace ns, and false
// for a provider that is not a pointer, which is not claimed: its values
// may not be comparable, so not usable as a key, and a value type is
// either stateless, as a no-op provider is, where nothing can mix, or
// copied, so that equal values need not be the same provider.
//
// The namespace is compared without regard to case: it begins instrument
// names, which OpenTelemetry takes case-insensitively (the SDK makes App_x
// and app_x one instrument), so App and app are one namespace. A name is
// compared as given; an instrument name is the caller's to fold (Fold).
func KeyOf(mp any, ns, kind, name string) (Key, bool) {
	v := reflect.ValueOf(mp)
	if v.Kind() != reflect.Pointer {
		return Key{}, false
	}
	// Only the address is kept, never read through: any pointer's type
	// does, and one of zero size passes the checks of -race.
	return Key{weak.Make((*struct{})(v.UnsafePointer())), v.Type(), Fold(ns), kind, name}, true
}

// Fold is an instrument name or namespace as it is compared: lower case,
// as OpenTelemetry compares instrument names. They are ASCII (package
// instname), so folding is lowering.
func Fold(s string) string { return strings.ToLower(s) }

// Take claims every key of keys for owner alone, or none of them: it
// returns the first key another live owner holds, and false. The keys of an
// owner that is collected unregistered (its provider dropped) are freed
// then.
func Take[T any](owner *T, keys ...Key) (Key, bool) {
	k, _, ok := take(owner, "", keys)
	return k, ok
}

// Share claims every key of keys for owner, held in common with the other
// live owners of the same by (not empty), or none of them: it returns the
// first key a live owner of another by holds, that owner's by (empty for
// one that holds it alone), and false. It is for the names of instruments,
// which the registrations of one kind and namespace share, and no other
// may have. by is compared without regard to case, as the namespace it
// names is (KeyOf): registrations in App and in app make the same
// instruments.
func Share[T any](owner *T, by string, keys ...Key) (Key, string, bool) {
	return take(owner, by, keys)
}

func take[T any](owner *T, by string, keys []Key) (Key, string, bool) {
	w := weak.Make(owner)
	claims.Lock()
	defer claims.Unlock()
	for _, k := range keys {
		for _, h := range claims.m[k] {
			if h.id != any(w) && (by == "" || !strings.EqualFold(h.by, by)) && h.live() {
				return k, h.by, false
			}
		}
	}
	if len(keys) == 0 {
		return Key{}, "", true
	}
	if claims.m == nil {
		claims.m = make(map[Key][]holder)
	}
	h := holder{id: w, live: func() bool { return w.Value() != nil }, by: by}
	for _, k := range keys {
		// Owners collected before their cleanup ran are dropped here.
		hs := slices.DeleteFunc(claims.m[k], func(o holder) bool { return o.id == any(w) || !o.live() })
		claims.m[k] = append(hs, h)
	}
	runtime.AddCleanup(owner, func(keys []Key) { freeID(w, keys) }, slices.Clone(keys))
	return Key{}, "", true
}

// Free frees those of keys that owner still holds.
func Free[T any](owner *T, keys ...Key) { freeID(weak.Make(owner), keys) }

// freeID frees those of keys that the owner of id still holds.
func freeID(id any, keys []Key) {
	claims.Lock()
	defer claims.Unlock()
	for _, k := range keys {
		hs := slices.DeleteFunc(claims.m[k], func(h holder) bool { return h.id == id })
		if len(hs) == 0 {
			delete(claims.m, k)
		} else {
			claims.m[k] = hs
		}
	}
}
