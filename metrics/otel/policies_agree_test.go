package otel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/bulkhead"
	"github.com/groupexec/groupexec/clock"
	gotel "github.com/groupexec/groupexec/metrics/otel"
	"github.com/groupexec/groupexec/metrics/prom"
)

// bulkheadBoth passes every event to the two exporters.
type bulkheadBoth struct {
	p *prom.Bulkhead
	o *gotel.Bulkhead
}

func (b bulkheadBoth) OnEvent(e bulkhead.Event) { b.p.OnEvent(e); b.o.OnEvent(e) }

// A bulkhead and breakers observed by both exporters give the same series
// under the same names and labels; prom's counters still at 0, which it
// exports from the start, are the only series otel lacks.
func TestPromAndOtelAgreeOnPolicies(t *testing.T) {
	mp, reader := newProvider()
	reg := prometheus.NewPedanticRegistry()
	ob, err := gotel.NewBulkhead(mp, "payments", "app")
	if err != nil {
		t.Fatal(err)
	}
	defer ob.Unregister()
	pb := prom.NewBulkhead("payments", "app")
	b, err := bulkhead.New(1, bulkhead.WithListener(bulkheadBoth{pb, ob}), bulkhead.WithQueue(1, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	ob.Observe(b)
	pb.Observe(b)

	ot, err := gotel.NewBreakerTransitions(mp, "app", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ot.Unregister()
	tr := prom.NewBreakerTransitions("app", ot.OnStateChange)
	clk := clock.NewFake(time.Unix(0, 0))
	cb, err := breaker.New(breaker.Settings{Name: "db", Clock: clk, Timeout: time.Second, OnStateChange: tr.OnStateChange,
		ReadyToTrip: func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 2 }})
	if err != nil {
		t.Fatal(err)
	}
	obr, err := gotel.ObserveBreakers(mp, "app", cb)
	if err != nil {
		t.Fatal(err)
	}
	defer obr.Unregister()
	reg.MustRegister(pb, prom.NewBreakers("app", cb), tr)

	ctx := context.Background()
	p, _ := b.TryAcquire(ctx, 1)
	_, _ = b.TryAcquire(ctx, 1) // at capacity
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, _ = b.Acquire(cctx, 1) // cancelled
	fail := func() (int, error) { return 0, errors.New("down") }
	_, _ = breaker.Execute(cb, fail)
	_, _ = breaker.Execute(cb, fail) // opens
	clk.Advance(time.Second)
	_, _ = breaker.Execute(cb, fail) // half-opens, and opens again

	ov := otelValues(collect(t, reader))
	sameSeries(t, promValues(t, reg), ov, true)
	if len(ov) < 12 {
		t.Errorf("otel gave %d series, want every instrument's: %v", len(ov), ov)
	}
	b.Release(p)
}
