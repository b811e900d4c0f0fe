package otel_test

import (
	"fmt"
	"testing"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/internal/adaptertest"
	gotel "github.com/groupexec/groupexec/metrics/otel"
	"github.com/groupexec/groupexec/policy"
)

// Once an executor is idle, the counters summed over every group, labelled
// or not, equal Stats, whatever path each task took (as metrics/prom's
// TestCountersSumToStatsAtQuiescence checks for its counters): completions
// are Stats' outcomes, refusals its Rejected plus the CallerRuns, and each
// histogram counts every task started, under the limits or by its caller.
func TestCountersSumToStatsAtQuiescence(t *testing.T) {
	for _, rp := range []policy.RejectionPolicy{policy.Abort, policy.Discard, policy.DiscardOldest, policy.CallerRuns} {
		t.Run(fmt.Sprint(rp), func(t *testing.T) {
			mp, reader := newProvider()
			c, err := gotel.New(mp, gotel.Options{MaxGroups: 3})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Unregister()
			p, err := policy.New(policy.WithGlobalMaxInFlight(4), policy.WithDefaultMaxConcurrency(1),
				policy.WithDefaultMaxInFlight(3), policy.WithRejectionPolicy(rp))
			if err != nil {
				t.Fatal(err)
			}
			ex, err := executor.New(p, executor.WithListener(c))
			if err != nil {
				t.Fatal(err)
			}
			defer ex.Close()
			c.Observe(ex)
			adaptertest.EveryPath(t, ex)
			s := ex.Stats()
			r := collect(t, reader)
			completed, rejected := r.total("group_completed_total"), r.total("group_rejected_total")
			if want := s.Succeeded + s.Failed + s.Cancelled; completed != want {
				t.Errorf("group_completed_total sums to %d; Stats: %d succeeded + %d failed + %d cancelled = %d", completed, s.Succeeded, s.Failed, s.Cancelled, want)
			}
			if want := s.Rejected + s.CallerRuns; rejected != want {
				t.Errorf("group_rejected_total sums to %d; Stats: %d rejected + %d run by their caller = %d", rejected, s.Rejected, s.CallerRuns, want)
			}
			for _, h := range []string{"group_queued_seconds", "group_run_seconds"} {
				if n, want := r.histogramTotal(h), s.Started+s.CallerRuns; n != want {
					t.Errorf("%s counts %d; Stats: %d started + %d run by their caller = %d", h, n, s.Started, s.CallerRuns, want)
				}
			}
			if s.Rejected == 0 || s.Cancelled == 0 || s.Failed == 0 {
				t.Errorf("the workload missed a path: %+v", s.TaskCounts)
			}
		})
	}
}

// total adds every point of the int64 sum name.
func (r reading) total(name string) uint64 {
	r.t.Helper()
	m, ok := r.find(name)
	if !ok {
		r.t.Fatalf("no %s", name)
	}
	var n int64
	for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
		n += p.Value
	}
	return uint64(n)
}

// histogramTotal adds the counts of every point of the histogram name.
func (r reading) histogramTotal(name string) uint64 {
	r.t.Helper()
	m, ok := r.find(name)
	if !ok {
		r.t.Fatalf("no %s", name)
	}
	var n uint64
	for _, p := range m.Data.(metricdata.Histogram[float64]).DataPoints {
		n += p.Count
	}
	return n
}
