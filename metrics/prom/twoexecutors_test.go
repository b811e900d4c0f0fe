package prom_test

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/metrics/prom"
	"github.com/groupexec/groupexec/policy"
)

// observed returns an executor and its Collector, with n tasks of group a
// completed.
func observed(t *testing.T, o prom.Options, n int) *prom.Collector {
	t.Helper()
	p, err := policy.New()
	if err != nil {
		t.Fatal(err)
	}
	c := prom.New(o)
	ex, err := executor.New(p, executor.WithListener(c))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ex.Close() })
	c.Observe(ex)
	for range n {
		if err := ex.Do(context.Background(), "a", func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// Two executors' Collectors go in one registry under distinct namespaces,
// or each wrapped with the same label; under the same names, the second
// registration fails, and with the label on one only, too.
func TestTwoExecutorsInOneRegistry(t *testing.T) {
	completed := map[string]string{"group": "a", "status": "success"}
	t.Run("same names", func(t *testing.T) {
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(observed(t, prom.Options{}, 1))
		err := reg.Register(observed(t, prom.Options{}, 2))
		if are := (prometheus.AlreadyRegisteredError{}); !errors.As(err, &are) {
			t.Errorf("the second Register: %v, want an AlreadyRegisteredError", err)
		}
		func() {
			defer func() {
				if recover() == nil {
					t.Error("MustRegister of the second did not panic")
				}
			}()
			reg.MustRegister(observed(t, prom.Options{}, 2))
		}()
	})
	t.Run("namespaces", func(t *testing.T) {
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(observed(t, prom.Options{Namespace: "one"}, 1), observed(t, prom.Options{Namespace: "two"}, 2))
		if got := mustValue(t, reg, "one_group_completed_total", completed); got != 1 {
			t.Errorf("one: %v completed, want 1", got)
		}
		if got := mustValue(t, reg, "two_group_completed_total", completed); got != 2 {
			t.Errorf("two: %v completed, want 2", got)
		}
	})
	t.Run("wrapped", func(t *testing.T) {
		reg := prometheus.NewPedanticRegistry()
		prometheus.WrapRegistererWith(prometheus.Labels{"executor": "one"}, reg).MustRegister(observed(t, prom.Options{}, 1))
		prometheus.WrapRegistererWith(prometheus.Labels{"executor": "two"}, reg).MustRegister(observed(t, prom.Options{}, 2))
		for ex, want := range map[string]float64{"one": 1, "two": 2} {
			l := map[string]string{"executor": ex, "group": "a", "status": "success"}
			if got := mustValue(t, reg, "group_completed_total", l); got != want {
				t.Errorf("%s: %v completed, want %v", ex, got, want)
			}
		}
	})
	t.Run("wrapped one only", func(t *testing.T) {
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(observed(t, prom.Options{}, 1))
		if err := prometheus.WrapRegistererWith(prometheus.Labels{"executor": "two"}, reg).Register(observed(t, prom.Options{}, 2)); err == nil {
			t.Error("a Collector with a label the other lacks was registered")
		}
	})
}
