package prom_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/groupexec/groupexec/bulkhead"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/metrics/prom"
	"github.com/groupexec/groupexec/policy"
)

// panicOf returns what f panics with, nil if it returns.
func panicOf(f func()) (v any) {
	defer func() { v = recover() }()
	f()
	return nil
}

// A Collector is one executor's: made the listener of two and told to
// Observe both, it summed their counters under one set of names and showed
// the levels and limits of whichever it observed last, series that no
// query could make sense of. Observing a second executor panics, naming
// the cause; observing the same one again is harmless.
func TestCollectorObservesOneExecutor(t *testing.T) {
	p, err := policy.New()
	if err != nil {
		t.Fatal(err)
	}
	c := prom.New(prom.Options{})
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
	if msg := fmt.Sprint(v); v == nil || !strings.Contains(msg, "prom: Collector.Observe") || !strings.Contains(msg, "another executor") {
		t.Fatalf("Observe of a second executor: panic %v, want one saying the Collector observes another executor", v)
	}
	// Still the first one's levels, read while it runs a task (read after
	// the task, outside it: a test's Fatal belongs to its own goroutine).
	var running float64
	if err := one.Do(context.Background(), "a", func(context.Context) error {
		running = testutil.ToFloat64(gauge(c, "executor_running_permits", ""))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if running != 1 {
		t.Errorf("executor_running_permits = %v while the first executor runs a task, want 1", running)
	}
}

// An Observe of no executor is a mistake, said at once: it would export
// no level, without a word, until the program's dashboards showed it.
func TestCollectorObserveNilPanics(t *testing.T) {
	c := prom.New(prom.Options{})
	if v := panicOf(func() { c.Observe(nil) }); v == nil || !strings.Contains(fmt.Sprint(v), "nil") {
		t.Fatalf("Observe(nil): panic %v, want one naming the nil executor", v)
	}
}

// A Bulkhead is one bulkhead's, as a Collector is one executor's: the
// listener of two bulkheads, told to Observe both, summed their counters
// under one name and showed the levels of the one observed last.
func TestBulkheadObservesOneBulkhead(t *testing.T) {
	m := prom.NewBulkhead("payments", "")
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
	if msg := fmt.Sprint(v); v == nil || !strings.Contains(msg, "prom: Bulkhead.Observe") || !strings.Contains(msg, "another bulkhead") {
		t.Fatalf("Observe of a second bulkhead: panic %v, want one saying the Bulkhead observes another bulkhead", v)
	}
	if v := panicOf(func() { prom.NewBulkhead("x", "").Observe(nil) }); v == nil || !strings.Contains(fmt.Sprint(v), "nil") {
		t.Fatalf("Observe(nil): panic %v, want one naming the nil bulkhead", v)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	if got := mustValue(t, reg, "bulkhead_limit_permits", map[string]string{"bulkhead": "payments"}); got != 1 {
		t.Errorf("bulkhead_limit_permits = %v, want the first bulkhead's, 1", got)
	}
}
