package executor_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// failOnRelease returns a task function that fails with errBackend once
// release is closed.
func failOnRelease(release <-chan struct{}) func(context.Context) (int, error) {
	return func(context.Context) (int, error) { <-release; return 0, errBackend }
}

// tripOnFirstFailure opens a breaker at its first failure, for a minute.
func tripOnFirstFailure(clk breaker.Settings) breaker.Settings {
	clk.Timeout = time.Minute
	clk.ReadyToTrip = func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 1 }
	return clk
}

// Tasks that wait in a group's queue when its breaker opens are refused as
// they would start, whatever their kind: Rejected with an error matching
// ErrRejected and breaker.ErrOpenState, never run, their places and
// permits given back.
func TestQueuedTasksRefusedWhenTheBreakerOpens(t *testing.T) {
	clk := fakeClock()
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)},
		executor.WithGroupBreaker(tripOnFirstFailure(breaker.Settings{Clock: clk})))

	release := make(chan struct{})
	closeAtEnd(t, release)
	first := submit(t, ex, executor.Task[int]{Group: "g", ID: "first", Fn: failOnRelease(release)})
	var ran atomic.Int32
	queued := submit(t, ex, executor.Task[int]{Group: "g", ID: "queued", Fn: func(context.Context) (int, error) {
		ran.Add(1)
		return 1, nil
	}})
	if err := ex.Go(bg, "g", func(context.Context) error { ran.Add(1); return nil }); err != nil {
		t.Fatalf("Go: %v", err)
	}
	doErr := make(chan error, 1)
	go func() { doErr <- ex.Do(bg, "g", func(context.Context) error { ran.Add(1); return nil }) }()
	waitFor(t, func() bool { return groupStats(t, ex, "g").Waiting == 3 })

	close(release)
	if r := wait(t, first); r.Status != executor.Failed {
		t.Fatalf("first: %+v, want Failed", r)
	}
	r := wait(t, queued)
	var re *executor.RejectedError
	if r.Status != executor.Rejected || !errors.Is(r.Err, breaker.ErrOpenState) || !errors.Is(r.Err, executor.ErrRejected) ||
		!errors.As(r.Err, &re) || re.Limit != executor.LimitBreaker || re.ID != "queued" {
		t.Errorf("queued Submit: %+v, want Rejected by the open breaker", r)
	}
	select {
	case err := <-doErr:
		if !errors.Is(err, breaker.ErrOpenState) || !errors.As(err, &re) || re.Limit != executor.LimitBreaker {
			t.Errorf("queued Do returned %v, want a refusal by the open breaker", err)
		}
	case <-time.After(hangGuard):
		t.Fatalf("queued Do did not return within %v", hangGuard)
	}
	waitFor(t, func() bool {
		s := groupStats(t, ex, "g")
		return s.Waiting == 0 && s.InFlight == 0 && s.Rejected == 3
	})
	if n := ran.Load(); n != 0 {
		t.Errorf("%d queued tasks ran after the breaker opened, want none", n)
	}
}

// A half-open breaker lets its probes start and refuses the tasks admitted
// before it opened that reach the head of the queue meanwhile (breaker.
// ErrTooManyRequests), as it would refuse them if they came in then.
func TestQueuedTaskAdmittedClosedRefusedWhileHalfOpen(t *testing.T) {
	clk := fakeClock()
	// Global room for two: a task of group o keeps one, so that g's queued
	// task waits for global room, not for g, and the dispatcher, serving
	// o first, does not come to it while the breaker is open.
	ex := newExec(t, []policy.Option{policy.WithGlobalMaxInFlight(2), policy.WithDefaultMaxConcurrency(2)},
		executor.WithGroupBreaker(tripOnFirstFailure(breaker.Settings{Clock: clk})))

	releaseA, releaseO := make(chan struct{}), make(chan struct{})
	closeAtEnd(t, releaseA)
	closeAtEnd(t, releaseO)
	a := submit(t, ex, executor.Task[int]{Group: "g", ID: "a", Fn: failOnRelease(releaseA)})
	o := submit(t, ex, executor.Task[int]{Group: "o", ID: "o", Fn: func(context.Context) (int, error) {
		<-releaseO
		return 0, nil
	}})
	o2 := submit(t, ex, executor.Task[int]{Group: "o", ID: "o2", Fn: func(context.Context) (int, error) {
		<-releaseO
		return 0, nil
	}})
	var staleRan atomic.Bool
	stale := submit(t, ex, executor.Task[int]{Group: "g", ID: "stale", Fn: func(context.Context) (int, error) {
		staleRan.Store(true)
		return 0, nil
	}})

	close(releaseA) // a fails: the breaker opens; its room goes to o2, ahead of stale
	if r := wait(t, a); r.Status != executor.Failed {
		t.Fatalf("a: %+v, want Failed", r)
	}
	waitFor(t, func() bool { return groupStats(t, ex, "o").Running == 2 })
	if s := groupStats(t, ex, "g"); s.Breaker != breaker.StateOpen || s.Waiting != 1 {
		t.Fatalf("g: %+v, want its breaker open and stale still waiting", s)
	}

	clk.Advance(time.Minute)
	probe := submit(t, ex, executor.Task[int]{Group: "g", ID: "probe", Fn: succeeding})
	if s := groupStats(t, ex, "g"); s.Breaker != breaker.StateHalfOpen || s.Waiting != 2 {
		t.Fatalf("g: %+v, want its breaker half-open and the probe queued behind stale", s)
	}

	close(releaseO)
	wait(t, o)
	wait(t, o2)
	r := wait(t, stale)
	if r.Status != executor.Rejected || !errors.Is(r.Err, breaker.ErrTooManyRequests) || staleRan.Load() {
		t.Errorf("stale: %+v (ran %v), want Rejected by the half-open breaker, never run", r, staleRan.Load())
	}
	if r := wait(t, probe); r.Status != executor.Success {
		t.Errorf("probe: %+v, want Success", r)
	}
	if s := groupStats(t, ex, "g"); s.Breaker != breaker.StateClosed {
		t.Errorf("breaker %v after the probe succeeded, want closed", s.Breaker)
	}
}
