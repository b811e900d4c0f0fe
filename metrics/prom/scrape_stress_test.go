package prom_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/metrics/prom"
	"github.com/groupexec/groupexec/policy"
)

// Scrapes run beside tasks of more groups than MaxGroups, each group
// reclaimed as it goes idle, evicted or shut down and then used again,
// hostile keys among them (not UTF-8, too long, empty, OtherGroup's own):
// every scrape succeeds, no series of a counter or histogram ever goes
// back from one scrape to the next (a group evicted and back goes on from
// its totals), no gauge is negative, at most MaxGroups groups and
// OtherGroup have series, and once the executor is idle the levels are 0
// and the counters sum to Stats.
func TestScrapesDuringGroupChurnNeverGoBack(t *testing.T) {
	const maxGroups = 6
	ex, _, reg := setup(t, prom.Options{MaxGroups: maxGroups}, policy.WithGlobalMaxInFlight(6),
		policy.WithDefaultMaxConcurrency(2), policy.WithDefaultMaxInFlight(3), policy.WithRejectionPolicy(policy.Abort))
	keys := []string{"", "\xff\xfe", strings.Repeat("k", prom.MaxGroupLen+1), prom.OtherGroup}
	for i := range 3 * maxGroups {
		keys = append(keys, fmt.Sprint("g", i))
	}

	var mu sync.Mutex // orders the scrapes, so that each is compared with the one before
	last := map[string]float64{}
	scrape := func() {
		mu.Lock()
		defer mu.Unlock()
		mfs, err := reg.Gather()
		if err != nil {
			t.Error(err)
			return
		}
		groups := map[string]bool{}
		for _, mf := range mfs {
			for _, m := range mf.Metric {
				id := mf.GetName() + seriesLabels(m)
				if g := label(m, "group"); g != "" || strings.HasPrefix(mf.GetName(), "group_") {
					groups[g] = true
				}
				var v float64
				switch mf.GetType() {
				case dto.MetricType_COUNTER:
					v = m.GetCounter().GetValue()
				case dto.MetricType_HISTOGRAM:
					v = float64(m.GetHistogram().GetSampleCount())
				case dto.MetricType_GAUGE:
					if g := m.GetGauge().GetValue(); g < 0 {
						t.Errorf("%s = %v", id, g)
					}
					continue
				}
				if v < last[id] {
					t.Errorf("%s went back from %v to %v", id, last[id], v)
				}
				last[id] = v
			}
		}
		if len(groups) > maxGroups+1 {
			t.Errorf("%d group label values, want at most MaxGroups (%d) and %s", len(groups), maxGroups, prom.OtherGroup)
		}
	}

	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for range 300 {
				g := keys[rng.IntN(len(keys))]
				switch rng.IntN(10) {
				case 0:
					ex.EvictGroup(g)
				case 1:
					ctx, cancel := context.WithCancel(context.Background())
					cancel()
					_ = ex.Do(ctx, g, func(context.Context) error { return nil })
				case 2:
					_ = ex.Do(context.Background(), g, func(context.Context) error { return errors.New("failed") })
				default:
					h, err := executor.Submit(ex, context.Background(), executor.Task[int]{Group: g, Fn: func(context.Context) (int, error) { return 1, nil }})
					if err == nil && rng.IntN(4) == 0 {
						h.Cancel()
					}
				}
			}
		})
	}
	for range 2 {
		wg.Go(func() {
			for range 40 {
				scrape()
			}
		})
	}
	wg.Wait()
	for _, g := range keys {
		ex.EvictGroup(g)
	}
	if err := ex.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	scrape()
	s := ex.Stats()
	if c, want := sumCounter(t, reg, "group_completed_total"), s.Succeeded+s.Failed+s.Cancelled; c != want {
		t.Errorf("group_completed_total sums to %d; Stats: %d", c, want)
	}
	if r, want := sumCounter(t, reg, "group_rejected_total"), s.Rejected+s.CallerRuns; r != want {
		t.Errorf("group_rejected_total sums to %d; Stats: %d", r, want)
	}
	for _, name := range []string{"group_running_tasks", "group_waiting_tasks", "queue_depth", "executor_running_permits"} {
		if n := sumGauge(t, reg, name); n != 0 {
			t.Errorf("%s sums to %v once idle", name, n)
		}
	}
}

func seriesLabels(m *dto.Metric) string {
	var b strings.Builder
	for _, l := range m.GetLabel() {
		fmt.Fprintf(&b, "{%s=%q}", l.GetName(), l.GetValue())
	}
	return b.String()
}

func sumGauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.Metric {
				n += m.GetGauge().GetValue()
			}
		}
	}
	return n
}
