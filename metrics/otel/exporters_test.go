package otel_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/internal/adaptertest"
	gotel "github.com/groupexec/groupexec/metrics/otel"
	"github.com/groupexec/groupexec/metrics/prom"
	"github.com/groupexec/groupexec/policy"
)

// both passes every event to the two exporters.
// twoExporters are the two exporters of one executor.
type twoExporters struct {
	pc     *prom.Collector
	oc     *gotel.Collector
	reader *sdkmetric.ManualReader
	both   executor.Listener // feeds both
}

// exporters makes the two exporters for one executor, with the same
// labelled groups: which groups are the first MaxGroups seen depends on
// how their calls interleave.
func exporters(t *testing.T, labelled func(string) bool) twoExporters {
	t.Helper()
	mp, reader := newProvider()
	oc, err := gotel.New(mp, gotel.Options{Labelled: labelled})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { oc.Unregister() })
	pc := prom.New(prom.Options{Labelled: labelled})
	return twoExporters{pc, oc, reader, executor.Listeners(pc, oc)}
}

// observe has both observe ex, and returns prom's registry.
func (x twoExporters) observe(ex *executor.Executor) *prometheus.Registry {
	x.pc.Observe(ex)
	x.oc.Observe(ex)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(x.pc)
	return reg
}

// One executor observed by both exporters, driven concurrently through
// successes, failures, panics, refusals, tasks run by their caller, cancels,
// invalid input, evictions and limit changes: once it is quiescent, the two
// give the same series (histograms by their counts) with the same values,
// the levels are zero, and the counters add up to Stats.
func TestPromAndOtelAgree(t *testing.T) {
	x := exporters(t, func(g string) bool { return g == "a" || g == "cr1" || g == "d" })
	p, err := policy.New(policy.WithGlobalMaxInFlight(4), policy.WithDefaultMaxConcurrency(1), policy.WithDefaultMaxInFlight(2))
	if err != nil {
		t.Fatal(err)
	}
	// Groups named "cr..." run their refused tasks in the caller; the others
	// are refused.
	handler := func(r *executor.Rejection) error {
		if strings.HasPrefix(r.Group, "cr") {
			r.RunInCaller()
			return nil
		}
		return r.Err
	}
	ex, err := executor.New(p, executor.WithListener(x.both), executor.WithRejectionHandler(handler), executor.WithMaxIdleGroups(1))
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	reg := x.observe(ex)

	groups := []string{"a", "b", "cr1", "cr2", "d", "e"}
	boom := errors.New("boom")
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(uint64(w), 1))
			var hs []*executor.Handle[int]
			for range 300 {
				g := groups[rnd.IntN(len(groups))]
				fn := func(context.Context) (int, error) { return 0, nil }
				ctx := context.Background()
				switch rnd.IntN(8) {
				case 0:
					fn = func(context.Context) (int, error) { return 0, boom }
				case 1:
					fn = func(context.Context) (int, error) { panic("boom") }
				case 2:
					c, cancel := context.WithCancel(ctx)
					ctx = c
					defer cancel()
					fn = func(ctx context.Context) (int, error) { <-ctx.Done(); return 0, ctx.Err() }
					go cancel()
				case 3:
					g = "" // invalid
				case 4:
					ex.EvictGroup(g)
				case 5:
					_ = ex.SetGroupLimits(g, policy.GroupLimits{MaxInFlight: 1 + rnd.IntN(3), MaxConcurrency: 1 + rnd.IntN(2)})
				}
				if rnd.IntN(2) == 0 {
					h, _ := executor.Submit(ex, ctx, executor.Task[int]{Group: g, Fn: fn, Weight: 1 + rnd.IntN(2)})
					hs = append(hs, h)
					continue
				}
				func() {
					defer func() { _ = recover() }() // Do's panics go on up
					_ = ex.DoWeighted(ctx, g, 1+rnd.IntN(2), func(ctx context.Context) error { _, err := fn(ctx); return err })
				}()
			}
			for _, h := range hs {
				h.Wait(context.Background())
			}
		}()
	}
	wg.Wait()
	// Wait and Do return as their task completes, before the executor
	// settles its group: only then does the group go idle and idle
	// reclamation drop the groups past WithMaxIdleGroups(1). Read while it
	// does, the two exporters could see different groups.
	adaptertest.Eventually(t, "the executor quiescent", func() bool {
		s := ex.Stats()
		return s.Groups == s.IdleGroups && s.Groups <= 1
	})

	pv, ov := promValues(t, reg), otelValues(collect(t, x.reader))
	sameSeries(t, pv, ov, false)
	s := ex.Stats()
	sum := func(prefix string) (n float64) {
		for k, v := range pv {
			if strings.HasPrefix(k, prefix) {
				n += v
			}
		}
		return n
	}
	for status, want := range map[string]uint64{"success": s.Succeeded, "failed": s.Failed, "cancelled": s.Cancelled} {
		if got := sumWhere(pv, "group_completed_total", "status="+status); got != float64(want) {
			t.Errorf("completed %s: %v, Stats %d", status, got, want)
		}
	}
	if got, want := sum("group_rejected_total"), float64(s.Rejected+s.CallerRuns); got != want {
		t.Errorf("rejected: %v, Stats Rejected+CallerRuns %v", got, want)
	}
	if got := sum("group_queued_seconds_count"); got != float64(s.Started+s.CallerRuns) {
		t.Errorf("queued times: %v, Stats Started+CallerRuns %d", got, s.Started+s.CallerRuns)
	}
	for _, level := range []string{"group_running_tasks", "group_waiting_tasks", "queue_depth", "executor_running_permits"} {
		if got := sum(level); got != 0 {
			t.Errorf("%s: %v once quiescent", level, got)
		}
	}
	if s.CallerRuns == 0 || s.Cancelled == 0 || s.Failed == 0 || s.Rejected == 0 {
		t.Errorf("the workload missed an outcome: %+v", s.TaskCounts)
	}
}

