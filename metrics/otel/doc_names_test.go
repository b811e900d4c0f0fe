package otel_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/metrics/internal/doclist"
	gotel "github.com/groupexec/groupexec/metrics/otel"
	"github.com/groupexec/groupexec/policy"
)

// documentedInstruments reads the instruments the package doc lists, each with its label
// names, so that the list users read is the one checked.
func documentedInstruments(t *testing.T) map[string][]string {
	t.Helper()
	docs, err := doclist.Read("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) < 13 {
		t.Fatalf("read %d instruments from doc.go, want the whole list: %v", len(docs), docs)
	}
	return docs
}

// attributeKeys returns the attribute keys of m's data points, sorted.
func attributeKeys(m metricdata.Metrics) []string {
	keys := map[string]bool{}
	add := func(s attribute.Set) {
		for _, kv := range s.ToSlice() {
			keys[string(kv.Key)] = true
		}
	}
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			add(p.Attributes)
		}
	case metricdata.Sum[float64]:
		for _, p := range d.DataPoints {
			add(p.Attributes)
		}
	case metricdata.Gauge[int64]:
		for _, p := range d.DataPoints {
			add(p.Attributes)
		}
	case metricdata.Gauge[float64]:
		for _, p := range d.DataPoints {
			add(p.Attributes)
		}
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			add(p.Attributes)
		}
	}
	return slices.Sorted(maps.Keys(keys))
}

// The package doc lists every instrument a Collector gives, with its
// attributes: a dashboard built from the list finds each of them, and
// nothing else.
func TestDocListsEveryInstrument(t *testing.T) {
	want := documentedInstruments(t)
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	c, err := gotel.New(provider, gotel.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Unregister()
	p, err := policy.New(policy.WithDefaultMaxConcurrency(1), policy.WithDefaultMaxInFlight(2))
	if err != nil {
		t.Fatal(err)
	}
	ex, err := executor.New(p, executor.WithListener(c), executor.WithGroupBreaker(breaker.Settings{}))
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	c.Observe(ex)

	// A running task, a waiting one and a refused one, then both done.
	ctx := context.Background()
	got := map[string][]string{}
	collect := func() {
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(ctx, &rm); err != nil {
			t.Fatal(err)
		}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				keys := attributeKeys(m)
				for _, k := range got[m.Name] {
					if !slices.Contains(keys, k) {
						keys = append(keys, k)
					}
				}
				slices.Sort(keys)
				got[m.Name] = keys
			}
		}
	}
	started, release := make(chan struct{}), make(chan struct{})
	first, err := executor.Submit(ex, ctx, executor.Task[int]{Group: "a", Fn: func(context.Context) (int, error) {
		close(started)
		<-release
		return 0, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	<-started
	second, err := executor.Submit(ex, ctx, executor.Task[int]{Group: "a", Fn: func(context.Context) (int, error) { return 0, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if err := ex.Go(ctx, "a", func(context.Context) error { return nil }); !errors.Is(err, executor.ErrRejected) {
		t.Fatalf("third task: %v, want a refusal of the full group", err)
	}
	collect()
	close(release)
	for _, h := range []*executor.Handle[int]{first, second} {
		if _, err := h.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	collect()

	for name, keys := range want {
		g, ok := got[name]
		switch {
		case !ok:
			t.Errorf("%s: documented, not exported", name)
		case !slices.Equal(g, keys):
			t.Errorf("%s: attributes %v exported, %v documented", name, g, keys)
		}
	}
	for name, keys := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s%v: exported, not documented", name, keys)
		}
	}
}
