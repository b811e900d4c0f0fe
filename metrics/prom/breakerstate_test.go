package prom_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/metrics/prom"
)

// A change of state from or to a State that is none of closed, open and
// half-open (a breaker never reports one, but OnStateChange is anyone's to
// call) is counted with "other" for that state: its String, "State(7)",
// made a series of each of 2^32 values.
func TestBreakerTransitionsBoundStates(t *testing.T) {
	tr := prom.NewBreakerTransitions("", nil)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(tr)
	for s := range breaker.State(20) {
		tr.OnStateChange("b", s, breaker.StateOpen)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			got[label(m, "from")+">"+label(m, "to")] += m.GetCounter().GetValue()
		}
	}
	want := map[string]float64{"closed>open": 1, "open>open": 1, "half-open>open": 1, "other>open": 17}
	if len(got) != len(want) {
		t.Fatalf("transitions %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("transitions %v, want %v", got, want)
			break
		}
	}
}
