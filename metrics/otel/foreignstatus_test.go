package otel_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groupexec/groupexec/executor"
	gotel "github.com/groupexec/groupexec/metrics/otel"
	"github.com/groupexec/groupexec/metrics/prom"
)

// A completion of a Status other than Success, Failed or Cancelled, which
// an executor never reports but a listener call may, is not counted, and
// its group takes none of the MaxGroups places, as in prom, which drops
// such a completion before it looks at the group. Given one, otel alone
// sent the next group to OtherGroup: the two exporters then gave the same
// events under different series.
func TestCompletionOfAnotherStatusTakesNoPlace(t *testing.T) {
	mp, reader := newProvider()
	oc, err := gotel.New(mp, gotel.Options{MaxGroups: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer oc.Unregister()
	pc := prom.New(prom.Options{MaxGroups: 1})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(pc)
	both := executor.Listeners(pc, oc)
	both.OnCompleted(executor.Event{Group: "stray", Status: executor.Status(9), Started: true})
	both.OnCompleted(executor.Event{Group: "g", Status: executor.Success, Started: true})

	r := collect(t, reader)
	if got, _ := r.int("group_completed_total", map[string]string{"group": "g", "status": "success"}); got != 1 {
		t.Errorf("group_completed_total{group=g,status=success} = %d, want 1 (g is the first group counted)", got)
	}
	if got := r.sum("group_completed_total", gotel.OtherGroup); got != 0 {
		t.Errorf("group_completed_total{group=%q} sums to %d, want 0", gotel.OtherGroup, got)
	}
	sameSeries(t, promValues(t, reg), otelValues(r), true)
}
