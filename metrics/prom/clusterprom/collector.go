// Package clusterprom exports a cluster limiter's state to Prometheus: the
// mode (is Redis reachable), the failure policy in force, and every counter
// of redislimit.Stats, so that an outage and each fallback or refusal it
// causes show on the same dashboards as the executor's metrics
// (metrics/prom).
//
//	prometheus.MustRegister(clusterprom.New(holder, "")) // holder: the process's *redislimit.Holder
//
// It is a package of its own so that programs without cluster limits do not
// link the Redis client, and programs without Prometheus do not link it.
//
// Example (example_test.go), run by go test, gathers the metrics of a holder
// in an outage.
package clusterprom

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/groupexec/groupexec/cluster/redislimit"
	"github.com/groupexec/groupexec/metrics/internal/clusternames"
)

// Source is what a Collector reads on each scrape; *redislimit.Holder is
// one.
type Source interface{ Stats() redislimit.Stats }

var _ Source = (*redislimit.Holder)(nil)

// Collector reads a Holder's Stats on each scrape. It is safe for
// concurrent use.
type Collector struct {
	src      Source
	up       *prometheus.Desc
	counters []counter
	gauges   []gauge
}

type counter struct {
	desc *prometheus.Desc
	get  func(redislimit.Stats) uint64
}

type gauge struct {
	desc *prometheus.Desc
	get  func(redislimit.Stats) int
}

var _ prometheus.Collector = (*Collector)(nil)

// New returns a Collector for src; namespace, when set, prefixes every
// metric name. Register it with a prometheus.Registerer. It panics if src
// is nil, or a nil *redislimit.Holder, which every scrape would otherwise
// fail on.
func New(src Source, namespace string) *Collector {
	// A nil *Holder is a Source that is not nil: its Stats would panic on
	// every scrape, in the registry's goroutine, which ends the process.
	if h, ok := src.(*redislimit.Holder); src == nil || ok && h == nil {
		panic("clusterprom: New: nil Source")
	}
	name := func(n string) string { return prometheus.BuildFQName(namespace, "cluster", n) }
	c := &Collector{src: src, up: prometheus.NewDesc(name("up"), clusternames.Up, []string{"policy"}, nil)}
	for _, x := range clusternames.Counters {
		c.counters = append(c.counters, counter{prometheus.NewDesc(name(x.Name), x.Help, nil, nil), x.Get})
	}
	for _, x := range clusternames.Gauges {
		c.gauges = append(c.gauges, gauge{prometheus.NewDesc(name(x.Name), x.Help, nil, nil), x.Get})
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.up
	for _, x := range c.counters {
		ch <- x.desc
	}
	for _, x := range c.gauges {
		ch <- x.desc
	}
}

// Collect implements prometheus.Collector: one Stats reading per scrape.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.src.Stats()
	up := 0.0
	if s.Mode == redislimit.ModeUp {
		up = 1
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up, s.Policy.String())
	for _, x := range c.counters {
		ch <- prometheus.MustNewConstMetric(x.desc, prometheus.CounterValue, float64(x.get(s)))
	}
	for _, x := range c.gauges {
		ch <- prometheus.MustNewConstMetric(x.desc, prometheus.GaugeValue, float64(x.get(s)))
	}
}
