package otel_test

import (
	"strconv"
	"testing"
	"unicode/utf8"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/groupexec/groupexec/executor"
	gotel "github.com/groupexec/groupexec/metrics/otel"
)

// A refusal naming a limit the executor does not have (executor.Limit is a
// string type anyone can convert to) is counted under limit="other", as in
// prom: taken as it is, each made-up limit was a series of its own, kept by
// the SDK for good, and one that is not valid UTF-8 an attribute no
// exporter can send.
func TestForeignLimitsCountAsOther(t *testing.T) {
	mp, reader := newProvider()
	c, err := gotel.New(mp, gotel.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Unregister()
	reject := func(l executor.Limit) {
		c.OnRejected(executor.Event{Group: "g", Err: &executor.RejectedError{Group: "g", Limit: l}})
	}
	reject("x\xff")
	for i := range 50 {
		reject(executor.Limit("made up " + strconv.Itoa(i)))
	}
	reject(executor.LimitGroupInFlight)

	m, ok := collect(t, reader).find("group_rejected_total")
	if !ok {
		t.Fatal("no group_rejected_total")
	}
	got := map[string]int64{}
	for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
		v, _ := p.Attributes.Value("limit")
		if !utf8.ValidString(v.AsString()) {
			t.Errorf("limit attribute %q is not valid UTF-8", v.AsString())
		}
		got[v.AsString()] += p.Value
	}
	if len(got) != 2 || got["other"] != 51 || got["group_in-flight"] != 1 {
		t.Errorf("group_rejected_total by limit: %v, want map[group_in-flight:1 other:51]", got)
	}
}
