package executor_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/internal/clocktest"
)

// An injected clock that steps back while a task runs or waits gives no
// negative durations: to the executor, time stands still until the clock
// passes its latest reading again.
func TestClockSteppingBackGivesNoNegativeDuration(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktest.NewStepped(t0.Add(time.Hour))
	var mu sync.Mutex
	var events []executor.Event
	record := func(e executor.Event) { mu.Lock(); events = append(events, e); mu.Unlock() }
	ex := newExec(t, nil, executor.WithClock(clk), executor.WithListener(executor.ListenerFuncs{Completed: record}))

	if err := ex.Do(bg, "g", func(context.Context) error { clk.Set(t0); return nil }); err != nil {
		t.Fatal(err)
	}
	clk.Set(t0.Add(time.Hour))
	h := submit(t, ex, executor.Task[string]{Group: "g", Fn: func(context.Context) (string, error) {
		clk.Set(t0)
		return "", nil
	}})
	r := wait(t, h)
	if r.Duration < 0 || r.Queued < 0 {
		t.Errorf("Submit's result: queued %v, ran %v; want durations >= 0", r.Queued, r.Duration)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(events) != 2 {
		t.Fatalf("%d completions heard, want 2", len(events))
	}
	for i, e := range events {
		if e.Duration < 0 || e.Queued < 0 {
			t.Errorf("completion %d: queued %v, ran %v; want durations >= 0", i, e.Queued, e.Duration)
		}
	}
}
