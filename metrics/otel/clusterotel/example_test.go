package clusterotel_test

import (
	"context"
	"fmt"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/groupexec/groupexec/cluster/redislimit"
	"github.com/groupexec/groupexec/metrics/otel/clusterotel"
)

// A program passes its *redislimit.Holder; a fixed Stats stands in for one
// here.
func ExampleObserve() {
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	holder := &source{redislimit.Stats{Mode: redislimit.ModeUp, Acquired: 42}}
	reg, err := clusterotel.Observe(provider, holder, "")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer reg.Unregister()

	var rm metricdata.ResourceMetrics
	reader.Collect(context.Background(), &rm)
	for _, m := range rm.ScopeMetrics[0].Metrics {
		switch d := m.Data.(type) {
		case metricdata.Gauge[int64]:
			if m.Name == "cluster_up" {
				fmt.Println(m.Name, d.DataPoints[0].Value)
			}
		case metricdata.Sum[int64]:
			if m.Name == "cluster_permits_acquired_total" {
				fmt.Println(m.Name, d.DataPoints[0].Value)
			}
		}
	}
	// Output:
	// cluster_up 1
	// cluster_permits_acquired_total 42
}
