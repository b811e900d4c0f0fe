package otel_test

import (
	"testing"
	"time"

	"github.com/groupexec/groupexec/executor"
	gotel "github.com/groupexec/groupexec/metrics/otel"
)

// A negative wait or run time, which an injected clock set back gives a
// task (executor.WithClock: durations are differences of its Now), is
// recorded as 0 s, as metrics/prom records it: OpenTelemetry's histograms
// take non-negative values, and their sum is exported as a monotonic one
// (to Prometheus, a _sum that a negative value would lower, and rate() read
// as a reset).
func TestNegativeDurationsRecordedAsZero(t *testing.T) {
	mp, reader := newProvider()
	c, err := gotel.New(mp, gotel.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Unregister()
	c.OnStarted(executor.Event{Group: "a", Queued: -time.Hour})
	c.OnCompleted(executor.Event{Group: "a", Status: executor.Success, Started: true, Duration: -time.Hour})
	r := collect(t, reader)
	for _, name := range []string{"group_queued_seconds", "group_run_seconds"} {
		if n, sum := r.histogram(name, group("a")); n != 1 || sum != 0 {
			t.Errorf("%s: %d observations summing to %v s, want 1 of 0 s", name, n, sum)
		}
	}
}
