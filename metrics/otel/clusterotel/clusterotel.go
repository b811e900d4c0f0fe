// Package clusterotel exports a cluster limiter's state as OpenTelemetry
// instruments: the mode (is Redis reachable), the failure policy in force,
// and every counter of redislimit.Stats, under the names metrics/prom's
// clusterprom gives them, so that an outage and each fallback or refusal it
// causes show beside the executor's numbers (package otel).
//
//	reg, err := clusterotel.Observe(provider, holder, "")
//	defer reg.Unregister()
//
// It is a package of its own so that programs without cluster limits do not
// link the Redis client.
package clusterotel

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/groupexec/groupexec/cluster/redislimit"
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
//	cluster_up{policy}                 1 while the holder reaches Redis, else 0
//	cluster_*_total                    each counter of redislimit.Stats (observable counters)
//	cluster_leases, cluster_permits_leased, cluster_permits_in_use   gauges
func Observe(mp metric.MeterProvider, src Source, namespace string) (metric.Registration, error) {
	if mp == nil || src == nil {
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
	up, err := m.Int64ObservableGauge(name("up"), metric.WithDescription(
		"1 while the holder reaches Redis (ModeUp), 0 while it is down and its failure policy applies."))
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
	for _, x := range []struct {
		n, help string
		get     func(redislimit.Stats) uint64
	}{
		{"round_trips_total", "Calls to Redis (a pipeline counts once).", func(s redislimit.Stats) uint64 { return s.RoundTrips }},
		{"permits_acquired_total", "Permits handed to tasks from leased blocks.", func(s redislimit.Stats) uint64 { return s.Acquired }},
		{"fallbacks_total", "Fallback permits handed out under FailOpen while Redis was unreachable.", func(s redislimit.Stats) uint64 { return s.Fallbacks }},
		{"rejected_total", "Tasks refused under FailClosed while Redis was unreachable.", func(s redislimit.Stats) uint64 { return s.Rejected }},
		{"refills_total", "Blocks of permits leased.", func(s redislimit.Stats) uint64 { return s.Refills }},
		{"refills_denied_total", "Refills Redis refused for lack of room.", func(s redislimit.Stats) uint64 { return s.RefillsDenied }},
		{"permits_returned_total", "Permits given back to Redis unused.", func(s redislimit.Stats) uint64 { return s.Returned }},
		{"renewals_total", "Renewal rounds that reached Redis.", func(s redislimit.Stats) uint64 { return s.Renewals }},
		{"leases_lost_total", "Leases lost (not renewed in time, or gone from Redis).", func(s redislimit.Stats) uint64 { return s.LeasesLost }},
		{"tasks_cancelled_total", "Running tasks cancelled because their lease was lost.", func(s redislimit.Stats) uint64 { return s.TasksCancelled }},
		{"outages_total", "Transitions to down (three failed calls in a row).", func(s redislimit.Stats) uint64 { return s.Outages }},
	} {
		c, err := m.Int64ObservableCounter(name(x.n), metric.WithDescription(x.help))
		errs = append(errs, err)
		counters = append(counters, counter{c, x.get})
		insts = append(insts, c)
	}
	for _, x := range []struct {
		n, help string
		get     func(redislimit.Stats) int
	}{
		{"leases", "Leases held now.", func(s redislimit.Stats) int { return s.Leases }},
		{"permits_leased", "Permits in the leases held now.", func(s redislimit.Stats) int { return s.PermitsLeased }},
		{"permits_in_use", "Leased permits held by running tasks now.", func(s redislimit.Stats) int { return s.PermitsInUse }},
	} {
		g, err := m.Int64ObservableGauge(name(x.n), metric.WithDescription(x.help))
		errs = append(errs, err)
		gauges = append(gauges, gauge{g, x.get})
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
