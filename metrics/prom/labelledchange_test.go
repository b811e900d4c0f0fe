package prom_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/groupexec/groupexec/metrics/prom"
)

// A group Labelled has accepted keeps its series, as in metrics/otel, even
// if Labelled stops accepting it (a tenant dropped from a reloaded
// configuration): its levels are exported under its name for good, so its
// counts must stay there too, or the two would disagree, the group's
// counters frozen and its later outcomes in OtherGroup's.
func TestGroupLabelledOnceKeepsItsCounters(t *testing.T) {
	var accept atomic.Bool
	accept.Store(true)
	ex, _, reg := setup(t, prom.Options{Labelled: func(g string) bool { return g == "t" && accept.Load() }})
	ctx := context.Background()
	ok := func(context.Context) error { return nil }
	if err := ex.Do(ctx, "t", ok); err != nil {
		t.Fatal(err)
	}
	accept.Store(false)
	if err := ex.Do(ctx, "t", ok); err != nil {
		t.Fatal(err)
	}
	gs, _ := ex.GroupStats("t")
	// Only successes: one series of the group.
	got := metricOf(t, reg, "group_completed_total", "t").GetCounter().GetValue()
	if got != float64(gs.Succeeded) {
		t.Errorf("group_completed_total{group=t,status=success} = %v; GroupStats(t).Succeeded = %d", got, gs.Succeeded)
	}
	if m := metricOf(t, reg, "group_completed_total", prom.OtherGroup); m != nil {
		t.Errorf("group_completed_total{group=%s} = %v: a labelled group's outcome counted there", prom.OtherGroup, m)
	}
	if m := metricOf(t, reg, "group_running_tasks", "t"); m == nil {
		t.Error("no group_running_tasks{group=t}: its levels are no longer exported")
	}
}
