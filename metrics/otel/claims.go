package otel

import (
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"sync"
	"weak"

	"go.opentelemetry.io/otel/metric"
)

// ErrNamespaceInUse is matched, through errors.Is, by New's error for a
// MeterProvider and Namespace that a live Collector already has.
var ErrNamespaceInUse = errors.New("otel: namespace in use on this MeterProvider")

// ErrNameInUse is matched, through errors.Is, by NewBulkhead's error for a
// bulkhead name, and ObserveBreakers' for a breaker name, that a live
// Bulkhead, or registration of ObserveBreakers, already has on the same
// MeterProvider and namespace (or that two breakers of one call share).
var ErrNameInUse = errors.New("otel: name in use in this namespace on this MeterProvider")

// claimKey is a MeterProvider, only when it is a pointer, a namespace, and
// what in it is claimed: the executor's instruments (kind and name empty),
// or the series of one bulkhead or breaker name. The provider is held
// weakly, by its address and type: a provider that the program drops
// without unregistering what it observed (one per test, or one replaced
// as its configuration changes) is collected with all it holds, not kept
// by the claims for the life of the process.
type claimKey struct {
	mp   weak.Pointer[struct{}]
	typ  reflect.Type // two providers of zero size may share an address
	ns   string
	kind string // "", "bulkhead" or "breaker"
	name string
}

// holder is a key's owner, held weakly too: a registered owner is kept by
// its provider, whose callback holds it, and a provider that only the
// claims would keep is collected, its owners with it. id is the owner's
// weak pointer, equal for one owner; live reports whether it is still
// reachable.
type holder struct {
	id   any
	live func() bool
}

// claims are the keys held by the Collectors, Bulkheads and ObserveBreakers
// registrations not unregistered, each by its owner. Two owners of a key
// would report into the same series: their counters would sum, and each
// gauge would show the last callback's observation, with nothing to tell
// the two apart.
var claims struct {
	sync.Mutex
	m map[claimKey]holder
}

// keyOf returns the key of kind and name in mp's namespace ns, and false
// for a provider that is not a pointer, which is not claimed: its values
// may not be comparable, so not usable as a key, and a value type is
// either stateless, as a no-op provider is, where nothing can mix, or
// copied, so that equal values need not be the same provider.
func keyOf(mp metric.MeterProvider, ns, kind, name string) (claimKey, bool) {
	v := reflect.ValueOf(mp)
	if v.Kind() != reflect.Pointer {
		return claimKey{}, false
	}
	// Only the address is kept, never read through: any pointer's type
	// does, and one of zero size passes the checks of -race.
	return claimKey{weak.Make((*struct{})(v.UnsafePointer())), v.Type(), ns, kind, name}, true
}

// take claims every key of keys for owner, or none of them: it returns the
// first key another live owner holds, and false. The keys of an owner that
// is collected unregistered (its provider dropped) are freed then.
func take[T any](owner *T, keys ...claimKey) (claimKey, bool) {
	w := weak.Make(owner)
	claims.Lock()
	defer claims.Unlock()
	for _, k := range keys {
		if h, ok := claims.m[k]; ok && h.id != any(w) && h.live() {
			return k, false
		}
	}
	if len(keys) == 0 {
		return claimKey{}, true
	}
	if claims.m == nil {
		claims.m = make(map[claimKey]holder)
	}
	h := holder{id: w, live: func() bool { return w.Value() != nil }}
	for _, k := range keys {
		claims.m[k] = h
	}
	runtime.AddCleanup(owner, func(keys []claimKey) { freeID(w, keys) }, slices.Clone(keys))
	return claimKey{}, true
}

// free frees those of keys that owner still holds.
func free[T any](owner *T, keys ...claimKey) { freeID(weak.Make(owner), keys) }

// freeID frees those of keys that the owner of id still holds.
func freeID(id any, keys []claimKey) {
	claims.Lock()
	defer claims.Unlock()
	for _, k := range keys {
		if h, ok := claims.m[k]; ok && h.id == id {
			delete(claims.m, k)
		}
	}
}

// claim takes mp and ns for c, or fails naming ns if a live Collector has
// them.
func claim(mp metric.MeterProvider, ns string, c *Collector) error {
	k, ok := keyOf(mp, ns, "", "")
	if !ok {
		return nil
	}
	if _, ok := take(c, k); !ok {
		return fmt.Errorf("otel: New: Options.Namespace %q: a live Collector on this MeterProvider has it, and two executors' numbers would mix (Unregister it first, or give each Collector its own Namespace): %w", ns, ErrNamespaceInUse)
	}
	c.claim = &k
	return nil
}

// unclaim frees c's pair, if c still holds it.
func unclaim(c *Collector) {
	if c.claim != nil {
		free(c, *c.claim)
	}
}
