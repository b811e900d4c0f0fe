package prom_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/internal/clocktest"
	"github.com/groupexec/groupexec/metrics/prom"
	"github.com/groupexec/groupexec/policy"
)

// A negative wait or run time in an event (the executor's stand still
// while its clock steps back, but a Collector hears whoever calls it) is
// recorded as 0 s. A negative observation would lower the histogram's _sum, which
// Prometheus documents as a counter but for negative observations, and
// which rate() then reads as a reset.
func TestNegativeDurationsRecordedAsZero(t *testing.T) {
	clk := clocktest.NewStepped(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	p, err := policy.New()
	if err != nil {
		t.Fatal(err)
	}
	c := prom.New(prom.Options{})
	ex, err := executor.New(p, executor.WithClock(clk), executor.WithListener(c))
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	if err := ex.Do(context.Background(), "a", func(context.Context) error {
		clk.Add(-time.Hour)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	c.OnStarted(executor.Event{Group: "a", Queued: -time.Hour})
	c.OnCompleted(executor.Event{Group: "a", Status: executor.Success, Started: true, Duration: -time.Hour})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	for _, tc := range []struct {
		name  string
		count uint64
	}{{"group_queued_seconds", 2}, {"group_run_seconds", 2}} {
		m := metricOf(t, reg, tc.name, "a")
		if m == nil {
			t.Fatalf("no %s{group=a}", tc.name)
		}
		h := m.GetHistogram()
		if h.GetSampleCount() != tc.count || h.GetSampleSum() != 0 {
			t.Errorf("%s: %d observations summing to %v s, want %d summing to 0", tc.name, h.GetSampleCount(), h.GetSampleSum(), tc.count)
		}
		if b := h.GetBucket()[0]; b.GetCumulativeCount() != tc.count {
			t.Errorf("%s: %d in the first bucket (le=%v), want all %d", tc.name, b.GetCumulativeCount(), b.GetUpperBound(), tc.count)
		}
	}
}