// The limits and the group breakers' states agree too: a labelled group
// with the policy's limits and an open breaker, one with limits of its own,
// one reclaimed (levels, no limits), and a group summed under OtherGroup
// (levels, no limits).
func TestPromAndOtelAgreeOnLimits(t *testing.T) {
	x := exporters(t, func(g string) bool { return g != "d" })
	p, err := policy.New(policy.WithGlobalMaxInFlight(7), policy.WithDefaultMaxInFlight(5), policy.WithDefaultMaxConcurrency(2))
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(time.Unix(0, 0))
	ex, err := executor.New(p, executor.WithListener(x.both), executor.WithGroupBreaker(breaker.Settings{Clock: clk,
		Timeout: time.Second, ReadyToTrip: func(n breaker.Counts) bool { return n.ConsecutiveFailures >= 1 }}))
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	reg := x.observe(ex)

	ctx := context.Background()
	ok := func(context.Context) error { return nil }
	_ = ex.Do(ctx, "a", func(context.Context) error { return errors.New("boom") }) // opens a's breaker
	for _, g := range []string{"b", "c", "d"} {
		if err := ex.Do(ctx, g, ok); err != nil {
			t.Fatal(err)
		}
	}
	if err := ex.SetGroupLimits("b", policy.GroupLimits{MaxInFlight: 3, MaxConcurrency: 1, Share: 1}); err != nil {
		t.Fatal(err)
	}
	if !ex.EvictGroup("c") {
		t.Fatal("c not evicted")
	}

	ov := otelValues(collect(t, x.reader))
	sameSeries(t, promValues(t, reg), ov, false)
	for k, want := range map[string]float64{"executor_global_max_in_flight{}": 7, "group_breaker_state{group=a}": 1,
		"group_max_in_flight{group=b}": 3, "group_max_concurrency{group=b}": 1} {
		if got, ok := ov[k]; !ok || got != want {
			t.Errorf("%s: %v (present %v), want %v", k, got, ok, want)
		}
	}
}

