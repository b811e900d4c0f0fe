package otel_test

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/groupexec/groupexec/executor"
	gotel "github.com/groupexec/groupexec/metrics/otel"
)

// Buckets out of increasing order (or NaN) are refused by New with an error
// naming Options.Buckets and the values, as metrics/prom refuses them; an
// SDK would otherwise use its own default buckets, in milliseconds, or keep
// a NaN. So is +Inf alone: dropped, it would leave the SDK no bound.
func TestInvalidBucketsAreRefused(t *testing.T) {
	for _, b := range [][]float64{{1, .5}, {1, 1}, {math.NaN()}, {.1, math.NaN(), 1}, {math.Inf(1)}} {
		mp, _ := newProvider()
		c, err := gotel.New(mp, gotel.Options{Buckets: b})
		if err == nil {
			c.Unregister()
			t.Errorf("Buckets %v accepted", b)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, "Options.Buckets") || !strings.Contains(msg, fmt.Sprint(b)) {
			t.Errorf("Buckets %v: %v; want an error naming Options.Buckets and the values", b, err)
		}
	}
}

// Empty buckets mean the default ones, as in metrics/prom (and
// prometheus.NewHistogram), not the SDK's default ones, which are for
// milliseconds. A last bound of +Inf is dropped, as prometheus.NewHistogram
// drops it: kept, it would add an empty bucket above +Inf, which
// Prometheus's OTLP translation writes as a second le="+Inf".
func TestEmptyBucketsMeanDefault(t *testing.T) {
	for _, tc := range []struct {
		b    []float64
		want []float64
	}{{nil, gotel.DefaultBuckets}, {[]float64{}, gotel.DefaultBuckets}, {[]float64{.5}, []float64{.5}},
		{[]float64{.1, 1, math.Inf(1)}, []float64{.1, 1}}} {
		mp, reader := newProvider()
		c, err := gotel.New(mp, gotel.Options{Buckets: tc.b})
		if err != nil {
			t.Errorf("Buckets %v: %v", tc.b, err)
			continue
		}
		c.OnStarted(executor.Event{Group: "a"})
		m, ok := collect(t, reader).find("group_queued_seconds")
		if !ok {
			t.Fatal("no group_queued_seconds")
		}
		pts := m.Data.(metricdata.Histogram[float64]).DataPoints
		if len(pts) != 1 || !slices.Equal(pts[0].Bounds, tc.want) {
			t.Errorf("Buckets %#v: points %+v, want bounds %v", tc.b, pts, tc.want)
		}
		c.Unregister()
	}
}

// The SDK keeps one histogram per name, description, unit and kind on a
// provider, and its first bucket bounds (Options.Buckets are advisory): a
// Collector made after another's Unregister with other Buckets records
// into the first's bounds, as the package doc says. A View set on the
// provider chooses the bounds instead.
func TestLaterBucketsOnOneProviderKeepTheFirst(t *testing.T) {
	mp, reader := newProvider()
	first, err := gotel.New(mp, gotel.Options{Buckets: []float64{1}})
	if err != nil {
		t.Fatal(err)
	}
	first.Unregister()
	second, err := gotel.New(mp, gotel.Options{Buckets: []float64{2, 4}})
	if err != nil {
		t.Fatal(err)
	}
	defer second.Unregister()
	second.OnStarted(executor.Event{Group: "a"})
	if got := queuedBounds(t, collect(t, reader)); !slices.Equal(got, []float64{1}) {
		t.Errorf("bounds %v, want the first Collector's [1] (the SDK changed: update the package doc)", got)
	}

	r := sdkmetric.NewManualReader()
	mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(r), sdkmetric.WithView(sdkmetric.NewView(
		sdkmetric.Instrument{Name: "group_*_seconds"},
		sdkmetric.Stream{Aggregation: sdkmetric.AggregationExplicitBucketHistogram{Boundaries: []float64{3}}})))
	c, err := gotel.New(mp, gotel.Options{Buckets: []float64{2, 4}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Unregister()
	c.OnStarted(executor.Event{Group: "a"})
	if got := queuedBounds(t, collect(t, r)); !slices.Equal(got, []float64{3}) {
		t.Errorf("bounds %v, want the View's [3]", got)
	}
}

func queuedBounds(t *testing.T, r reading) []float64 {
	t.Helper()
	m, ok := r.find("group_queued_seconds")
	if !ok {
		t.Fatal("no group_queued_seconds")
	}
	pts := m.Data.(metricdata.Histogram[float64]).DataPoints
	if len(pts) != 1 {
		t.Fatalf("points %+v, want one", pts)
	}
	return pts[0].Bounds
}
