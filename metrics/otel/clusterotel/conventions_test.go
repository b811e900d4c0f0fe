package clusterotel_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/groupexec/groupexec/cluster/redislimit"
	gotel "github.com/groupexec/groupexec/metrics/otel"
	"github.com/groupexec/groupexec/metrics/otel/clusterotel"
)

// The counters of Stats are monotonic sums; its levels (leases, permits
// leased or in use), which sum over holders, non-monotonic sums
// (UpDownCounters); cluster_up, a state, a gauge. Each has a UCUM unit: an
// annotation of what it counts, none for the state.
func TestObserveKindsAndUnits(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	reg, err := clusterotel.Observe(mp, &source{redislimit.Stats{Mode: redislimit.ModeUp}}, "")
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Unregister()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	levels := map[string]bool{"cluster_leases": true, "cluster_permits_leased": true, "cluster_permits_in_use": true}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		var kind string
		switch d := m.Data.(type) {
		case metricdata.Sum[int64]:
			kind = map[bool]string{true: "counter", false: "level"}[d.IsMonotonic]
		case metricdata.Gauge[int64]:
			kind = "gauge"
		}
		want := "counter"
		switch {
		case m.Name == "cluster_up":
			want = "gauge"
		case levels[m.Name]:
			want = "level"
		}
		if kind != want {
			t.Errorf("%s is a %T (%s), want a %s", m.Name, m.Data, kind, want)
		}
		annotation := len(m.Unit) > 2 && m.Unit[0] == '{' && m.Unit[len(m.Unit)-1] == '}'
		if m.Name == "cluster_up" && m.Unit != "" || m.Name != "cluster_up" && !annotation {
			t.Errorf("%s: unit %q", m.Name, m.Unit)
		}
	}
}

// A namespace that makes an invalid instrument name is refused with an
// error naming it, on any provider, as metrics/otel's constructors refuse
// one.
func TestObserveRefusesAnInvalidNamespace(t *testing.T) {
	for _, mp := range []metric.MeterProvider{sdkmetric.NewMeterProvider(), noop.NewMeterProvider()} {
		for _, ns := range []string{"1app", "my app", strings.Repeat("a", 250)} {
			reg, err := clusterotel.Observe(mp, &source{}, ns)
			if err == nil {
				reg.Unregister()
				t.Errorf("%T: namespace %q accepted", mp, ns)
				continue
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("namespace %q", ns)) {
				t.Errorf("%T: namespace %q: %v; want an error naming the namespace", mp, ns, err)
			}
		}
	}
}

// Namespaces that differ only in case are one, as the SDK takes instrument
// names case-insensitively: a second registration would report into the
// first one's instruments.
func TestObserveNamespacesDifferingInCaseAreOne(t *testing.T) {
	mp := sdkmetric.NewMeterProvider()
	reg, err := clusterotel.Observe(mp, &source{}, "App")
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Unregister()
	if r, err := clusterotel.Observe(mp, &source{}, "app"); !errors.Is(err, gotel.ErrNamespaceInUse) {
		if err == nil {
			r.Unregister()
		}
		t.Errorf("a registration of namespace app beside one of App: %v; want ErrNamespaceInUse", err)
	}
}
