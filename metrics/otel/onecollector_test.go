package otel_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/groupexec/groupexec/bulkhead"
	"github.com/groupexec/groupexec/executor"
	gotel "github.com/groupexec/groupexec/metrics/otel"
	"github.com/groupexec/groupexec/policy"
)

// panicOf returns what f panics with, nil if it returns.
func panicOf(f func()) (v any) {
	defer func() { v = recover() }()
	f()
	return nil
}

// A Collector is one executor's, as in metrics/prom: made the listener of
// two and told to Observe both, it summed their counters and observed the
// levels and limits of whichever it observed last. Observing a second
// executor panics, naming the cause; observing the same one again is
// harmless.
func TestCollectorObservesOneExecutor(t *testing.T) {
	mp, reader := newProvider()
	c, err := gotel.New(mp, gotel.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Unregister()
	p, err := policy.New()
	if err != nil {
		t.Fatal(err)
	}
	one, err := executor.New(p, executor.WithListener(c))
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	two, err := executor.New(p, executor.WithListener(c))
	if err != nil {
		t.Fatal(err)
	}
	defer two.Close()
	c.Observe(one)
	if v := panicOf(func() { c.Observe(one) }); v != nil {
		t.Fatalf("Observe of the executor observed already panicked: %v", v)
	}
	v := panicOf(func() { c.Observe(two) })
	if msg := fmt.Sprint(v); v == nil || !strings.Contains(msg, "otel: Collector.Observe") || !strings.Contains(msg, "another executor") {
		t.Fatalf("Observe of a second executor: panic %v, want one saying the Collector observes another executor", v)
	}
	// Still the first one's levels, read while it runs a task (read after
	// the task, outside it: a test's Fatal belongs to its own goroutine).
	var rm metricdata.ResourceMetrics
	var collected error
	if err := one.Do(context.Background(), "a", func(ctx context.Context) error {
		collected = reader.Collect(ctx, &rm)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if collected != nil {
		t.Fatal(collected)
	}
	if got := (reading{t, rm}).value("executor_running_permits", nil); got != 1 {
		t.Errorf("executor_running_permits = %v while the first executor runs a task, want 1", got)
	}
}

// An Observe of no executor is a mistake, said at once.
func TestCollectorObserveNilPanics(t *testing.T) {
	mp, _ := newProvider()
	c, err := gotel.New(mp, gotel.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Unregister()
	if v := panicOf(func() { c.Observe(nil) }); v == nil || !strings.Contains(fmt.Sprint(v), "nil") {
		t.Fatalf("Observe(nil): panic %v, want one naming the nil executor", v)
	}
}

// A Bulkhead is one bulkhead's, as a Collector is one executor's: the
// listener of two bulkheads, told to Observe both, summed their counters
// under one name and observed the levels of the one observed last.
func TestBulkheadObservesOneBulkhead(t *testing.T) {
	mp, reader := newProvider()
	m, err := gotel.NewBulkhead(mp, "payments", "")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Unregister()
	one, err := bulkhead.New(1, bulkhead.WithListener(m))
	if err != nil {
		t.Fatal(err)
	}
	two, err := bulkhead.New(5, bulkhead.WithListener(m))
	if err != nil {
		t.Fatal(err)
	}
	m.Observe(one)
	if v := panicOf(func() { m.Observe(one) }); v != nil {
		t.Fatalf("Observe of the bulkhead observed already panicked: %v", v)
	}
	v := panicOf(func() { m.Observe(two) })
	if msg := fmt.Sprint(v); v == nil || !strings.Contains(msg, "otel: Bulkhead.Observe") || !strings.Contains(msg, "another bulkhead") {
		t.Fatalf("Observe of a second bulkhead: panic %v, want one saying the Bulkhead observes another bulkhead", v)
	}
	if v := panicOf(func() { m.Observe(nil) }); v == nil || !strings.Contains(fmt.Sprint(v), "nil") {
		t.Fatalf("Observe(nil): panic %v, want one naming the nil bulkhead", v)
	}
	if got := collect(t, reader).value("bulkhead_limit_permits", map[string]string{"bulkhead": "payments"}); got != 1 {
		t.Errorf("bulkhead_limit_permits = %v, want the first bulkhead's, 1", got)
	}
}
