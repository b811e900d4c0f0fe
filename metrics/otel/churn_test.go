package otel_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/groupexec/groupexec/executor"
	gotel "github.com/groupexec/groupexec/metrics/otel"
	"github.com/groupexec/groupexec/policy"
)

// Collections run while clients churn through more groups than the
// executor keeps (each reclaimed as it goes idle) and more than get series
// of their own, while the executor closes and while the Collector is
// unregistered: no race, no panic, no collection that fails. Once it is
// all still, the counters equal Stats exactly, the labelled groups' and
// OtherGroup's together.
func TestCollectionsDuringChurnCloseAndUnregister(t *testing.T) {
	mp, reader := newProvider()
	c, err := gotel.New(mp, gotel.Options{MaxGroups: 4})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := policy.New(policy.WithGlobalMaxInFlight(4), policy.WithDefaultMaxInFlight(2), policy.WithRejectionPolicy(policy.Abort))
	ex, _ := executor.New(p, executor.WithListener(c), executor.WithMaxIdleGroups(0))
	c.Observe(ex)

	var stop atomic.Bool
	var collectors sync.WaitGroup
	for range 2 {
		collectors.Go(func() {
			for !stop.Load() {
				var rm metricdata.ResourceMetrics
				if err := reader.Collect(context.Background(), &rm); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	var clients sync.WaitGroup
	boom := errors.New("boom")
	for w := range 4 {
		clients.Go(func() {
			for i := range 200 {
				g := fmt.Sprintf("g%d", (w*200+i)%13)
				ex.Do(context.Background(), g, func(context.Context) error {
					if i%3 == 0 {
						return boom
					}
					return nil
				})
			}
		})
	}
	clients.Wait()
	ex.Close()
	// A closed executor refuses what it is given: counted too.
	for i := range 5 {
		ex.Do(context.Background(), fmt.Sprintf("g%d", i), func(context.Context) error { return nil })
	}

	r := collect(t, reader)
	s := ex.Stats()
	var completed, rejected int64
	for _, g := range append([]string{gotel.OtherGroup}, "g0", "g1", "g2", "g3", "g4", "g5", "g6", "g7", "g8", "g9", "g10", "g11", "g12") {
		completed += r.sum("group_completed_total", g)
		rejected += r.sum("group_rejected_total", g)
	}
	if uint64(completed) != s.Succeeded+s.Failed+s.Cancelled || s.Succeeded+s.Failed+s.Cancelled+s.Rejected != 805 {
		t.Errorf("group_completed_total sums to %d; Stats: %d succeeded, %d failed, %d cancelled", completed, s.Succeeded, s.Failed, s.Cancelled)
	}
	if uint64(rejected) != s.Rejected || s.Rejected < 5 {
		t.Errorf("group_rejected_total sums to %d; Stats: %d rejected", rejected, s.Rejected)
	}
	if got := r.value("executor_running_permits", nil); got != 0 {
		t.Errorf("executor_running_permits %d after Close", got)
	}

	if err := c.Unregister(); err != nil { // while the collections go on
		t.Fatal(err)
	}
	if _, ok := collect(t, reader).find("executor_running_permits"); ok {
		t.Error("an unregistered Collector's levels are still exported")
	}
	stop.Store(true)
	collectors.Wait()
}
