package prom_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/metrics/prom"
	"github.com/groupexec/groupexec/policy"
)

// Scrapes run beside tasks of many groups, each reclaimed as it goes idle,
// and beside the executor's Close: every scrape succeeds (a pedantic
// registry checks each metric against its description), and the race
// detector finds nothing.
func TestCollectDuringReclaimAndClose(t *testing.T) {
	p, err := policy.New()
	if err != nil {
		t.Fatal(err)
	}
	c := prom.New(prom.Options{MaxGroups: 8})
	ex, err := executor.New(p, executor.WithListener(c), executor.WithMaxIdleGroups(0))
	if err != nil {
		t.Fatal(err)
	}
	c.Observe(ex)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)

	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 200 {
				_ = ex.Do(context.Background(), fmt.Sprint("g", w, "-", i%20), func(context.Context) error { return nil })
			}
		})
	}
	scrape := func() {
		if _, err := reg.Gather(); err != nil {
			t.Error(err)
		}
	}
	for range 2 {
		wg.Go(func() {
			for range 50 {
				scrape()
			}
		})
	}
	wg.Go(func() { _ = ex.Close() })
	wg.Wait()
	scrape()
	if n := len(groupsOf(t, reg, "group_running_tasks")); n > 8+1 {
		t.Errorf("%d group_running_tasks series, want at most MaxGroups (8) and %s", n, prom.OtherGroup)
	}
}

func groupsOf(t *testing.T, reg *prometheus.Registry, name string) []string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var gs []string
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.Metric {
				gs = append(gs, label(m, "group"))
			}
		}
	}
	return gs
}
