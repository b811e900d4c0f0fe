package otel_test

import (
	"testing"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/groupexec/groupexec/breaker"
	gotel "github.com/groupexec/groupexec/metrics/otel"
)

// A change of state from or to a State that is none of closed, open and
// half-open is counted with "other" for that state, as in prom: its
// String, "State(7)", made a series of each of 2^32 values, and each value
// an attribute set kept by the BreakerTransitions for good.
func TestBreakerTransitionsBoundStates(t *testing.T) {
	mp, reader := newProvider()
	tr, err := gotel.NewBreakerTransitions(mp, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Unregister()
	for s := range breaker.State(20) {
		tr.OnStateChange("b", s, breaker.StateOpen)
	}
	m, ok := collect(t, reader).find("breaker_transitions_total")
	if !ok {
		t.Fatal("no breaker_transitions_total")
	}
	got := map[string]int64{}
	for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
		from, _ := p.Attributes.Value("from")
		got[from.AsString()] += p.Value
	}
	want := map[string]int64{"closed": 1, "open": 1, "half-open": 1, "other": 17}
	if len(got) != len(want) || got["other"] != 17 || got["closed"] != 1 || got["open"] != 1 || got["half-open"] != 1 {
		t.Errorf("transitions by from: %v, want %v", got, want)
	}
}
