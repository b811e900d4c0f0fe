package otel

import (
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/metric"

	"github.com/groupexec/groupexec/metrics/otel/internal/claims"
)

// ErrNamespaceInUse is matched, through errors.Is, by New's error for a
// MeterProvider and Namespace that a live Collector already has, and
// NewBreakerTransitions' for a namespace that a live BreakerTransitions has.
var ErrNamespaceInUse = errors.New("otel: namespace in use on this MeterProvider")

// ErrNameInUse is matched, through errors.Is, by NewBulkhead's error for a
// bulkhead name, and ObserveBreakers' for a breaker name, that a live
// Bulkhead, or registration of ObserveBreakers, already has on the same
// MeterProvider and namespace (or that two breakers of one call share).
var ErrNameInUse = errors.New("otel: name in use in this namespace on this MeterProvider")

// claimKey is what a registration holds on a MeterProvider (package
// claims): the namespace of a Collector (kind and name empty) or of a
// BreakerTransitions, or the name of a bulkhead or breaker in a namespace.
type claimKey = claims.Key

// keyOf returns the key of kind and name in mp's namespace ns, and false
// for a provider that is not a pointer, which is not claimed.
func keyOf(mp metric.MeterProvider, ns, kind, name string) (claimKey, bool) {
	return claims.KeyOf(mp, ns, kind, name)
}

// take claims every key of keys for owner, or none of them: it returns the
// first key another live owner holds, and false.
func take[T any](owner *T, keys ...claimKey) (claimKey, bool) { return claims.Take(owner, keys...) }

// free frees those of keys that owner still holds.
func free[T any](owner *T, keys ...claimKey) { claims.Free(owner, keys...) }

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
