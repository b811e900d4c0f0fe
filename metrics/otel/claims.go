package otel

import (
	"errors"
	"fmt"
	"reflect"
	"sync"

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

// claimKey is a MeterProvider, held only when it is a pointer, a
// namespace, and what in it is claimed: the executor's instruments (kind
// and name empty), or the series of one bulkhead or breaker name.
type claimKey struct {
	mp   metric.MeterProvider
	ns   string
	kind string // "", "bulkhead" or "breaker"
	name string
}

// claims are the keys held by the Collectors, Bulkheads and ObserveBreakers
// registrations not unregistered, each by its owner. Two owners of a key
// would report into the same series: their counters would sum, and each
// gauge would show the last callback's observation, with nothing to tell
// the two apart.
var claims struct {
	sync.Mutex
	m map[claimKey]any
}

// keyOf returns the key of kind and name in mp's namespace ns, and false
// for a provider that is not a pointer, which is not claimed: its values
// may not be comparable, so not usable as a key, and a value type is
// either stateless, as a no-op provider is, where nothing can mix, or
// copied, so that equal values need not be the same provider.
func keyOf(mp metric.MeterProvider, ns, kind, name string) (claimKey, bool) {
	if reflect.ValueOf(mp).Kind() != reflect.Pointer {
		return claimKey{}, false
	}
	return claimKey{mp, ns, kind, name}, true
}

// take claims every key of keys for owner, or none of them: it returns the
// first key another owner holds, and false.
func take(owner any, keys ...claimKey) (claimKey, bool) {
	claims.Lock()
	defer claims.Unlock()
	for _, k := range keys {
		if o, ok := claims.m[k]; ok && o != owner {
			return k, false
		}
	}
	if claims.m == nil {
		claims.m = make(map[claimKey]any)
	}
	for _, k := range keys {
		claims.m[k] = owner
	}
	return claimKey{}, true
}

// free frees those of keys that owner still holds.
func free(owner any, keys ...claimKey) {
	claims.Lock()
	defer claims.Unlock()
	for _, k := range keys {
		if claims.m[k] == owner {
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
