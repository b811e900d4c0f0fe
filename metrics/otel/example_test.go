package otel_test

import (
	"context"
	"errors"
	"fmt"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/groupexec/groupexec/executor"
	gotel "github.com/groupexec/groupexec/metrics/otel"
	"github.com/groupexec/groupexec/policy"
)

// The executor's outcomes as OpenTelemetry counters, read here with the
// SDK's manual reader (a program passes its own MeterProvider).
func Example() {
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	c, err := gotel.New(provider, gotel.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	p, _ := policy.New()
	ex, _ := executor.New(p, executor.WithListener(c))
	defer ex.Close()
	c.Observe(ex)

	for _, fail := range []bool{false, false, true} {
		ex.Do(context.Background(), "tenant-a", func(context.Context) error {
			if fail {
				return errors.New("boom")
			}
			return nil
		})
	}

	var rm metricdata.ResourceMetrics
	reader.Collect(context.Background(), &rm)
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if m.Name != "group_completed_total" {
			continue
		}
		for _, status := range []string{"success", "failed"} {
			for _, pt := range m.Data.(metricdata.Sum[int64]).DataPoints {
				if v, _ := pt.Attributes.Value("status"); v.AsString() == status {
					g, _ := pt.Attributes.Value("group")
					fmt.Printf("group_completed_total{group=%s,status=%s} %d\n", g.AsString(), status, pt.Value)
				}
			}
		}
	}
	// Output:
	// group_completed_total{group=tenant-a,status=success} 2
	// group_completed_total{group=tenant-a,status=failed} 1
}

// A Collector made for an executor that the program closes before it ends
// (one per job, or one rebuilt as the configuration changes) is
// unregistered with it. Left registered, it would be kept by the provider,
// with the closed executor, for as long as the provider lives, exporting
// the executor's last levels, and the next job's Collector in the
// namespace would be refused (ErrNamespaceInUse).
func ExampleCollector_Unregister() {
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	for job := range 2 {
		if err := runJob(provider, job); err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("job %d done\n", job)
	}
	// Output:
	// job 0 done
	// job 1 done
}

// runJob runs one job on an executor of its own, exported under the
// namespace jobs while it lasts.
func runJob(provider *sdkmetric.MeterProvider, job int) error {
	c, err := gotel.New(provider, gotel.Options{Namespace: "jobs"})
	if err != nil {
		return err
	}
	defer c.Unregister() // deferred first, so run last: once the executor is closed
	p, err := policy.New()
	if err != nil {
		return err
	}
	ex, err := executor.New(p, executor.WithListener(c))
	if err != nil {
		return err
	}
	defer ex.Close()
	c.Observe(ex)
	return ex.Do(context.Background(), fmt.Sprintf("job-%d", job), func(context.Context) error { return nil })
}
