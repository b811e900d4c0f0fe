package executor_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// TestDoRunInCallerPanicIsRecovered: under a rejection handler that runs fn
// in the caller (Rejection.RunInCaller), a panic in fn is recovered into a
// *PanicError, which Do returns; the task counts as run by the caller and
// Failed.
func TestDoRunInCallerPanicIsRecovered(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1)}, executor.WithRejectionHandler(func(r *executor.Rejection) error {
		r.RunInCaller()
		return nil
	}))
	g := newGate()
	defer g.open()
	submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("blocker")})
	g.waitStarted(t, 1)
	var err error
	func() {
		defer func() {
			if v := recover(); v != nil {
				t.Fatalf("the panic reached Do's caller: %v", v)
			}
		}()
		err = ex.Do(bg, "g", func(context.Context) error { panic("boom") })
	}()
	var pe *executor.PanicError
	if !errors.As(err, &pe) || pe.Value != "boom" || len(pe.Stack) == 0 {
		t.Fatalf("Do returned %v, want a *PanicError with the value and its stack", err)
	}
	if s := groupStats(t, ex, "g"); s.CallerRuns != 1 || s.Failed != 1 || s.Rejected != 0 {
		t.Errorf("counts %+v: want 1 CallerRuns, 1 Failed, 0 Rejected", s.TaskCounts)
	}
}

// TestCallerRunsCountsTheOutcomeOnce: a task run by the submitter under
// CallerRuns counts in Submitted, CallerRuns and its outcome, not in
// Rejected nor in Started (it did not start under the limits): every
// completed handle counts once.
func TestCallerRunsCountsTheOutcomeOnce(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1), policy.WithRejectionPolicy(policy.CallerRuns)})
	g := newGate()
	blocker := submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("blocker")})
	g.waitStarted(t, 1)
	h, err := executor.Submit(ex, bg, executor.Task[int]{Group: "g", Fn: func(context.Context) (int, error) { return 7, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if r := wait(t, h); r.Status != executor.Success || r.Value != 7 {
		t.Fatalf("caller-run task: %+v", r)
	}
	if err := ex.Do(bg, "g", func(context.Context) error { return errors.New("failed") }); err == nil {
		t.Fatal("Do run in the caller: want fn's error")
	}
	g.open()
	wait(t, blocker)
	c := groupStats(t, ex, "g").TaskCounts
	if c.Submitted != 3 || c.CallerRuns != 2 || c.Started != 1 || c.Succeeded != 2 || c.Failed != 1 || c.Rejected != 0 {
		t.Errorf("counts %+v: want 3 submitted, 2 run by the caller, 1 started, 2 succeeded, 1 failed, 0 rejected", c)
	}
	if done := c.Succeeded + c.Failed + c.Cancelled + c.Rejected; done != c.Submitted {
		t.Errorf("%d outcomes for %d submitted tasks", done, c.Submitted)
	}
}

// TestShutDownGroupOutlivesIdleReclamation: a group shut down with
// ShutdownGroup stays shut down until evicted, however many other groups
// go idle; EvictGroup lifts it.
func TestShutDownGroupOutlivesIdleReclamation(t *testing.T) {
	ex := newExec(t, nil, executor.WithMaxIdleGroups(0))
	if err := ex.ShutdownGroup(bg, "s"); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		wait(t, submit(t, ex, executor.Task[int]{Group: fmt.Sprint("other-", i), Fn: func(context.Context) (int, error) { return 0, nil }}))
	}
	if _, err := executor.Submit(ex, bg, executor.Task[int]{Group: "s", Fn: func(context.Context) (int, error) { return 0, nil }}); !errors.Is(err, executor.ErrGroupShutdown) {
		t.Fatalf("Submit to the shut-down group after idle reclamation: %v, want ErrGroupShutdown", err)
	}
	if err := ex.Do(bg, "s", func(context.Context) error { return nil }); !errors.Is(err, executor.ErrGroupShutdown) || !errors.Is(err, executor.ErrRejected) {
		t.Fatalf("Do on the shut-down group: %v, want ErrGroupShutdown matching ErrRejected", err)
	}
	if !ex.EvictGroup("s") {
		t.Fatal("the idle shut-down group was not evicted at once")
	}
	if r := wait(t, submit(t, ex, executor.Task[int]{Group: "s", Fn: func(context.Context) (int, error) { return 1, nil }})); r.Status != executor.Success {
		t.Fatalf("after EvictGroup: %+v, want the shutdown lifted", r)
	}
}

// TestShutdownGroupDeadlineCancelsWhatIsLeft: when ShutdownGroup's context
// ends first, the group's waiting tasks complete Cancelled without running,
// the running one's context is cancelled, ShutdownGroup returns the
// context's error, and other groups are untouched.
func TestShutdownGroupDeadlineCancelsWhatIsLeft(t *testing.T) {
	ex := newExec(t, nil)
	g := newGate()
	defer g.open()
	started := make(chan struct{})
	running := submit(t, ex, executor.Task[string]{Group: "g", Fn: func(ctx context.Context) (string, error) {
		close(started)
		<-ctx.Done()
		return "", ctx.Err()
	}})
	other := submit(t, ex, executor.Task[string]{Group: "other", Fn: g.fn("other")})
	g.waitStarted(t, 1)
	recv(t, started, "the task of g started")
	waiting := submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("never")})
	ctx, cancel := context.WithCancel(bg)
	done := make(chan error, 1)
	go func() { done <- ex.ShutdownGroup(ctx, "g") }()
	cancel()
	if err := recv(t, done, "ShutdownGroup returned once its context ended"); !errors.Is(err, context.Canceled) {
		t.Fatalf("ShutdownGroup = %v, want its context's error", err)
	}
	if r := wait(t, waiting); r.Status != executor.Cancelled {
		t.Errorf("waiting task: %+v, want Cancelled", r)
	}
	if r := wait(t, running); r.Status != executor.Cancelled {
		t.Errorf("running task: %+v, want Cancelled (its context cancelled)", r)
	}
	if isDone(other) {
		t.Error("another group's task was touched")
	}
	g.open()
	if r := wait(t, other); r.Status != executor.Success {
		t.Errorf("other group: %+v", r)
	}
	g.noneStarted(t)
}
