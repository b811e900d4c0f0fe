package otel_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/executor"
	gotel "github.com/groupexec/groupexec/metrics/otel"
	"github.com/groupexec/groupexec/policy"
)

// After a known workload, every instrument equals what Stats and GroupStats
// say: outcomes, refusals by limit, time histograms' counts, and the levels
// and limits of the labelled groups, the rest summed under OtherGroup.
func TestCollectorEqualsStats(t *testing.T) {
	mp, reader := newProvider()
	c, err := gotel.New(mp, gotel.Options{Namespace: "app", Labelled: func(g string) bool { return g != "x" && g != "y" }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Unregister()
	started := make(chan string, 100)
	p, _ := policy.New(policy.WithGlobalMaxInFlight(10), policy.WithDefaultMaxConcurrency(1),
		policy.WithDefaultMaxInFlight(4), policy.WithRejectionPolicy(policy.Abort))
	// The clock never moves, so every task runs for 0s: the run histogram
	// still counts each task that ran.
	ex, err := executor.New(p, executor.WithListener(tee{c, started}), executor.WithClock(clock.NewFake(time.Unix(0, 0))),
		executor.WithGroupBreaker(breaker.Settings{ReadyToTrip: func(n breaker.Counts) bool { return n.ConsecutiveFailures >= 2 }}))
	if err != nil {
		t.Fatal(err)
	}
	hold, holdXY := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(hold); close(holdXY); ex.Close() })
	c.Observe(ex)
	ctx := context.Background()
	boom := errors.New("boom")

	// a: 3 successes and 1 failure.
	for i := range 4 {
		var want error
		if i == 3 {
			want = boom
		}
		ex.Do(ctx, "a", func(context.Context) error { return want })
	}
	// b: 2 failures open its breaker; a third is refused by it.
	for range 3 {
		ex.Do(ctx, "b", func(context.Context) error { return boom })
	}
	// c: one running (held), two waiting, one refused by its bulkhead, one
	// waiting task cancelled.
	done := make(chan struct{})
	go func() {
		defer close(done)
		ex.Do(ctx, "c", func(context.Context) error { <-hold; return nil })
	}()
	<-started
	h1, _ := executor.Submit(ex, ctx, executor.Task[int]{Group: "c", Fn: func(context.Context) (int, error) { return 1, nil }})
	h2, _ := executor.Submit(ex, ctx, executor.Task[int]{Group: "c", Fn: func(context.Context) (int, error) { return 1, nil }})
	h3, _ := executor.Submit(ex, ctx, executor.Task[int]{Group: "c", Fn: func(context.Context) (int, error) { return 1, nil }})
	if _, err := executor.Submit(ex, ctx, executor.Task[int]{Group: "c", Fn: func(context.Context) (int, error) { return 1, nil }}); !errors.Is(err, executor.ErrRejected) {
		t.Fatalf("c's bulkhead: %v", err)
	}
	h2.Cancel()
	// x and y are not labelled: one running each, summed under _other.
	for _, g := range []string{"x", "y"} {
		go ex.Do(ctx, g, func(context.Context) error { <-holdXY; return nil })
		<-started
	}

	r := collect(t, reader)
	s := ex.Stats()
	for _, g := range []string{"a", "b", "c"} {
		gs, _ := ex.GroupStats(g)
		for status, want := range map[string]uint64{"success": gs.Succeeded, "failed": gs.Failed, "cancelled": gs.Cancelled} {
			got, _ := r.int("app_group_completed_total", map[string]string{"group": g, "status": status})
			if uint64(got) != want {
				t.Errorf("%s %s: %d, Stats %d", g, status, got, want)
			}
		}
		if got := r.sum("app_group_rejected_total", g); uint64(got) != gs.Rejected {
			t.Errorf("%s: %d rejected, Stats %d", g, got, gs.Rejected)
		}
		if n, _ := r.histogram("app_group_queued_seconds", group(g)); n != gs.Started {
			t.Errorf("%s: %d queue times, %d started", g, n, gs.Started)
		}
		if n, _ := r.histogram("app_group_run_seconds", group(g)); n != gs.Succeeded+gs.Failed {
			t.Errorf("%s: %d run times, %d ran to the end", g, n, gs.Succeeded+gs.Failed)
		}
		for name, want := range map[string]int{"app_group_running_tasks": gs.RunningTasks, "app_group_waiting_tasks": gs.Waiting,
			"app_group_max_in_flight": gs.MaxInFlight, "app_group_max_concurrency": gs.MaxConcurrency, "app_group_breaker_state": int(gs.Breaker)} {
			if got := r.value(name, group(g)); got != int64(want) {
				t.Errorf("%s{%s} = %d, GroupStats %d", name, g, got, want)
			}
		}
	}
	// The workload is what the test says it is.
	if gs, _ := ex.GroupStats("c"); gs.RunningTasks != 1 || gs.Waiting != 2 || gs.Cancelled != 1 || gs.Rejected != 1 {
		t.Errorf("c: %+v", gs)
	}
	if gs, _ := ex.GroupStats("b"); gs.Breaker != breaker.StateOpen || gs.Failed != 2 {
		t.Errorf("b: %+v", gs)
	}
	for _, tc := range []struct {
		group, limit string
		want         int64
	}{{"b", "circuit_breaker", 1}, {"c", "group_in-flight", 1}} {
		if got := r.value("app_group_rejected_total", map[string]string{"group": tc.group, "limit": tc.limit}); got != tc.want {
			t.Errorf("rejected{%s,%s} = %d, want %d", tc.group, tc.limit, got, tc.want)
		}
	}
	if got := r.value("app_group_running_tasks", group(gotel.OtherGroup)); got != 2 {
		t.Errorf("_other running %d, want x's and y's", got)
	}
	for name, want := range map[string]int{"app_executor_running_permits": s.Running, "app_executor_groups": s.Groups,
		"app_executor_global_max_in_flight": s.GlobalMaxInFlight} {
		if got := r.value(name, nil); got != int64(want) {
			t.Errorf("%s = %d, Stats %d", name, got, want)
		}
	}
	if got := r.value("app_queue_depth", map[string]string{"queue": "global"}); got != int64(s.Waiting) || got != 2 {
		t.Errorf("queue_depth %d, Stats %d, want 2", got, s.Waiting)
	}
	if _, ok := r.int("app_group_running_tasks", group("x")); ok {
		t.Error("x has series of its own though Labelled refused it")
	}
	_, _ = h1, h3
}

