package otel_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// reading is one collection of a ManualReader.
type reading struct {
	t  *testing.T
	rm metricdata.ResourceMetrics
}

func newProvider() (*sdkmetric.MeterProvider, *sdkmetric.ManualReader) {
	r := sdkmetric.NewManualReader()
	return sdkmetric.NewMeterProvider(sdkmetric.WithReader(r)), r
}

func collect(t *testing.T, r *sdkmetric.ManualReader) reading {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	return reading{t, rm}
}

func (r reading) find(name string) (metricdata.Metrics, bool) {
	for _, sm := range r.rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m, true
			}
		}
	}
	return metricdata.Metrics{}, false
}

// matches reports whether set has every key and value of want.
func matches(set attribute.Set, want map[string]string) bool {
	if set.Len() != len(want) {
		return false
	}
	for k, v := range want {
		got, ok := set.Value(attribute.Key(k))
		if !ok || got.AsString() != v {
			return false
		}
	}
	return true
}

// int returns the int64 value of name's point with attrs, and whether there
// is one.
func (r reading) int(name string, attrs map[string]string) (int64, bool) {
	r.t.Helper()
	m, ok := r.find(name)
	if !ok {
		return 0, false
	}
	var pts []metricdata.DataPoint[int64]
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		pts = d.DataPoints
	case metricdata.Gauge[int64]:
		pts = d.DataPoints
	default:
		r.t.Fatalf("%s is a %T", name, m.Data)
	}
	for _, p := range pts {
		if matches(p.Attributes, attrs) {
			return p.Value, true
		}
	}
	return 0, false
}

// value is int that fails the test when there is no point (a missing point
// would otherwise read as a zero).
func (r reading) value(name string, attrs map[string]string) int64 {
	r.t.Helper()
	v, ok := r.int(name, attrs)
	if !ok {
		r.t.Fatalf("no %s%v", name, attrs)
	}
	return v
}

// histogram returns the count and sum of name's point with attrs: zero
// when there is none, as for a group nothing was recorded for.
func (r reading) histogram(name string, attrs map[string]string) (uint64, float64) {
	r.t.Helper()
	m, ok := r.find(name)
	if !ok {
		r.t.Fatalf("no %s", name)
	}
	for _, p := range m.Data.(metricdata.Histogram[float64]).DataPoints {
		if matches(p.Attributes, attrs) {
			return p.Count, p.Sum
		}
	}
	return 0, 0
}

func group(g string) map[string]string { return map[string]string{"group": g} }

// sum adds the int64 points of name whose group attribute is g.
func (r reading) sum(name, g string) int64 {
	r.t.Helper()
	m, ok := r.find(name)
	if !ok {
		return 0
	}
	var n int64
	for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
		if v, ok := p.Attributes.Value("group"); ok && v.AsString() == g {
			n += p.Value
		}
	}
	return n
}
