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

// claimKey is a MeterProvider, held only when it is a pointer, and a
// namespace.
type claimKey struct {
	mp metric.MeterProvider
	ns string
}

// claims are the (MeterProvider, Namespace) pairs of the Collectors not
// unregistered. Two Collectors of a pair would report into the same
// instruments: their counters would sum, and each gauge would show the
// last callback's observation, with nothing to tell the two executors
// apart.
var claims struct {
	sync.Mutex
	m map[claimKey]*Collector
}

// claim takes mp and ns for c, or fails naming ns if a live Collector has
// them. A provider that is not a pointer is not claimed: its values may
// not be comparable, so not usable as a key, and a value type is either
// stateless, as a no-op provider is, where nothing can mix, or copied, so
// that equal values need not be the same provider.
func claim(mp metric.MeterProvider, ns string, c *Collector) error {
	if reflect.ValueOf(mp).Kind() != reflect.Pointer {
		return nil
	}
	k := claimKey{mp, ns}
	claims.Lock()
	defer claims.Unlock()
	if _, ok := claims.m[k]; ok {
		return fmt.Errorf("otel: New: Options.Namespace %q: a live Collector on this MeterProvider has it, and two executors' numbers would mix (Unregister it first, or give each Collector its own Namespace): %w", ns, ErrNamespaceInUse)
	}
	if claims.m == nil {
		claims.m = make(map[claimKey]*Collector)
	}
	claims.m[k] = c
	c.claim = &k
	return nil
}

// unclaim frees c's pair, if c still holds it.
func unclaim(c *Collector) {
	if c.claim == nil {
		return
	}
	claims.Lock()
	defer claims.Unlock()
	if claims.m[*c.claim] == c {
		delete(claims.m, *c.claim)
	}
}
