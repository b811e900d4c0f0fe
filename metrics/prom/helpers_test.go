package prom_test

import (
	"io"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func stringsReader(s string) io.Reader { return strings.NewReader(s) }

// gauge returns a collector that yields only the named metric of c with the
// given group label, for testutil.ToFloat64.
func gauge(c prometheus.Collector, name, group string) prometheus.Collector {
	return filter{c, name, group}
}

// counterFrom is gauge over a registry's collector set.
func counterFrom(t *testing.T, reg *prometheus.Registry, name, group string) prometheus.Collector {
	t.Helper()
	m := metricOf(t, reg, name, group)
	if m == nil {
		t.Fatalf("no %s{group=%q}", name, group)
	}
	return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "x", Help: "x"},
		func() float64 { return m.GetCounter().GetValue() })
}

// metricOf gathers reg and returns the metric name{group}, or nil.
func metricOf(t *testing.T, reg *prometheus.Registry, name, group string) *dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.Metric {
			if label(m, "group") == group {
				return m
			}
		}
	}
	return nil
}

type filter struct {
	c           prometheus.Collector
	name, group string
}

func (f filter) Describe(ch chan<- *prometheus.Desc) { f.c.Describe(ch) }

func (f filter) Collect(ch chan<- prometheus.Metric) {
	all := make(chan prometheus.Metric)
	go func() { f.c.Collect(all); close(all) }()
	for m := range all {
		var d dto.Metric
		if m.Write(&d) == nil && strings.Contains(m.Desc().String(), `"`+f.name+`"`) && label(&d, "group") == f.group {
			ch <- m
		}
	}
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
