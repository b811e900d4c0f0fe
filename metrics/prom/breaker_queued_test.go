package prom_test

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/internal/adaptertest"
	"github.com/groupexec/groupexec/metrics/prom"
	"github.com/groupexec/groupexec/policy"
)

// series returns the metrics named name whose labels include labels.
func series(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) []*dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []*dto.Metric
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.Metric {
			for k, v := range labels {
				if label(m, k) != v {
					continue metrics
				}
			}
			out = append(out, m)
		}
	}
	return out
}

// A task that waited in its group's queue when the group's breaker opened,
// refused as it would start, is counted once, as a refusal by the breaker
// at admission is, under limit="circuit_breaker"; it records no wait in
// group_queued_seconds (it never started), and leaves the waiting gauges.
func TestQueuedTaskRefusedByTheBreakerCountedAsAtAdmission(t *testing.T) {
	c := prom.New(prom.Options{})
	p, err := policy.New(policy.WithDefaultMaxConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	ex, err := executor.New(p, executor.WithListener(c), adaptertest.TrippingBreaker())
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	c.Observe(ex)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)

	adaptertest.RefuseQueuedByBreaker(t, ex, "g")

	check := func(when string, breakerRefusals float64) {
		t.Helper()
		rejected := series(t, reg, "group_rejected_total", map[string]string{"group": "g"})
		if len(rejected) != 1 || label(rejected[0], "limit") != "circuit_breaker" || rejected[0].GetCounter().GetValue() != breakerRefusals {
			t.Errorf("%s: group_rejected_total{group=\"g\"} %v, want one series, limit circuit_breaker, at %v", when, rejected, breakerRefusals)
		}
		if q := series(t, reg, "group_queued_seconds", map[string]string{"group": "g"}); len(q) != 1 || q[0].GetHistogram().GetSampleCount() != 1 {
			t.Errorf("%s: group_queued_seconds{group=\"g\"} %v, want the first task's wait alone", when, q)
		}
		if w := series(t, reg, "group_waiting_tasks", map[string]string{"group": "g"}); len(w) != 1 || w[0].GetGauge().GetValue() != 0 {
			t.Errorf("%s: group_waiting_tasks{group=\"g\"} %v, want 0", when, w)
		}
		if d := series(t, reg, "queue_depth", nil); len(d) != 1 || d[0].GetGauge().GetValue() != 0 {
			t.Errorf("%s: queue_depth %v, want 0", when, d)
		}
	}
	check("queued then refused", 1)
	var re *executor.RejectedError
	if err := ex.Do(context.Background(), "g", func(context.Context) error { return nil }); !errors.As(err, &re) || re.Limit != executor.LimitBreaker {
		t.Fatalf("Do at admission: %v, want a refusal by the open breaker", err)
	}
	check("and one refused at admission", 2)
}
