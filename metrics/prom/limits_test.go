package prom_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/metrics/prom"
	"github.com/groupexec/groupexec/policy"
)

// The limits and the group breakers' states are exported, as metrics/otel
// exports them: for the labelled groups the executor keeps, not for a
// reclaimed one nor for OtherGroup, whose remainder has no one limit.
func TestLimitsAndBreakerState(t *testing.T) {
	p, err := policy.New(policy.WithGlobalMaxInFlight(7), policy.WithDefaultMaxInFlight(5), policy.WithDefaultMaxConcurrency(2))
	if err != nil {
		t.Fatal(err)
	}
	c := prom.New(prom.Options{Labelled: func(g string) bool { return g != "d" }})
	clk := clock.NewFake(time.Unix(0, 0))
	ex, err := executor.New(p, executor.WithListener(c), executor.WithGroupBreaker(breaker.Settings{Clock: clk, Timeout: time.Second,
		ReadyToTrip: func(n breaker.Counts) bool { return n.ConsecutiveFailures >= 1 }}))
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	c.Observe(ex)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)

	ctx := context.Background()
	ok := func(context.Context) error { return nil }
	_ = ex.Do(ctx, "a", func(context.Context) error { return errors.New("boom") }) // opens a's breaker
	for _, g := range []string{"b", "c", "d"} {
		if err := ex.Do(ctx, g, ok); err != nil {
			t.Fatal(err)
		}
	}
	if err := ex.SetGroupLimits("b", policy.GroupLimits{MaxInFlight: 3, MaxConcurrency: 1, Share: 1}); err != nil {
		t.Fatal(err)
	}
	if !ex.EvictGroup("c") {
		t.Fatal("c not evicted")
	}

	want := `
# HELP executor_global_max_in_flight The global in-flight limit, in permits; UNLIMITED (policy.Unlimited) when unlimited.
# TYPE executor_global_max_in_flight gauge
executor_global_max_in_flight 7
# HELP group_breaker_state The group's circuit breaker: 0 closed, 1 open, 2 half-open.
# TYPE group_breaker_state gauge
group_breaker_state{group="a"} 1
group_breaker_state{group="b"} 0
# HELP group_max_concurrency The group's concurrency limit, in permits; UNLIMITED (policy.Unlimited) when unlimited.
# TYPE group_max_concurrency gauge
group_max_concurrency{group="a"} 2
group_max_concurrency{group="b"} 1
# HELP group_max_in_flight The group's in-flight limit (its bulkhead), in permits; UNLIMITED (policy.Unlimited) when unlimited.
# TYPE group_max_in_flight gauge
group_max_in_flight{group="a"} 5
group_max_in_flight{group="b"} 3
`
	// The help texts give policy.Unlimited as this platform's int has it.
	want = strings.ReplaceAll(want, "UNLIMITED", strconv.Itoa(policy.Unlimited))
	if err := testutil.GatherAndCompare(reg, stringsReader(want), "executor_global_max_in_flight",
		"group_max_in_flight", "group_max_concurrency", "group_breaker_state"); err != nil {
		t.Error(err)
	}
}

// A limit that bounds nothing, policy.Unlimited (the default global
// in-flight limit), reads as the number the help text gives, which
// Prometheus's float64 shows as 9.223372036854776e+18.
func TestUnlimitedLimits(t *testing.T) {
	if strconv.IntSize != 64 {
		t.Skip("policy.Unlimited is math.MaxInt: the documented number is a 64-bit platform's")
	}
	p, err := policy.New(policy.WithDefaultMaxInFlight(policy.Unlimited), policy.WithDefaultMaxConcurrency(policy.Unlimited))
	if err != nil {
		t.Fatal(err)
	}
	c := prom.New(prom.Options{})
	ex, err := executor.New(p, executor.WithListener(c))
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	c.Observe(ex)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	if err := ex.Do(context.Background(), "a", func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}

	want := `
# HELP executor_global_max_in_flight The global in-flight limit, in permits; 9223372036854775807 (policy.Unlimited) when unlimited.
# TYPE executor_global_max_in_flight gauge
executor_global_max_in_flight 9.223372036854776e+18
# HELP group_max_concurrency The group's concurrency limit, in permits; 9223372036854775807 (policy.Unlimited) when unlimited.
# TYPE group_max_concurrency gauge
group_max_concurrency{group="a"} 9.223372036854776e+18
# HELP group_max_in_flight The group's in-flight limit (its bulkhead), in permits; 9223372036854775807 (policy.Unlimited) when unlimited.
# TYPE group_max_in_flight gauge
group_max_in_flight{group="a"} 9.223372036854776e+18
`
	if err := testutil.GatherAndCompare(reg, stringsReader(want), "executor_global_max_in_flight",
		"group_max_in_flight", "group_max_concurrency"); err != nil {
		t.Error(err)
	}
	if v := testutil.ToFloat64(gauge(c, "group_max_in_flight", "a")); v != 9223372036854775807 {
		t.Errorf("group_max_in_flight %v, want 9223372036854775807, as PromQL reads that literal", v)
	}
}
