package otel_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groupexec/groupexec/breaker"
	gotel "github.com/groupexec/groupexec/metrics/otel"
	"github.com/groupexec/groupexec/metrics/prom"
)

// Group keys name group breakers and come from clients: a name that is not
// valid UTF-8, which an exporter cannot send, or longer than MaxGroupLen
// bytes is counted under OtherGroup, and next still gets the name.
func TestBreakerTransitionsBoundNames(t *testing.T) {
	mp, reader := newProvider()
	var names []string
	tr, err := gotel.NewBreakerTransitions(mp, "app", func(name string, _, _ breaker.State) { names = append(names, name) })
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Unregister()
	long, longest := strings.Repeat("k", gotel.MaxGroupLen+1), strings.Repeat("k", gotel.MaxGroupLen)
	for _, name := range []string{"\xff", long, longest, "ok"} {
		tr.OnStateChange(name, breaker.StateClosed, breaker.StateOpen)
	}
	r := collect(t, reader)
	attrs := func(name string) map[string]string {
		return map[string]string{"breaker": name, "from": "closed", "to": "open"}
	}
	if got := r.value("app_breaker_transitions_total", attrs(gotel.OtherGroup)); got != 2 {
		t.Errorf("%d transitions under %s, want 2", got, gotel.OtherGroup)
	}
	for _, name := range []string{longest, "ok"} {
		if got := r.value("app_breaker_transitions_total", attrs(name)); got != 1 {
			t.Errorf("%d transitions of %.10q, want 1", got, name)
		}
	}
	for _, name := range []string{"\xff", long} {
		if got, ok := r.int("app_breaker_transitions_total", attrs(name)); ok {
			t.Errorf("%d transitions under the name %.10q, want none", got, name)
		}
	}
	if len(names) != 4 || names[0] != "\xff" || names[1] != long {
		t.Errorf("next got %.10q", names)
	}
}

// prom and otel count the same names under the same breaker label.
func TestPromAndOtelAgreeOnBreakerNames(t *testing.T) {
	mp, reader := newProvider()
	ot, err := gotel.NewBreakerTransitions(mp, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ot.Unregister()
	tr := prom.NewBreakerTransitions("", ot.OnStateChange)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(tr)
	for _, name := range []string{"\xff", "a\xffb", strings.Repeat("k", gotel.MaxGroupLen+1), strings.Repeat("k", gotel.MaxGroupLen), "ok", gotel.OtherGroup} {
		tr.OnStateChange(name, breaker.StateClosed, breaker.StateOpen)
		tr.OnStateChange(name, breaker.StateOpen, breaker.StateHalfOpen)
	}
	pv := promValues(t, reg)
	sameSeries(t, pv, otelValues(collect(t, reader)), false)
	if len(pv) != 6 {
		t.Errorf("prom gave %d series, want 6: %v", len(pv), pv)
	}
}

// A bulkhead or breaker name that is not valid UTF-8, which no exporter can
// send, is refused, as metrics/prom refuses it, naming the value.
func TestPolicyNamesNotUTF8AreRefused(t *testing.T) {
	mp, _ := newProvider()
	if b, err := gotel.NewBulkhead(mp, "pay\xff", ""); err == nil || !strings.Contains(err.Error(), `"pay\xff"`) {
		if b != nil {
			b.Unregister()
		}
		t.Errorf("NewBulkhead of a name not UTF-8: %v; want an error naming it", err)
	}
	ok, _ := breaker.New(breaker.Settings{Name: "ok"})
	bad, err := breaker.New(breaker.Settings{Name: "db\xff"})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := gotel.ObserveBreakers(mp, "", ok, bad); err == nil || !strings.Contains(err.Error(), `breaker 1's name "db\xff"`) {
		if r != nil {
			r.Unregister()
		}
		t.Errorf("ObserveBreakers of a name not UTF-8: %v; want an error naming it", err)
	}
	r, err := gotel.ObserveBreakers(mp, "", ok) // the refused call took no name
	if err != nil {
		t.Fatal(err)
	}
	r.Unregister()
}
