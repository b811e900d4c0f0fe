package prom_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/metrics/prom"
	"github.com/groupexec/groupexec/policy"
)

// setup returns an executor observed by a registered Collector.
func setup(t *testing.T, o prom.Options, opts ...policy.Option) (*executor.Executor, *prom.Collector, *prometheus.Registry) {
	t.Helper()
	p, err := policy.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	c := prom.New(o)
	ex, err := executor.New(p, executor.WithListener(c))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ex.Close() })
	c.Observe(ex)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	return ex, c, reg
}

func TestCountsAndLevels(t *testing.T) {
	ex, c, reg := setup(t, prom.Options{}, policy.WithDefaultMaxConcurrency(1), policy.WithDefaultMaxInFlight(2))
	ctx := context.Background()
	release := make(chan struct{})
	started := make(chan struct{})
	block := func(context.Context) (int, error) { close(started); <-release; return 0, nil }
	h1, err := executor.Submit(ex, ctx, executor.Task[int]{Group: "a", Fn: block})
	if err != nil {
		t.Fatal(err)
	}
	<-started
	h2, _ := executor.Submit(ex, ctx, executor.Task[int]{Group: "a", Fn: func(context.Context) (int, error) { return 0, errors.New("boom") }})
	if _, err := executor.Submit(ex, ctx, executor.Task[int]{Group: "a", Fn: block}); !errors.Is(err, executor.ErrRejected) {
		t.Fatalf("third task: %v", err)
	}

	if got := testutil.ToFloat64(gauge(c, "group_running_tasks", "a")); got != 1 {
		t.Errorf("running = %v", got)
	}
	if got := testutil.ToFloat64(gauge(c, "group_waiting_tasks", "a")); got != 1 {
		t.Errorf("waiting = %v", got)
	}
	close(release)
	h1.Wait(ctx)
	h2.Wait(ctx)

	want := `
# HELP group_completed_total Tasks completed, by group and status (success, failed, cancelled).
# TYPE group_completed_total counter
group_completed_total{group="a",status="failed"} 1
group_completed_total{group="a",status="success"} 1
# HELP group_rejected_total Tasks refused, by group and the limit that refused them.
# TYPE group_rejected_total counter
group_rejected_total{group="a",limit="group_in-flight"} 1
# HELP queue_depth Tasks waiting to start.
# TYPE queue_depth gauge
queue_depth{queue="global"} 0
`
	if err := testutil.GatherAndCompare(reg, stringsReader(want), "group_completed_total", "group_rejected_total", "queue_depth"); err != nil {
		t.Error(err)
	}
	if n, err := testutil.GatherAndCount(reg, "group_queued_seconds"); err != nil || n != 1 {
		t.Errorf("queued histogram series = %d, %v", n, err)
	}
}

// Group keys can be anything a client sends: the series must stay bounded.
func TestLabelsAreBounded(t *testing.T) {
	ex, _, reg := setup(t, prom.Options{MaxGroups: 3})
	ctx := context.Background()
	for i := range 50 {
		h, err := executor.Submit(ex, ctx, executor.Task[int]{Group: fmt.Sprint("g", i), Fn: func(context.Context) (int, error) { return 0, nil }})
		if err != nil {
			t.Fatal(err)
		}
		h.Wait(ctx)
	}
	n, err := testutil.GatherAndCount(reg, "group_completed_total")
	if err != nil {
		t.Fatal(err)
	}
	if n != 4 { // g0, g1, g2 and _other
		t.Errorf("completed series = %d, want 4", n)
	}
	if got := testutil.ToFloat64(counterFrom(t, reg, "group_completed_total", prom.OtherGroup)); got != 47 {
		t.Errorf("_other completed = %v, want 47", got)
	}
}

func TestLabelledFunc(t *testing.T) {
	ex, _, reg := setup(t, prom.Options{Namespace: "gx", Labelled: func(g string) bool { return g == "vip" }})
	ctx := context.Background()
	for _, g := range []string{"vip", "x", "y"} {
		h, _ := executor.Submit(ex, ctx, executor.Task[int]{Group: g, Fn: func(context.Context) (int, error) { return 0, nil }})
		h.Wait(ctx)
	}
	if n, _ := testutil.GatherAndCount(reg, "gx_group_completed_total"); n != 2 {
		t.Errorf("series = %d, want vip and _other", n)
	}
}

func TestLimitLabel(t *testing.T) {
	if got := prom.LimitLabel(&executor.RejectedError{Limit: executor.LimitQueueTimeout}); got != "queue_timeout" {
		t.Error(got)
	}
	if got := prom.LimitLabel(errors.New("x")); got != "other" {
		t.Error(got)
	}
}

// A negative MaxGroups is refused by New, naming the option and its value,
// as metrics/otel refuses it; 0 means DefaultMaxGroups.
func TestNegativeMaxGroupsPanicsInNew(t *testing.T) {
	func() {
		defer func() {
			r := recover()
			if msg := fmt.Sprint(r); r == nil || !strings.Contains(msg, "Options.MaxGroups") || !strings.Contains(msg, "-1") {
				t.Errorf("MaxGroups -1: New panicked with %v; want a panic naming Options.MaxGroups and the value", r)
			}
		}()
		prom.New(prom.Options{MaxGroups: -1})
	}()
	prom.New(prom.Options{MaxGroups: 0})
}
