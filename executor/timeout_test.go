package executor_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

func TestQueueTimeoutRejectsWaitingTask(t *testing.T) {
	clk := fakeClock()
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1), policy.WithQueueTimeout(time.Second)}, executor.WithClock(clk))
	g := newGate()
	defer g.open()
	submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("blocker")})
	g.waitStarted(t, 1)
	var ran atomic.Bool
	first := submit(t, ex, executor.Task[int]{Group: "g", ID: "first", Fn: func(context.Context) (int, error) { ran.Store(true); return 0, nil }})
	clk.Advance(400 * time.Millisecond)
	second := submit(t, ex, executor.Task[int]{Group: "g", ID: "second", Fn: func(context.Context) (int, error) { ran.Store(true); return 0, nil }})

	clk.Advance(599 * time.Millisecond) // first has waited 999ms
	if isDone(first) {
		t.Fatal("first timed out early")
	}
	clk.Advance(time.Millisecond) // first's deadline: the timer completes it without any dispatch
	r := wait(t, first)
	if r.Status != executor.Rejected || !errors.Is(r.Err, executor.ErrQueueTimeout) || !errors.Is(r.Err, executor.ErrRejected) {
		t.Fatalf("first = %+v, want Rejected with ErrQueueTimeout", r)
	}
	if r.Queued != time.Second {
		t.Errorf("first waited %v, want 1s", r.Queued)
	}
	if isDone(second) {
		t.Fatal("second timed out with first")
	}
	clk.Advance(400 * time.Millisecond) // second's deadline: the re-armed timer
	if r := wait(t, second); !errors.Is(r.Err, executor.ErrQueueTimeout) {
		t.Fatalf("second = %+v", r)
	}
	if ran.Load() {
		t.Fatal("a timed-out task ran")
	}
	if s := groupStats(t, ex, "g"); s.InFlight != 1 || s.Waiting != 0 || s.Rejected != 2 {
		t.Errorf("stats %+v", s)
	}
}

// TestQueueTimeoutErrorNamesTheLimitOnce checks that a queue timeout's
// refusal reads as one, not as the limit followed by the same cause.
func TestQueueTimeoutErrorNamesTheLimitOnce(t *testing.T) {
	clk := fakeClock()
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1), policy.WithQueueTimeout(time.Second)}, executor.WithClock(clk))
	g := newGate()
	defer g.open()
	submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("blocker")})
	g.waitStarted(t, 1)
	h := submit(t, ex, executor.Task[int]{Group: "g", ID: "late", Fn: func(context.Context) (int, error) { return 0, nil }})
	clk.Advance(time.Second)
	r := wait(t, h)
	const want = `executor: task "late" of group "g" rejected by queue timeout`
	if r.Err == nil || r.Err.Error() != want {
		t.Errorf("err = %v, want %s", r.Err, want)
	}
	if !errors.Is(r.Err, executor.ErrQueueTimeout) || !errors.Is(r.Err, executor.ErrRejected) {
		t.Errorf("err = %v, want it to match ErrQueueTimeout and ErrRejected", r.Err)
	}
}

// TestExpiredTaskNeverRunsWhenRoomFrees races the timer with a release: a
// task past its deadline must be rejected by whichever sees it first.
func TestExpiredTaskNeverRunsWhenRoomFrees(t *testing.T) {
	for range 50 {
		clk := fakeClock()
		ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1), policy.WithQueueTimeout(time.Second)}, executor.WithClock(clk))
		g := newGate()
		submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("blocker")})
		g.waitStarted(t, 1)
		var ran atomic.Bool
		h := submit(t, ex, executor.Task[int]{Group: "g", Fn: func(context.Context) (int, error) { ran.Store(true); return 0, nil }})
		clk.Advance(time.Second)
		g.open()
		if r := wait(t, h); r.Status != executor.Rejected || ran.Load() {
			t.Fatalf("expired task: %+v ran=%v", r, ran.Load())
		}
	}
}

func TestNoTimeoutWaitsForever(t *testing.T) {
	clk := fakeClock()
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)}, executor.WithClock(clk))
	g := newGate()
	submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("blocker")})
	g.waitStarted(t, 1)
	h := submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("waiter")})
	clk.Advance(1000 * time.Hour)
	if isDone(h) || clk.Pending() != 0 {
		t.Fatalf("done=%v timers=%d: no timeout is configured", isDone(h), clk.Pending())
	}
	g.open()
	if r := wait(t, h); r.Status != executor.Success {
		t.Fatal(r)
	}
}

// TestRemovedTasksStopWatchingTheirContext: a waiting task that times out,
// is cancelled or is displaced no longer has a watcher on Submit's context,
// which would otherwise keep it alive as long as that context lives.
func TestRemovedTasksStopWatchingTheirContext(t *testing.T) {
	clk := fakeClock()
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1), policy.WithQueueTimeout(time.Second),
		policy.WithDefaultQueueThreshold(2), policy.WithRejectionPolicy(policy.DiscardOldest)}, executor.WithClock(clk))
	parent, cancelParent := context.WithCancel(bg)
	defer cancelParent()
	g := newGate()
	defer g.open()
	submit(t, ex, executor.Task[string]{Group: "a", Fn: g.fn("blocker")})
	g.waitStarted(t, 1)
	sub := func() *executor.Handle[string] {
		h, err := executor.Submit(ex, parent, executor.Task[string]{Group: "a", Fn: g.fn("x")})
		if err != nil || !executor.WatchesParent(h) {
			t.Fatalf("Submit: %v; watching %v", err, executor.WatchesParent(h))
		}
		return h
	}
	displaced, cancelled := sub(), sub()
	sub() // displaces the oldest
	cancelled.Cancel()
	expired := sub()
	clk.Advance(time.Second)
	for name, h := range map[string]*executor.Handle[string]{"displaced": displaced, "cancelled": cancelled, "expired": expired} {
		wait(t, h)
		if executor.WatchesParent(h) {
			t.Errorf("%s task still watches Submit's context", name)
		}
	}
}
