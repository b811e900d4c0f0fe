package otel_test

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/groupexec/groupexec/bulkhead"
	gotel "github.com/groupexec/groupexec/metrics/otel"
)

// A bulkhead's numbers as OpenTelemetry instruments, under the names
// metrics/prom gives them: the Bulkhead is the bulkhead's Listener, for the
// counters, and Observe gives it the bulkhead whose levels it reads.
func ExampleNewBulkhead() {
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	m, err := gotel.NewBulkhead(provider, "payments", "")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Unregister()
	b, _ := bulkhead.New(1, bulkhead.WithListener(m))
	m.Observe(b)

	ctx := context.Background()
	p, _ := b.TryAcquire(ctx, 1)
	_, err = b.TryAcquire(ctx, 1)
	fmt.Println(err)

	var rm metricdata.ResourceMetrics
	reader.Collect(ctx, &rm)
	for _, name := range []string{"bulkhead_in_flight_permits", "bulkhead_acquired_total", "bulkhead_rejected_total"} {
		for _, sm := range rm.ScopeMetrics {
			for _, mt := range sm.Metrics {
				if sum, ok := mt.Data.(metricdata.Sum[int64]); ok && mt.Name == name {
					for _, pt := range sum.DataPoints {
						fmt.Printf("%s{%s} %d\n", name, attrs(pt.Attributes), pt.Value)
					}
				}
			}
		}
	}
	_ = b.Release(p)
	// Output:
	// bulkhead: at capacity (1 of 1 in flight, 1 requested)
	// bulkhead_in_flight_permits{bulkhead=payments} 1
	// bulkhead_acquired_total{bulkhead=payments} 1
	// bulkhead_rejected_total{bulkhead=payments,code=RB_ERR_AT_CAPACITY} 1
}

// attrs prints a data point's attributes as name=value, in name order.
func attrs(s attribute.Set) string {
	var out string
	for i, kv := range s.ToSlice() {
		if i > 0 {
			out += ","
		}
		out += string(kv.Key) + "=" + kv.Value.String()
	}
	return out
}
