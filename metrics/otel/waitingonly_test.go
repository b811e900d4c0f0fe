package otel_test

import (
	"context"
	"testing"

	"github.com/groupexec/groupexec/executor"
	gotel "github.com/groupexec/groupexec/metrics/otel"
	"github.com/groupexec/groupexec/policy"
)

// A group whose tasks have only been submitted, all waiting for global
// room, is the one an operator most needs to see by name: its waiting tasks
// are under its own attribute, as GroupStats gives them, not in
// OtherGroup's remainder until one of them starts.
func TestGroupWithOnlyWaitingTasksHasItsOwnSeries(t *testing.T) {
	mp, reader := newProvider()
	c, err := gotel.New(mp, gotel.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Unregister()
	p, err := policy.New(policy.WithGlobalMaxInFlight(1))
	if err != nil {
		t.Fatal(err)
	}
	ex, err := executor.New(p, executor.WithListener(c))
	if err != nil {
		t.Fatal(err)
	}
	release, started := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(release); ex.Close() })
	c.Observe(ex)
	ctx := context.Background()
	if _, err := executor.Submit(ex, ctx, executor.Task[int]{Group: "a", Fn: func(context.Context) (int, error) {
		close(started)
		<-release
		return 0, nil
	}}); err != nil {
		t.Fatal(err)
	}
	<-started
	if _, err := executor.Submit(ex, ctx, executor.Task[int]{Group: "b", Fn: func(context.Context) (int, error) { return 0, nil }}); err != nil {
		t.Fatal(err)
	}
	if gs, _ := ex.GroupStats("b"); gs.Waiting != 1 {
		t.Fatalf("GroupStats(b).Waiting = %d, want 1", gs.Waiting)
	}
	r := collect(t, reader)
	if got, ok := r.int("group_waiting_tasks", group("b")); !ok || got != 1 {
		t.Errorf("group_waiting_tasks{group=b} = %d (a point: %v), want 1 as GroupStats gives", got, ok)
	}
	if got := r.value("group_waiting_tasks", group(gotel.OtherGroup)); got != 0 {
		t.Errorf("group_waiting_tasks{group=%s} = %d, want 0", gotel.OtherGroup, got)
	}
}
