package prom_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/metrics/prom"
)

// group_completed_total's status takes only the documented values (success,
// failed, cancelled): a completion of any other Status, which an executor
// never reports but a listener call may, is not counted, as metrics/otel
// counts none. It made a series of its own ("rejected", "status(9)"), one
// per value.
func TestCompletionOfAnotherStatusIsNotCounted(t *testing.T) {
	c := prom.New(prom.Options{})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	for _, st := range []executor.Status{executor.Rejected, executor.Status(9), executor.Status(255), executor.Success} {
		c.OnCompleted(executor.Event{Group: "g", Status: st, Started: true})
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() == "group_completed_total" {
			for _, m := range mf.Metric {
				got[label(m, "status")] += m.GetCounter().GetValue()
			}
		}
	}
	if len(got) != 1 || got["success"] != 1 {
		t.Errorf("group_completed_total by status: %v, want map[success:1]", got)
	}
}
