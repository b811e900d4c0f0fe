package clusterotel_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/groupexec/groupexec/cluster/redislimit"
	gotel "github.com/groupexec/groupexec/metrics/otel"
	"github.com/groupexec/groupexec/metrics/otel/clusterotel"
)

type source struct{ s redislimit.Stats }

func (s *source) Stats() redislimit.Stats { return s.s }

// Each instrument equals its field of Stats, under clusterprom's names.
func TestObserveEqualsStats(t *testing.T) {
	src := &source{redislimit.Stats{Mode: redislimit.ModeUp, Policy: redislimit.FailClosed,
		RoundTrips: 1, Acquired: 2, Fallbacks: 3, Rejected: 4, Refills: 5, RefillsDenied: 6, Returned: 7,
		Renewals: 8, LeasesLost: 9, TasksCancelled: 10, Outages: 11, Leases: 12, PermitsLeased: 13, PermitsInUse: 14,
		KeyFailed: 15}}
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	reg, err := clusterotel.Observe(mp, src, "app")
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Unregister()
	want := map[string]int64{"round_trips_total": 1, "permits_acquired_total": 2, "fallbacks_total": 3, "rejected_total": 4,
		"refills_total": 5, "refills_denied_total": 6, "permits_returned_total": 7, "renewals_total": 8,
		"leases_lost_total": 9, "tasks_cancelled_total": 10, "outages_total": 11, "leases": 12, "permits_leased": 13,
		"permits_in_use": 14, "key_failed_total": 15, "up": 1}
	check := func() {
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
		}
		seen := 0
		for _, m := range rm.ScopeMetrics[0].Metrics {
			var pts []metricdata.DataPoint[int64]
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				pts = d.DataPoints
			case metricdata.Gauge[int64]:
				pts = d.DataPoints
			}
			name := m.Name[len("app_cluster_"):]
			w, ok := want[name]
			if !ok || len(pts) != 1 || pts[0].Value != w {
				t.Errorf("%s: %+v, want %d", m.Name, pts, w)
				continue
			}
			if name == "up" {
				if p, _ := pts[0].Attributes.Value(attribute.Key("policy")); p.AsString() != src.s.Policy.String() {
					t.Errorf("up's policy %q", p.AsString())
				}
			}
			seen++
		}
		if seen != len(want) {
			t.Errorf("%d instruments, want %d", seen, len(want))
		}
	}
	check()
	src.s.Mode, want["up"] = redislimit.ModeDown, 0
	check()
}

// A nil *redislimit.Holder, a holder variable never set, is refused as a
// nil Source: every collection would panic in its Stats.
func TestObserveRefusesANilHolder(t *testing.T) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	var h *redislimit.Holder
	reg, err := clusterotel.Observe(mp, h, "app")
	if err == nil {
		reg.Unregister()
		t.Fatal("Observe accepted a nil *redislimit.Holder")
	}
	if !strings.Contains(err.Error(), "nil MeterProvider or Source") {
		t.Errorf("error %q does not say the Source is nil", err)
	}
}

// A nil *sdkmetric.MeterProvider is refused as a nil MeterProvider is: its
// Meter panicked with a nil pointer dereference.
func TestObserveRefusesANilProviderPointer(t *testing.T) {
	var mp *sdkmetric.MeterProvider // nil: the input under test
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("panic: %v", r)
			}
		}()
		var reg interface{ Unregister() error }
		if reg, err = clusterotel.Observe(mp, &source{}, "app"); err == nil {
			_ = reg.Unregister()
		}
	}()
	if err == nil || !strings.Contains(err.Error(), "nil MeterProvider or Source") {
		t.Errorf("Observe with a nil *sdkmetric.MeterProvider: %v; want an error saying the MeterProvider is nil", err)
	}
}

// Observe's invalid arguments match otel.ErrInvalidOption, as the
// constructors of metrics/otel's give.
func TestObserveInvalidArgumentsMatchErrInvalidOption(t *testing.T) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	for name, f := range map[string]func() (metric.Registration, error){
		"nil provider": func() (metric.Registration, error) { return clusterotel.Observe(nil, &source{}, "app") },
		"nil source":   func() (metric.Registration, error) { return clusterotel.Observe(mp, nil, "app") },
		"namespace":    func() (metric.Registration, error) { return clusterotel.Observe(mp, &source{}, "a b") },
	} {
		reg, err := f()
		if err == nil {
			_ = reg.Unregister()
		}
		if !errors.Is(err, gotel.ErrInvalidOption) {
			t.Errorf("%s: %v; want an error matching otel.ErrInvalidOption", name, err)
		}
	}
}
