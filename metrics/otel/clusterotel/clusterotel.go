// Package clusterotel exports a cluster limiter's state as OpenTelemetry
// instruments: the mode (is Redis reachable), the failure policy in force,
// and every counter of redislimit.Stats, under the names metrics/prom's
// clusterprom gives them, so that an outage and each fallback or refusal it
// causes show beside the executor's numbers (package otel).
//
//	reg, err := clusterotel.Observe(provider, holder, "")
//	if err != nil { ... }
//	defer reg.Unregister()
//
// Two registrations on one MeterProvider with the same namespace would
// report into the same instruments: their counters would sum (one holder
// observed twice counts everything twice) and each gauge, cluster_up among
// them, would show whichever callback observed last. So Observe refuses a
// second one (otel.ErrNamespaceInUse, naming the namespace) until the first
// is unregistered, as clusterprom's collectors are refused by a registry
// and otel.New refuses a second Collector. Give each holder its own
// namespace. A provider that is not a pointer (such as a no-op one) is not
// checked, and one that is is not kept for the check.
//
// The counters are observable: each collection reports the observed
// holder's own totals, under the start time the provider gave the
// instrument when it was first made. A later registration in the namespace
// that observes the same holder goes on from its totals; one that observes
// another holder, whose counts begin again, makes the counters fall with
// no new start time, which Prometheus reads as a reset but an OTLP consumer
// that computes deltas may take for negative counts. Observe a new holder
// under a namespace of its own, or on a new provider.
//
// It is a package of its own so that programs without cluster limits do not
// link the Redis client.
//
// ExampleObserve (example_test.go), run by go test, reads the instruments
// with the SDK's manual reader.
package clusterotel

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/groupexec/groupexec/cluster/redislimit"
	"github.com/groupexec/groupexec/internal/typednil"
	"github.com/groupexec/groupexec/metrics/internal/clusternames"
	gotel "github.com/groupexec/groupexec/metrics/otel"
	"github.com/groupexec/groupexec/metrics/otel/internal/claims"
	"github.com/groupexec/groupexec/metrics/otel/internal/instname"
)

// Source is what the callback reads on each collection; *redislimit.Holder
// is one.
type Source interface{ Stats() redislimit.Stats }

var _ Source = (*redislimit.Holder)(nil)

