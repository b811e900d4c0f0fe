package otel_test

import (
	"context"
	"testing"

	"github.com/groupexec/groupexec/bulkhead"
	"github.com/groupexec/groupexec/executor"
	gotel "github.com/groupexec/groupexec/metrics/otel"
	"github.com/groupexec/groupexec/policy"
)

// A Collector unregistered, as its doc says, once its executor is closed
// counts nothing more: the closed executor still refuses the tasks it is
// given, and those refusals would be counted into the instruments that the
// next Collector in the namespace reports for its own executor.
func TestUnregisteredCollectorCountsNoMore(t *testing.T) {
	mp, reader := newProvider()
	p, _ := policy.New()
	first, err := gotel.New(mp, gotel.Options{})
	if err != nil {
		t.Fatal(err)
	}
	old, _ := executor.New(p, executor.WithListener(first))
	first.Observe(old)
	old.Close()
	if err := first.Unregister(); err != nil {
		t.Fatal(err)
	}

	next, err := gotel.New(mp, gotel.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer next.Unregister()
	ex, _ := executor.New(p, executor.WithListener(next))
	defer ex.Close()
	next.Observe(ex)
	if err := ex.Do(context.Background(), "g", func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := old.Do(context.Background(), "g", func(context.Context) error { return nil }); err == nil {
		t.Fatal("a closed executor ran a task")
	}

	r := collect(t, reader)
	gs, _ := ex.GroupStats("g")
	if got := r.sum("group_rejected_total", "g"); uint64(got) != gs.Rejected {
		t.Errorf("group_rejected_total{g} = %d; the observed executor refused %d", got, gs.Rejected)
	}
	if got := r.value("group_completed_total", map[string]string{"group": "g", "status": "success"}); uint64(got) != gs.Succeeded {
		t.Errorf("group_completed_total{g,success} = %d; the observed executor completed %d", got, gs.Succeeded)
	}
}

// Likewise a Bulkhead unregistered counts nothing more of its bulkhead,
// whose name the next Bulkhead may take.
func TestUnregisteredBulkheadCountsNoMore(t *testing.T) {
	mp, reader := newProvider()
	first, err := gotel.NewBulkhead(mp, "db", "")
	if err != nil {
		t.Fatal(err)
	}
	old, _ := bulkhead.New(1, bulkhead.WithListener(first))
	first.Observe(old)
	if err := first.Unregister(); err != nil {
		t.Fatal(err)
	}

	next, err := gotel.NewBulkhead(mp, "db", "")
	if err != nil {
		t.Fatal(err)
	}
	defer next.Unregister()
	b, _ := bulkhead.New(1, bulkhead.WithListener(next))
	next.Observe(b)
	pm, err := b.TryAcquire(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release(pm)
	for range 2 {
		pm, err := old.TryAcquire(context.Background(), 1)
		if err != nil {
			t.Fatal(err)
		}
		old.Release(pm)
	}

	if got := collect(t, reader).value("bulkhead_acquired_total", map[string]string{"bulkhead": "db"}); got != 1 {
		t.Errorf("bulkhead_acquired_total{db} = %d; the observed bulkhead issued 1", got)
	}
}
