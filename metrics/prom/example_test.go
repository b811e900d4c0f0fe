package prom_test

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/metrics/prom"
	"github.com/groupexec/groupexec/policy"
)

func ExampleNew() {
	p, _ := policy.New(policy.WithDefaultMaxConcurrency(2))
	c := prom.New(prom.Options{})
	ex, _ := executor.New(p, executor.WithListener(c))
	defer ex.Close()
	c.Observe(ex)
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)

	ctx := context.Background()
	h, _ := executor.Submit(ex, ctx, executor.Task[int]{Group: "tenant-a", Fn: func(context.Context) (int, error) { return 1, nil }})
	h.Wait(ctx)

	n, _ := testutil.GatherAndCount(reg, "group_completed_total")
	fmt.Println(n, "completed series")
	// Output: 1 completed series
}

// Two executors export into one registry under the same names, told apart
// by a label that WrapRegistererWith adds to every series of each.
func ExampleNew_twoExecutors() {
	reg := prometheus.NewRegistry()
	ctx := context.Background()
	for _, name := range []string{"api", "jobs"} {
		p, _ := policy.New()
		c := prom.New(prom.Options{})
		ex, _ := executor.New(p, executor.WithListener(c))
		defer ex.Close()
		c.Observe(ex)
		prometheus.WrapRegistererWith(prometheus.Labels{"executor": name}, reg).MustRegister(c)
		_ = ex.Do(ctx, "tenant-a", func(context.Context) error { return nil })
	}
	printSeries(reg, "group_completed_total")
	// Output:
	// group_completed_total{executor="api",group="tenant-a",status="success"} 1
	// group_completed_total{executor="jobs",group="tenant-a",status="success"} 1
}