func sumWhere(m map[string]float64, name, label string) (n float64) {
	for k, v := range m {
		if strings.HasPrefix(k, name+"{") && strings.Contains(k, label) {
			n += v
		}
	}
	return n
}

// key is a series' name and its labels, sorted.
func key(name string, labels map[string]string) string {
	var ls []string
	for k, v := range labels {
		ls = append(ls, k+"="+v)
	}
	sort.Strings(ls)
	return name + "{" + strings.Join(ls, ",") + "}"
}

// sameSeries reports every series prom and otel do not both give with the
// same value; with zeroAbsent, a prom series at 0 may be absent in otel
// (otel gives a point only once it has one to give).
func sameSeries(t *testing.T, pv, ov map[string]float64, zeroAbsent bool) {
	t.Helper()
	for k, v := range pv {
		if got, ok := ov[k]; (ok || !zeroAbsent || v != 0) && (!ok || got != v) {
			t.Errorf("%.60s: prom %v, otel %v (present %v)", k, v, got, ok)
		}
	}
	for k, v := range ov {
		if _, ok := pv[k]; !ok {
			t.Errorf("%.60s: otel %v, not in prom", k, v)
		}
	}
}

func promValues(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]float64)
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			labels := make(map[string]string)
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				out[key(mf.GetName(), labels)] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[key(mf.GetName(), labels)] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[key(mf.GetName()+"_count", labels)] = float64(m.GetHistogram().GetSampleCount())
			default:
				panic(fmt.Sprint(mf.GetType()))
			}
		}
	}
	return out
}

func otelValues(r reading) map[string]float64 {
	out := make(map[string]float64)
	labels := func(s attribute.Set) map[string]string {
		m := make(map[string]string)
		for _, kv := range s.ToSlice() {
			m[string(kv.Key)] = kv.Value.AsString()
		}
		return m
	}
	for _, sm := range r.rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					out[key(m.Name, labels(p.Attributes))] = float64(p.Value)
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					out[key(m.Name, labels(p.Attributes))] = float64(p.Value)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					out[key(m.Name+"_count", labels(p.Attributes))] = float64(p.Count)
				}
			}
		}
	}
	return out
}

// A limit that bounds nothing, policy.Unlimited (the default global
// in-flight limit), reads as the number the instruments' descriptions
// give, policy.Unlimited itself, in both exporters.
func TestPromAndOtelAgreeOnUnlimitedLimits(t *testing.T) {
	x := exporters(t, nil)
	p, err := policy.New(policy.WithDefaultMaxInFlight(policy.Unlimited), policy.WithDefaultMaxConcurrency(policy.Unlimited))
	if err != nil {
		t.Fatal(err)
	}
	ex, err := executor.New(p, executor.WithListener(x.both))
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	reg := x.observe(ex)
	if err := ex.Do(context.Background(), "a", func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}

	r := collect(t, x.reader)
	sameSeries(t, promValues(t, reg), otelValues(r), true)
	documented := strconv.Itoa(policy.Unlimited) + " (policy.Unlimited) when unlimited"
	for _, tc := range []struct {
		name  string
		attrs map[string]string
	}{{"executor_global_max_in_flight", nil}, {"group_max_in_flight", group("a")}, {"group_max_concurrency", group("a")}} {
		if got := r.value(tc.name, tc.attrs); got != policy.Unlimited {
			t.Errorf("%s%v = %d, want policy.Unlimited, %d", tc.name, tc.attrs, got, policy.Unlimited)
		}
		if m, _ := r.find(tc.name); !strings.Contains(m.Description, documented) {
			t.Errorf("%s: description %q does not say %q", tc.name, m.Description, documented)
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if strings.Contains(mf.GetName(), "max_") && !strings.Contains(mf.GetHelp(), documented) {
			t.Errorf("prom %s: help %q does not say %q", mf.GetName(), mf.GetHelp(), documented)
		}
	}
}
