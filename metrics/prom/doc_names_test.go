package prom_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/bulkhead"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/metrics/internal/doclist"
	"github.com/groupexec/groupexec/metrics/prom"
	"github.com/groupexec/groupexec/policy"
)

// documentedMetrics reads the metrics the package doc lists, each with its label
// names, so that the list users read is the one checked.
func documentedMetrics(t *testing.T) map[string][]string {
	t.Helper()
	docs, err := doclist.Read("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) < 20 {
		t.Fatalf("read %d metrics from doc.go, want the whole list: %v", len(docs), docs)
	}
	return docs
}

// gathered adds the metric names and label names reg gathers now to got.
func gathered(t *testing.T, reg *prometheus.Registry, got map[string][]string) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		labels := map[string]bool{}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = true
			}
		}
		for _, l := range got[mf.GetName()] {
			labels[l] = true
		}
		got[mf.GetName()] = slices.Sorted(maps.Keys(labels))
	}
}

// The package doc lists every metric the exporters give, with its labels:
// a dashboard built from the list finds each of them, and nothing else.
func TestDocListsEveryMetric(t *testing.T) {
	want := documentedMetrics(t)
	got := map[string][]string{}
	reg := prometheus.NewRegistry()
	ctx := context.Background()

	// An executor with a running task, a waiting one and a refused one.
	p, err := policy.New(policy.WithDefaultMaxConcurrency(1), policy.WithDefaultMaxInFlight(2))
	if err != nil {
		t.Fatal(err)
	}
	c := prom.New(prom.Options{})
	ex, err := executor.New(p, executor.WithListener(c), executor.WithGroupBreaker(breaker.Settings{}))
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	c.Observe(ex)
	reg.MustRegister(c)
	started, release := make(chan struct{}), make(chan struct{})
	first, err := executor.Submit(ex, ctx, executor.Task[int]{Group: "a", Fn: func(context.Context) (int, error) {
		close(started)
		<-release
		return 0, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	<-started
	second, err := executor.Submit(ex, ctx, executor.Task[int]{Group: "a", Fn: func(context.Context) (int, error) { return 0, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if err := ex.Go(ctx, "a", func(context.Context) error { return nil }); !errors.Is(err, executor.ErrRejected) {
		t.Fatalf("third task: %v, want a refusal of the full group", err)
	}
	gathered(t, reg, got)
	close(release)
	for _, h := range []*executor.Handle[int]{first, second} {
		if _, err := h.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// A bulkhead with a refusal, a breaker that tripped.
	bm := prom.NewBulkhead("payments", "")
	b, err := bulkhead.New(1, bulkhead.WithListener(bm))
	if err != nil {
		t.Fatal(err)
	}
	bm.Observe(b)
	permit, err := b.TryAcquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.TryAcquire(ctx, 1); !errors.Is(err, bulkhead.ErrAtCapacity) {
		t.Fatalf("second acquire: %v, want ErrAtCapacity", err)
	}
	tr := prom.NewBreakerTransitions("", nil)
	cb, err := breaker.New(breaker.Settings{Name: "db", OnStateChange: tr.OnStateChange,
		ReadyToTrip: func(breaker.Counts) bool { return true }})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = breaker.Execute(cb, func() (int, error) { return 0, errors.New("down") })
	reg.MustRegister(bm, prom.NewBreakers("", cb), tr)
	gathered(t, reg, got)
	if err := b.Release(permit); err != nil {
		t.Fatal(err)
	}

	for name, labels := range want {
		g, ok := got[name]
		switch {
		case !ok:
			t.Errorf("%s: documented, not exported", name)
		case !slices.Equal(g, labels):
			t.Errorf("%s: labels %v exported, %v documented", name, g, labels)
		}
	}
	for name, labels := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s%v: exported, not documented", name, labels)
		}
	}
}
