package otel_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/bulkhead"
	"github.com/groupexec/groupexec/executor"
	gotel "github.com/groupexec/groupexec/metrics/otel"
	"github.com/groupexec/groupexec/policy"
)

// The kind each instrument is exported as: counts of events are monotonic
// sums; levels, which go down and whose sum over an attribute is the
// whole's, non-monotonic sums (observable UpDownCounters); limits and
// states, which no sum makes sense of, gauges.
const (
	counter   = "counter"
	level     = "level"
	gauge     = "gauge"
	histogram = "histogram"
)

var kinds = map[string]string{
	"group_rejected_total":          counter,
	"group_completed_total":         counter,
	"group_queued_seconds":          histogram,
	"group_run_seconds":             histogram,
	"queue_depth":                   level,
	"executor_running_permits":      level,
	"executor_groups":               level,
	"executor_global_max_in_flight": gauge,
	"group_running_tasks":           level,
	"group_waiting_tasks":           level,
	"group_max_in_flight":           gauge,
	"group_max_concurrency":         gauge,
	"group_breaker_state":           gauge,
	"bulkhead_in_flight_permits":    level,
	"bulkhead_limit_permits":        gauge,
	"bulkhead_queue_depth":          level,
	"bulkhead_acquired_total":       counter,
	"bulkhead_queued_total":         counter,
	"bulkhead_rejected_total":       counter,
	"breaker_state":                 gauge,
	"breaker_requests":              level,
	"breaker_successes":             level,
	"breaker_failures":              level,
	"breaker_consecutive_failures":  level,
	"breaker_transitions_total":     counter,
}

func kindOf(m metricdata.Metrics) string {
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		if d.IsMonotonic {
			return counter
		}
		return level
	case metricdata.Gauge[int64]:
		return gauge
	case metricdata.Histogram[float64]:
		return histogram
	}
	return ""
}

// Every instrument of every exporter is of its kind, with a unit: "s" for
// the histograms, an annotation ({task}, {permit}, ...) for what counts
// things, none for a state.
func TestInstrumentKindsAndUnits(t *testing.T) {
	mp, reader := newProvider()
	c, err := gotel.New(mp, gotel.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Unregister()
	p, _ := policy.New(policy.WithRejectionPolicy(policy.Abort), policy.WithDefaultMaxInFlight(1))
	ex, _ := executor.New(p, executor.WithListener(c), executor.WithGroupBreaker(breaker.Settings{}))
	defer ex.Close()
	c.Observe(ex)
	ex.Do(context.Background(), "a", func(context.Context) error { return nil })
	ex.Do(context.Background(), "", func(context.Context) error { return nil }) // refused: invalid

	bm, err := gotel.NewBulkhead(mp, "b", "")
	if err != nil {
		t.Fatal(err)
	}
	defer bm.Unregister()
	b, err := bulkhead.New(1, bulkhead.WithListener(bm))
	if err != nil {
		t.Fatal(err)
	}
	bm.Observe(b)
	// A counter has points once it counted: one event of each.
	for _, code := range []string{bulkhead.EventPermitAcquired, bulkhead.EventRequestQueued, bulkhead.EventRequestRejected} {
		bm.OnEvent(bulkhead.Event{Code: code, Detail: bulkhead.ErrAtCapacity.Code()})
	}

	tr, err := gotel.NewBreakerTransitions(mp, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Unregister()
	cb, _ := breaker.New(breaker.Settings{Name: "db", OnStateChange: tr.OnStateChange,
		ReadyToTrip: func(breaker.Counts) bool { return true }})
	reg, err := gotel.ObserveBreakers(mp, "", cb)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Unregister()
	breaker.Execute(cb, func() (int, error) { return 0, errors.New("down") })

	seen := map[string]bool{}
	for _, m := range collect(t, reader).rm.ScopeMetrics[0].Metrics {
		seen[m.Name] = true
		want, ok := kinds[m.Name]
		if !ok {
			t.Errorf("%s: not in the table of kinds", m.Name)
			continue
		}
		if got := kindOf(m); got != want {
			t.Errorf("%s is a %T (%s), want a %s", m.Name, m.Data, got, want)
		}
		state := m.Name == "breaker_state" || m.Name == "group_breaker_state"
		annotation := len(m.Unit) > 2 && m.Unit[0] == '{' && m.Unit[len(m.Unit)-1] == '}'
		if want == histogram && m.Unit != "s" || state && m.Unit != "" || want != histogram && !state && !annotation {
			t.Errorf("%s: unit %q", m.Name, m.Unit)
		}
	}
	for name := range kinds {
		if !seen[name] {
			t.Errorf("%s: not exported", name)
		}
	}
}

// A View that drops the group attribute, as a program does to bound its
// series, leaves the levels' totals: the sum over the groups, which is
// Stats'. A gauge would keep one group's value instead, whichever the
// callback observed last.
func TestLevelsSumOverDroppedGroups(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	drop := sdkmetric.NewView(sdkmetric.Instrument{Name: "group_*_tasks"},
		sdkmetric.Stream{AttributeFilter: attribute.NewDenyKeysFilter("group")})
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader), sdkmetric.WithView(drop))
	c, err := gotel.New(mp, gotel.Options{MaxGroups: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Unregister()
	started := make(chan string, 6) // room for every start: the waiting ones start after the test
	p, _ := policy.New(policy.WithDefaultMaxConcurrency(1))
	ex, _ := executor.New(p, executor.WithListener(tee{c, started}))
	c.Observe(ex)
	hold := make(chan struct{})
	var wg sync.WaitGroup
	defer func() { close(hold); wg.Wait(); ex.Close() }()
	held := func(context.Context) (int, error) { <-hold; return 0, nil }
	// One task running and one waiting in each of three groups, the third
	// group's under OtherGroup.
	for _, g := range []string{"g1", "g2", "g3"} {
		wg.Go(func() { ex.Do(context.Background(), g, func(context.Context) error { <-hold; return nil }) })
		<-started
		if _, err := executor.Submit(ex, context.Background(), executor.Task[int]{Group: g, Fn: held}); err != nil {
			t.Fatal(err)
		}
	}
	r := collect(t, reader)
	s := ex.Stats()
	if got := r.value("group_running_tasks", nil); got != int64(s.RunningTasks) || got != 3 {
		t.Errorf("group_running_tasks without group = %d; Stats %d, want 3", got, s.RunningTasks)
	}
	if got := r.value("group_waiting_tasks", nil); got != int64(s.Waiting) || got != 3 {
		t.Errorf("group_waiting_tasks without group = %d; Stats %d, want 3", got, s.Waiting)
	}
}
