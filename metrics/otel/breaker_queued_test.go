package otel_test

import (
	"context"
	"errors"
	"testing"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/internal/adaptertest"
	gotel "github.com/groupexec/groupexec/metrics/otel"
	"github.com/groupexec/groupexec/policy"
)

// A task that waited in its group's queue when the group's breaker opened,
// refused as it would start, is counted once, as a refusal by the breaker
// at admission is, under limit="circuit_breaker"; it records no wait in
// group_queued_seconds (it never started), and leaves the waiting levels.
func TestQueuedTaskRefusedByTheBreakerCountedAsAtAdmission(t *testing.T) {
	mp, reader := newProvider()
	c, err := gotel.New(mp, gotel.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Unregister()
	p, err := policy.New(policy.WithDefaultMaxConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	ex, err := executor.New(p, executor.WithListener(c), adaptertest.TrippingBreaker())
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	c.Observe(ex)

	adaptertest.RefuseQueuedByBreaker(t, ex, "g")

	check := func(when string, breakerRefusals int64) {
		t.Helper()
		r := collect(t, reader)
		if got := r.value("group_rejected_total", map[string]string{"group": "g", "limit": "circuit_breaker"}); got != breakerRefusals {
			t.Errorf("%s: group_rejected_total{g, circuit_breaker} %d, want %d", when, got, breakerRefusals)
		}
		if got := r.sum("group_rejected_total", "g"); got != breakerRefusals {
			t.Errorf("%s: group_rejected_total{g} sums to %d, want %d, all by the breaker", when, got, breakerRefusals)
		}
		if n, _ := r.histogram("group_queued_seconds", group("g")); n != 1 {
			t.Errorf("%s: group_queued_seconds{g} counts %d waits, want the first task's alone", when, n)
		}
		if got := r.value("group_waiting_tasks", group("g")); got != 0 {
			t.Errorf("%s: group_waiting_tasks{g} %d, want 0", when, got)
		}
		if got := r.value("queue_depth", map[string]string{"queue": "global"}); got != 0 {
			t.Errorf("%s: queue_depth %d, want 0", when, got)
		}
	}
	check("queued then refused", 1)
	var re *executor.RejectedError
	if err := ex.Do(context.Background(), "g", func(context.Context) error { return nil }); !errors.As(err, &re) || re.Limit != executor.LimitBreaker {
		t.Fatalf("Do at admission: %v, want a refusal by the open breaker", err)
	}
	check("and one refused at admission", 2)
}