// Observe registers observable instruments that read src's Stats once per
// collection; namespace, when set, prefixes every name. The instruments come
// from mp's meter otel.ScopeName. Unregister the returned registration to
// stop, and to free the namespace. It fails, with an error matching
// otel.ErrNamespaceInUse, if a registration on mp with the same namespace
// has not been unregistered.
//
//	cluster_up{policy}                 1 while the holder reaches Redis, else 0 (down, or closed): a gauge
//	cluster_*_total                    each counter of redislimit.Stats (observable counters)
//	cluster_leases, cluster_permits_leased, cluster_permits_in_use   levels (observable UpDownCounters)
//
// Units are UCUM annotations of what is counted ({call}, {permit}, {lease},
// ...); cluster_up has none. It fails if namespace makes an instrument name
// that OpenTelemetry refuses, naming it, or if mp or src is nil: those
// errors match otel.ErrInvalidOption.
func Observe(mp metric.MeterProvider, src Source, namespace string) (metric.Registration, error) {
	// A nil *Holder is a Source that is not nil: its Stats would panic in
	// every collection, on the reader's goroutine. A nil pointer provider
	// (a *sdkmetric.MeterProvider never set) would panic in Meter, here.
	if h, ok := src.(*redislimit.Holder); mp == nil || typednil.Is(mp) || src == nil || ok && h == nil {
		return nil, invalid("clusterotel: Observe: nil MeterProvider or Source")
	}
	m := mp.Meter(gotel.ScopeName)
	name := func(n string) string {
		if namespace == "" {
			return "cluster_" + n
		}
		return namespace + "_cluster_" + n
	}
	// Checked here, naming the namespace, whatever the provider: the SDK's
	// error names only the instrument, and a no-op provider takes any name.
	for _, n := range names() {
		if p := instname.Problem(name(n)); p != "" {
			return nil, invalid("clusterotel: Observe: namespace %q: makes the instrument name %q, which %s", namespace, name(n), p)
		}
	}
	r := &registration{src: src}
	var errs []error
	var err error
	r.up, err = m.Int64ObservableGauge(name("up"), metric.WithDescription(clusternames.Up))
	errs = append(errs, err)
	insts := []metric.Observable{r.up}
	for _, x := range clusternames.Counters {
		c, err := m.Int64ObservableCounter(name(x.Name), metric.WithDescription(x.Help), metric.WithUnit(units[x.Name]))
		errs = append(errs, err)
		r.counters = append(r.counters, counter{c, x.Get})
		insts = append(insts, c)
	}
	// The levels sum over holders (the leases of a cluster are its
	// holders' leases): UpDownCounters, which a View or backend that
	// aggregates holders sums, where it would keep one holder's gauge.
	for _, x := range clusternames.Gauges {
		g, err := m.Int64ObservableUpDownCounter(name(x.Name), metric.WithDescription(x.Help), metric.WithUnit(units[x.Name]))
		errs = append(errs, err)
		r.gauges = append(r.gauges, gauge{g, x.Get})
		insts = append(insts, g)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if k, ok := claims.KeyOf(mp, namespace, "cluster", ""); ok {
		if _, ok := claims.Take(r, k); !ok {
			return nil, fmt.Errorf("clusterotel: Observe: namespace %q: a live registration on this MeterProvider has it, and two holders' numbers would mix (Unregister it first, or give each holder its own namespace): %w", namespace, gotel.ErrNamespaceInUse)
		}
		r.claim = []claims.Key{k}
	}
	// The callback is r's: the provider, which holds it, keeps r and its
	// claim while it is registered, whether or not the caller keeps the
	// registration.
	reg, err := m.RegisterCallback(r.observe, insts...)
	if err != nil {
		claims.Free(r, r.claim...)
		return nil, err
	}
	r.Registration = reg
	return r, nil
}

// registration is Observe's: its callback, and the namespace it frees once
// the callback is unregistered.
type registration struct {
	metric.Registration
	claim []claims.Key // none for a provider that is not a pointer

	src      Source
	up       metric.Int64ObservableGauge
	counters []counter
	gauges   []gauge
}

type counter struct {
	inst metric.Int64ObservableCounter
	get  func(redislimit.Stats) uint64
}

type gauge struct {
	inst metric.Int64ObservableUpDownCounter
	get  func(redislimit.Stats) int
}

func (r *registration) observe(_ context.Context, o metric.Observer) error {
	s := r.src.Stats()
	v := int64(0)
	if s.Mode == redislimit.ModeUp {
		v = 1
	}
	o.ObserveInt64(r.up, v, metric.WithAttributes(attribute.String("policy", s.Policy.String())))
	for _, c := range r.counters {
		o.ObserveInt64(c.inst, int64(c.get(s)))
	}
	for _, g := range r.gauges {
		o.ObserveInt64(g.inst, int64(g.get(s)))
	}
	return nil
}

// Unregister stops the callback and frees the namespace.
func (r *registration) Unregister() error {
	if err := r.Registration.Unregister(); err != nil {
		return err // the callback may still run: the namespace stays taken
	}
	claims.Free(r, r.claim...)
	return nil
}

// invalidError is an error matching otel.ErrInvalidOption whose message
// is its own, as metrics/otel's constructors return for an invalid
// argument.
type invalidError struct{ msg string }

func (e *invalidError) Error() string        { return e.msg }
func (e *invalidError) Is(target error) bool { return target == gotel.ErrInvalidOption }

func invalid(format string, args ...any) error { return &invalidError{fmt.Sprintf(format, args...)} }
