package prom_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/metrics/prom"
	"github.com/groupexec/groupexec/policy"
)

// histogram returns the sample count and sum of the histogram name{group}.
func histogram(t *testing.T, reg *prometheus.Registry, name, group string) (uint64, float64) {
	t.Helper()
	m := metricOf(t, reg, name, group)
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}

// A task refused and run by its submitter (CallerRuns, or a rejection
// handler's RunInCaller) starts as soon as it is refused: its queued time
// is not the executor's age. The clock stands still from the submission on,
// so every queued time is 0.
func TestQueuedTimeOfTasksRunByTheCaller(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []executor.Option
	}{
		{"CallerRuns", nil},
		{"RunInCaller", []executor.Option{executor.WithRejectionHandler(func(r *executor.Rejection) error { r.RunInCaller(); return nil })}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := policy.New(policy.WithDefaultMaxConcurrency(1), policy.WithDefaultMaxInFlight(1),
				policy.WithRejectionPolicy(policy.CallerRuns))
			if err != nil {
				t.Fatal(err)
			}
			clk := clock.NewFake(time.Unix(0, 0))
			c := prom.New(prom.Options{})
			ex, err := executor.New(p, append([]executor.Option{executor.WithListener(c), executor.WithClock(clk)}, tc.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			c.Observe(ex)
			reg := prometheus.NewPedanticRegistry()
			reg.MustRegister(c)
			clk.Advance(time.Hour) // the executor's age
			ctx := context.Background()
			release, started := make(chan struct{}), make(chan struct{})
			h, err := executor.Submit(ex, ctx, executor.Task[int]{Group: "a", Fn: func(context.Context) (int, error) {
				close(started)
				<-release
				return 0, nil
			}})
			if err != nil {
				t.Fatal(err)
			}
			<-started
			h2, _ := executor.Submit(ex, ctx, executor.Task[int]{Group: "a", Fn: func(context.Context) (int, error) { return 0, nil }})
			ex.Go(ctx, "a", func(context.Context) error { return nil })
			ex.Do(ctx, "a", func(context.Context) error { return nil })
			close(release)
			h.Wait(ctx)
			ex.Close()
			if r, _ := h2.Result(); r.Queued != 0 {
				t.Errorf("Submit's Result.Queued = %v, want 0", r.Queued)
			}
			if n, sum := histogram(t, reg, "group_queued_seconds", "a"); n != 4 || sum != 0 {
				t.Errorf("group_queued_seconds: %d samples, sum %vs; want 4, 0s", n, sum)
			}
		})
	}
}
