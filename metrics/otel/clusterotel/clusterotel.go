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
// It is a package of its own so that programs without cluster limits do not
// link the Redis client.
//
// ExampleObserve (example_test.go), run by go test, reads the instruments
// with the SDK's manual reader.
package clusterotel

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/groupexec/groupexec/cluster/redislimit"
	"github.com/groupexec/groupexec/metrics/internal/clusternames"
	gotel "github.com/groupexec/groupexec/metrics/otel"
)

// Source is what the callback reads on each collection; *redislimit.Holder
// is one.
type Source interface{ Stats() redislimit.Stats }

var _ Source = (*redislimit.Holder)(nil)

// Observe registers observable instruments that read src's Stats once per
// collection; namespace, when set, prefixes every name. The instruments come
// from mp's meter otel.ScopeName. Unregister the returned registration to
// stop.
//
//	cluster_up{policy}                 1 while the holder reaches Redis, else 0 (down, or closed)
//	cluster_*_total                    each counter of redislimit.Stats (observable counters)
//	cluster_leases, cluster_permits_leased, cluster_permits_in_use   gauges
func Observe(mp metric.MeterProvider, src Source, namespace string) (metric.Registration, error) {
	// A nil *Holder is a Source that is not nil: its Stats would panic in
	// every collection, on the reader's goroutine.
	if h, ok := src.(*redislimit.Holder); mp == nil || src == nil || ok && h == nil {
		return nil, errors.New("clusterotel: Observe: nil MeterProvider or Source")
	}
	m := mp.Meter(gotel.ScopeName)
	name := func(n string) string {
		if namespace == "" {
			return "cluster_" + n
		}
		return namespace + "_cluster_" + n
	}
	var errs []error
	up, err := m.Int64ObservableGauge(name("up"), metric.WithDescription(clusternames.Up))
	errs = append(errs, err)
	type counter struct {
		inst metric.Int64ObservableCounter
		get  func(redislimit.Stats) uint64
	}
	type gauge struct {
		inst metric.Int64ObservableGauge
		get  func(redislimit.Stats) int
	}
	var counters []counter
	var gauges []gauge
	insts := []metric.Observable{up}
	for _, x := range clusternames.Counters {
		c, err := m.Int64ObservableCounter(name(x.Name), metric.WithDescription(x.Help))
		errs = append(errs, err)
		counters = append(counters, counter{c, x.Get})
		insts = append(insts, c)
	}
	for _, x := range clusternames.Gauges {
		g, err := m.Int64ObservableGauge(name(x.Name), metric.WithDescription(x.Help))
		errs = append(errs, err)
		gauges = append(gauges, gauge{g, x.Get})
		insts = append(insts, g)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := src.Stats()
		v := int64(0)
		if s.Mode == redislimit.ModeUp {
			v = 1
		}
		o.ObserveInt64(up, v, metric.WithAttributes(attribute.String("policy", s.Policy.String())))
		for _, c := range counters {
			o.ObserveInt64(c.inst, int64(c.get(s)))
		}
		for _, g := range gauges {
			o.ObserveInt64(g.inst, int64(g.get(s)))
		}
		return nil
	}, insts...)
}
