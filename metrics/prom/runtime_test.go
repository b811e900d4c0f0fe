package prom_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/metrics/prom"
	"github.com/groupexec/groupexec/policy"
)

// A task that ran is timed even when it took no time on the executor's
// clock (a clock that does not move, or a coarse one), as in metrics/otel:
// only a task cancelled before it started has no run time.
func TestRunHistogramCountsTasksThatRanForZero(t *testing.T) {
	p, err := policy.New()
	if err != nil {
		t.Fatal(err)
	}
	c := prom.New(prom.Options{})
	ex, err := executor.New(p, executor.WithListener(c), executor.WithClock(clock.NewFake(time.Unix(0, 0))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ex.Close() })
	c.Observe(ex)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	ctx := context.Background()
	ex.Do(ctx, "a", func(context.Context) error { return nil })
	ex.Do(ctx, "a", func(context.Context) error { return errors.New("boom") })
	gs, _ := ex.GroupStats("a")
	got, _ := histogram(t, reg, "group_run_seconds", "a")
	if want := gs.Succeeded + gs.Failed; got != want || want != 2 {
		t.Errorf("run times %d, want %d (%+v)", got, want, gs.TaskCounts)
	}
}
