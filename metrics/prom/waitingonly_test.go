package prom_test

import (
	"context"
	"testing"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/metrics/prom"
	"github.com/groupexec/groupexec/policy"
)

// A group whose tasks have only been submitted, all waiting for global
// room, is the one an operator most needs to see by name: its waiting tasks
// are under its own label, as GroupStats gives them, not in OtherGroup's
// remainder until one of them starts.
func TestGroupWithOnlyWaitingTasksHasItsOwnSeries(t *testing.T) {
	ex, _, reg := setup(t, prom.Options{}, policy.WithGlobalMaxInFlight(1))
	ctx := context.Background()
	release, started := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(release) }) // before the executor's Close, which waits for the task
	_, err := executor.Submit(ex, ctx, executor.Task[int]{Group: "a", Fn: func(context.Context) (int, error) {
		close(started)
		<-release
		return 0, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	<-started
	_, err = executor.Submit(ex, ctx, executor.Task[int]{Group: "b", Fn: func(context.Context) (int, error) { return 0, nil }})
	if err != nil {
		t.Fatal(err)
	}
	gs, _ := ex.GroupStats("b")
	if gs.Waiting != 1 {
		t.Fatalf("GroupStats(b).Waiting = %d, want 1", gs.Waiting)
	}
	if m := metricOf(t, reg, "group_waiting_tasks", "b"); m.GetGauge().GetValue() != 1 {
		t.Errorf("group_waiting_tasks{group=b} = %v, want 1 as GroupStats gives", m)
	}
	if m := metricOf(t, reg, "group_waiting_tasks", prom.OtherGroup); m.GetGauge().GetValue() != 0 {
		t.Errorf("group_waiting_tasks{group=%s} = %v, want 0", prom.OtherGroup, m)
	}
}
