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
