package clusterotel_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/groupexec/groupexec/cluster/redislimit"
	"github.com/groupexec/groupexec/internal/adaptertest"
	gotel "github.com/groupexec/groupexec/metrics/otel"
	"github.com/groupexec/groupexec/metrics/otel/clusterotel"
)

// A second live registration on one MeterProvider with the same namespace
// is refused, naming the namespace: the two would report into the same
// instruments, their counters summed (one holder observed twice counting
// every round trip twice) and cluster_up the last callback's, as
// clusterprom's second collector is refused by a registry. Another
// namespace or provider is free, Unregister frees the namespace, and only
// the registration that holds it can.
func TestObserveRefusesALiveNamespace(t *testing.T) {
	src := &source{redislimit.Stats{Mode: redislimit.ModeUp, RoundTrips: 5}}
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	first, err := clusterotel.Observe(mp, src, "app")
	if err != nil {
		t.Fatal(err)
	}
	second, err := clusterotel.Observe(mp, src, "app")
	if err == nil {
		defer second.Unregister()
	}
	if !errors.Is(err, gotel.ErrNamespaceInUse) || !strings.Contains(err.Error(), `namespace "app"`) {
		t.Errorf("a second registration in app: %v; want ErrNamespaceInUse naming it", err)
	}
	if got := roundTrips(t, reader, "app_cluster_round_trips_total"); got != 5 {
		t.Errorf("round trips %d, want the holder's 5", got)
	}
	other, err := clusterotel.Observe(mp, src, "jobs")
	if err != nil {
		t.Fatalf("another namespace: %v", err)
	}
	defer other.Unregister()
	elsewhere, err := clusterotel.Observe(sdkmetric.NewMeterProvider(), src, "app")
	if err != nil {
		t.Fatalf("another provider: %v", err)
	}
	defer elsewhere.Unregister()

	if err := first.Unregister(); err != nil {
		t.Fatal(err)
	}
	again, err := clusterotel.Observe(mp, src, "app")
	if err != nil {
		t.Fatalf("after Unregister: %v", err)
	}
	defer again.Unregister()
	if err := first.Unregister(); err != nil { // again: the new one keeps the namespace
		t.Fatal(err)
	}
	if r, err := clusterotel.Observe(mp, src, "app"); !errors.Is(err, gotel.ErrNamespaceInUse) {
		if err == nil {
			r.Unregister()
		}
		t.Errorf("a second Unregister of the first freed the namespace of its successor: %v", err)
	}
	if got := roundTrips(t, reader, "app_cluster_round_trips_total"); got != 5 {
		t.Errorf("round trips %d after the namespace changed hands, want the holder's 5", got)
	}
}

// A registration the caller drops without unregistering it still reports,
// its callback held by the provider: its namespace stays taken.
func TestObserveClaimOfADroppedRegistrationStays(t *testing.T) {
	src := &source{redislimit.Stats{}}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	if _, err := clusterotel.Observe(mp, src, "app"); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		runtime.GC()
	}
	if _, err := clusterotel.Observe(mp, src, "app"); !errors.Is(err, gotel.ErrNamespaceInUse) {
		t.Errorf("a second registration after the first was dropped: %v, want ErrNamespaceInUse", err)
	}
	runtime.KeepAlive(mp)
}

// A MeterProvider the program drops without unregistering is collected:
// the claim that refuses a second registration does not keep it.
func TestObserveClaimDoesNotKeepADroppedProvider(t *testing.T) {
	collected := make(chan struct{})
	func() {
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		runtime.AddCleanup(mp, func(ch chan struct{}) { close(ch) }, collected)
		if _, err := clusterotel.Observe(mp, &source{}, "app"); err != nil {
			t.Fatal(err)
		}
	}()
	adaptertest.Eventually(t, "the dropped provider collected", func() bool {
		runtime.GC()
		select {
		case <-collected:
			return true
		default:
			return false
		}
	})
}

// A no-op provider, a value that records nothing, is not claimed.
func TestObserveOnNoopProviderIsNotClaimed(t *testing.T) {
	mp := noop.NewMeterProvider()
	for range 2 {
		r, err := clusterotel.Observe(mp, &source{}, "")
		if err != nil {
			t.Fatal(err)
		}
		defer r.Unregister()
	}
}

func roundTrips(t *testing.T, reader *sdkmetric.ManualReader, name string) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if d, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == name && len(d.DataPoints) == 1 {
				return d.DataPoints[0].Value
			}
		}
	}
	t.Fatalf("no %s", name)
	return 0
}