// tee passes events to the collector and signals the starts of the groups
// whose tasks the test holds.
type tee struct {
	*gotel.Collector
	started chan string
}

func (t tee) OnStarted(e executor.Event) {
	t.Collector.OnStarted(e)
	if e.Group != "a" && e.Group != "b" {
		t.started <- e.Group
	}
}

// Without Labelled, the first MaxGroups groups get series of their own.
func TestCollectorBoundsGroups(t *testing.T) {
	mp, reader := newProvider()
	c, err := gotel.New(mp, gotel.Options{MaxGroups: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Unregister()
	p, _ := policy.New()
	ex, _ := executor.New(p, executor.WithListener(c))
	defer ex.Close()
	c.Observe(ex)
	for _, g := range []string{"g1", "g2", "g3", "g4", "g1"} {
		ex.Do(context.Background(), g, func(context.Context) error { return nil })
	}
	r := collect(t, reader)
	for g, want := range map[string]int64{"g1": 2, "g2": 1, gotel.OtherGroup: 2} {
		if got := r.value("group_completed_total", map[string]string{"group": g, "status": "success"}); got != want {
			t.Errorf("%s: %d, want %d", g, got, want)
		}
	}
	// Refused naming the option and its value, as metrics/prom refuses it.
	if _, err := gotel.New(mp, gotel.Options{MaxGroups: -1}); err == nil ||
		!strings.Contains(err.Error(), "Options.MaxGroups") || !strings.Contains(err.Error(), "-1") {
		t.Errorf("MaxGroups -1: New returned %v; want an error naming Options.MaxGroups and the value", err)
	}
	if _, err := gotel.New(nil, gotel.Options{}); err == nil {
		t.Error("nil provider accepted")
	}
}

func TestLimitLabel(t *testing.T) {
	if got := gotel.LimitLabel(&executor.RejectedError{Limit: executor.LimitGroupInFlight}); got != "group_in-flight" {
		t.Errorf("%q", got)
	}
	if got := gotel.LimitLabel(errors.New("x")); got != "other" {
		t.Errorf("%q", got)
	}
}
