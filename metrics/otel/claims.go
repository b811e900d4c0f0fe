package otel

import (
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/metric"

	"github.com/groupexec/groupexec/internal/typednil"
	"github.com/groupexec/groupexec/metrics/otel/internal/claims"
)

// ErrInvalidOption is matched, through errors.Is, by the error of New,
// NewBulkhead, ObserveBreakers or NewBreakerTransitions given an invalid
// argument or option: a nil MeterProvider, a nil breaker, a name that is
// not valid UTF-8, a namespace that makes an instrument name
// OpenTelemetry refuses, an invalid Options field. The message names the
// constructor, the argument or option, and its value.
var ErrInvalidOption = errors.New("otel: invalid option")

// invalidError is an error matching ErrInvalidOption whose message is
// its own: it names the constructor, option and value, which the
// sentinel's text would only repeat.
type invalidError struct{ msg string }

func (e *invalidError) Error() string        { return e.msg }
func (e *invalidError) Is(target error) bool { return target == ErrInvalidOption }

// invalid returns an error matching ErrInvalidOption, formatted as
// fmt.Sprintf formats it.
func invalid(format string, args ...any) error {
	return &invalidError{fmt.Sprintf(format, args...)}
}

// ErrNamespaceInUse is matched, through errors.Is, by New's error for a
// MeterProvider and Namespace that a live Collector already has, and
// NewBreakerTransitions' for a namespace that a live BreakerTransitions has;
// and by the error of New, NewBulkhead, ObserveBreakers or
// NewBreakerTransitions for instruments whose name a live exporter of
// another kind or namespace has on the provider (Collector namespace
// "bulkhead" and Bulkhead namespace "" both make bulkhead_queue_depth).
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

// nilProvider reports whether mp is nil, or a nil pointer in the
// interface (a *sdkmetric.MeterProvider variable never set), whose Meter
// panics with a nil pointer dereference: the constructors refuse both
// with an error naming themselves.
func nilProvider(mp metric.MeterProvider) bool { return mp == nil || typednil.Is(mp) }

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

// unclaim frees c's pair and its instruments' names, if c still holds them.
func unclaim(c *Collector) {
	if c.claim != nil {
		free(c, *c.claim)
	}
	free(c, c.names...)
}

// shareNames claims the names of in's instruments on mp for owner, in
// common with the owners of the same by (the exporters of one kind and
// namespace, whose attributes tell their series apart), or fails, naming
// op, the name and its holder, with an error matching ErrNamespaceInUse.
// The exporters of other kinds or namespaces make instruments of the same
// name with another description, unit and attributes (a Collector of
// namespace "bulkhead" and a Bulkhead of namespace "" both make
// bulkhead_queue_depth): the SDK exports both under the one name, which
// Prometheus refuses or mixes.
func shareNames[T any](mp metric.MeterProvider, owner *T, op string, in *instruments, by string) ([]claimKey, error) {
	var keys []claimKey
	for _, n := range in.names {
		if k, ok := keyOf(mp, "", "instrument", claims.Fold(n)); ok { // the SDK's identity ignores case
			keys = append(keys, k)
		}
	}
	if k, other, ok := claims.Share(owner, by, keys...); !ok {
		return nil, fmt.Errorf("otel: %s: instrument %s: %s on this MeterProvider has an instrument of that name, and the two would mix (Unregister it first, or change a namespace): %w", op, k.Name, other, ErrNamespaceInUse)
	}
	return keys, nil
}
