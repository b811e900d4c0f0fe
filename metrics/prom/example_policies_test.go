package prom_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/bulkhead"
	"github.com/groupexec/groupexec/metrics/prom"
)

// printSeries prints the series of reg's metrics whose names are given, as
// a scrape shows them, without their help and type lines, and without the
// counters still at 0.
func printSeries(reg prometheus.Gatherer, names ...string) {
	mfs, err := reg.Gather()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, mf := range mfs {
		if !slices.Contains(names, mf.GetName()) {
			continue
		}
		for _, m := range mf.Metric {
			if m.GetCounter() != nil && m.GetCounter().GetValue() == 0 {
				continue
			}
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			fmt.Printf("%s{%s} %v\n", mf.GetName(), strings.Join(labels, ","), v)
		}
	}
}

func ExampleNewBulkhead() {
	m := prom.NewBulkhead("payments", "")
	b, _ := bulkhead.New(1, bulkhead.WithListener(m))
	m.Observe(b)
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)

	ctx := context.Background()
	p, _ := b.TryAcquire(ctx, 1)
	_, err := b.TryAcquire(ctx, 1)
	fmt.Println(err)
	printSeries(reg, "bulkhead_in_flight_permits", "bulkhead_acquired_total", "bulkhead_rejected_total")
	b.Release(p)
	// Output:
	// bulkhead: at capacity (1 of 1 in flight, 1 requested)
	// bulkhead_acquired_total{bulkhead="payments"} 1
	// bulkhead_in_flight_permits{bulkhead="payments"} 1
	// bulkhead_rejected_total{bulkhead="payments",code="RB_ERR_AT_CAPACITY"} 1
}

func ExampleNewBreakers() {
	cb, _ := breaker.New(breaker.Settings{Name: "db",
		ReadyToTrip: func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 2 }})
	reg := prometheus.NewRegistry()
	reg.MustRegister(prom.NewBreakers("", cb))

	_, _ = breaker.Execute(cb, func() (int, error) { return 1, nil })
	_, _ = breaker.Execute(cb, func() (int, error) { return 0, errors.New("down") })
	printSeries(reg, "breaker_state", "breaker_requests", "breaker_failures")
	// Output:
	// breaker_failures{breaker="db"} 1
	// breaker_requests{breaker="db"} 2
	// breaker_state{breaker="db"} 0
}

func ExampleNewBreakerTransitions() {
	tr := prom.NewBreakerTransitions("", func(name string, from, to breaker.State) {
		fmt.Printf("%s: %s -> %s\n", name, from, to)
	})
	cb, _ := breaker.New(breaker.Settings{Name: "db", OnStateChange: tr.OnStateChange,
		ReadyToTrip: func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 1 }})
	reg := prometheus.NewRegistry()
	reg.MustRegister(tr)

	_, _ = breaker.Execute(cb, func() (int, error) { return 0, errors.New("down") })
	printSeries(reg, "breaker_transitions_total")
	// Output:
	// db: closed -> open
	// breaker_transitions_total{breaker="db",from="closed",to="open"} 1
}
