package prom_test

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/bulkhead"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/metrics/prom"
	"github.com/groupexec/groupexec/policy"
)

// Every collector's metrics, with series in each, follow Prometheus's naming
// conventions as its linter reads them.
func TestCollectorsLint(t *testing.T) {
	p, err := policy.New(policy.WithDefaultMaxConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	c := prom.New(prom.Options{Namespace: "app"})
	ex, err := executor.New(p, executor.WithListener(c), executor.WithGroupBreaker(breaker.Settings{}))
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	c.Observe(ex)
	ctx := context.Background()
	_ = ex.Do(ctx, "a", func(context.Context) error { return nil })
	_ = ex.Do(ctx, "a", func(context.Context) error { return errors.New("boom") })

	m := prom.NewBulkhead("payments", "app")
	bh, err := bulkhead.New(1, bulkhead.WithListener(m))
	if err != nil {
		t.Fatal(err)
	}
	m.Observe(bh)
	tr := prom.NewBreakerTransitions("app", nil)
	cb, err := breaker.New(breaker.Settings{Name: "db", OnStateChange: tr.OnStateChange})
	if err != nil {
		t.Fatal(err)
	}
	tr.OnStateChange("db", breaker.StateClosed, breaker.StateOpen)

	for name, col := range map[string]prometheus.Collector{"Collector": c, "Bulkhead": m,
		"Breakers": prom.NewBreakers("app", cb), "BreakerTransitions": tr} {
		problems, err := testutil.CollectAndLint(col)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, p := range problems {
			t.Errorf("%s: %s: %s", name, p.Metric, p.Text)
		}
	}
}
