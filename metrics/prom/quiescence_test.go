package prom_test

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groupexec/groupexec/internal/adaptertest"
	"github.com/groupexec/groupexec/metrics/prom"
	"github.com/groupexec/groupexec/policy"
)

// Once an executor is idle, the counters summed over every group, labelled
// or not, equal Stats, whatever path each task took: Submit, Do and Go,
// refused by a full bulkhead under each rejection policy (displaced under
// DiscardOldest, run by the caller under CallerRuns), cancelled while it
// waited or before it was submitted, invalid, failed, refused by a
// shutdown group. Completions are Stats' outcomes; refusals are Stats'
// Rejected plus the CallerRuns, which the listener hears refused first.
func TestCountersSumToStatsAtQuiescence(t *testing.T) {
	for _, rp := range []policy.RejectionPolicy{policy.Abort, policy.Discard, policy.DiscardOldest, policy.CallerRuns} {
		t.Run(fmt.Sprint(rp), func(t *testing.T) {
			ex, _, reg := setup(t, prom.Options{MaxGroups: 3}, policy.WithGlobalMaxInFlight(4),
				policy.WithDefaultMaxConcurrency(1), policy.WithDefaultMaxInFlight(3), policy.WithRejectionPolicy(rp))
			adaptertest.EveryPath(t, ex)
			s := ex.Stats()
			completed, rejected := sumCounter(t, reg, "group_completed_total"), sumCounter(t, reg, "group_rejected_total")
			if want := s.Succeeded + s.Failed + s.Cancelled; completed != want {
				t.Errorf("group_completed_total sums to %d; Stats: %d succeeded + %d failed + %d cancelled = %d", completed, s.Succeeded, s.Failed, s.Cancelled, want)
			}
			if want := s.Rejected + s.CallerRuns; rejected != want {
				t.Errorf("group_rejected_total sums to %d; Stats: %d rejected + %d run by their caller = %d", rejected, s.Rejected, s.CallerRuns, want)
			}
			// Every task started, under the limits or by its caller, waited
			// and ran once: each histogram counts it once.
			for _, h := range []string{"group_queued_seconds", "group_run_seconds"} {
				if n, want := sumHistogramCount(t, reg, h), s.Started+s.CallerRuns; n != want {
					t.Errorf("%s counts %d; Stats: %d started + %d run by their caller = %d", h, n, s.Started, s.CallerRuns, want)
				}
			}
			if s.Rejected == 0 || s.Cancelled == 0 || s.Failed == 0 {
				t.Errorf("the workload missed a path: %+v", s.TaskCounts)
			}
		})
	}
}

// sumCounter adds every series of the counter name.
func sumCounter(t *testing.T, reg *prometheus.Registry, name string) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.Metric {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return uint64(n)
}

// sumHistogramCount adds the observation counts of every series of the
// histogram name.
func sumHistogramCount(t *testing.T, reg *prometheus.Registry, name string) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.Metric {
				n += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return n
}
