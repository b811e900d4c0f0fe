package executor_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// A listener call that exits its goroutine ends the worker that made it,
// as a Fn's runtime.Goexit does, and takes nothing else down: the task's
// handle still completes, the next task of its group, which its finish
// started for that worker, still runs, and Shutdown still returns.
func TestListenerGoexitOnCompletedStillCompletes(t *testing.T) {
	var exits atomic.Int32
	p, _ := policy.New(policy.WithDefaultMaxConcurrency(1))
	ex, err := executor.New(p, executor.WithListener(executor.ListenerFuncs{Completed: func(executor.Event) {
		if exits.Add(1) == 1 {
			runtime.Goexit()
		}
	}}))
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	first, err := executor.Submit(ex, bg, executor.Task[int]{Group: "g", Fn: func(context.Context) (int, error) { <-release; return 1, nil }})
	if err != nil {
		t.Fatal(err)
	}
	next, err := executor.Submit(ex, bg, executor.Task[int]{Group: "g", Fn: func(context.Context) (int, error) { return 2, nil }})
	if err != nil {
		t.Fatal(err)
	}
	close(release)
	ctx, cancel := context.WithTimeout(bg, 10*time.Second) // a hang guard
	defer cancel()
	if _, err := first.Wait(ctx); err != nil {
		t.Fatalf("the handle did not complete after its listener call exited the worker: %v", err)
	}
	if r, err := next.Wait(ctx); err != nil || r.Status != executor.Success {
		t.Fatalf("the next task, started by the finish whose listener call exited: %+v, %v", r, err)
	}
	if err := ex.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	ex.Close()
}

// A listener call that exits the goroutine of a Cancel caller still lets
// the cancelled task complete: its handle, which others may wait on,
// completes, and Shutdown returns.
func TestListenerGoexitOnCancelStillCompletes(t *testing.T) {
	ex, running, release := cancelExitsExecutor(t)
	waiting, err := executor.Submit(ex, bg, executor.Task[int]{Group: "g", Fn: func(context.Context) (int, error) { return 2, nil }})
	if err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		waiting.Cancel()
	}()
	recv(t, exited, "Cancel returned or exited")
	ctx, cancel := context.WithTimeout(bg, 10*time.Second) // a hang guard
	defer cancel()
	if r, err := waiting.Wait(ctx); err != nil || r.Status != executor.Cancelled {
		t.Fatalf("the cancelled task, whose listener call exited the Cancel caller: %+v, %v", r, err)
	}
	close(release)
	if _, err := running.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ex.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	ex.Close()
}

// A listener call that exits the goroutine of a ShutdownGroup whose
// context has ended lets every task that the group's cancellation removed
// complete, not only the first one told to the listener.
func TestListenerGoexitOnGroupCancelCompletesEveryRemovedTask(t *testing.T) {
	ex, running, release := cancelExitsExecutor(t)
	var waiting []*executor.Handle[int]
	for range 3 {
		h, err := executor.Submit(ex, bg, executor.Task[int]{Group: "g", Fn: func(context.Context) (int, error) { return 2, nil }})
		if err != nil {
			t.Fatal(err)
		}
		waiting = append(waiting, h)
	}
	ended, stop := context.WithCancel(bg)
	stop()
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		ex.ShutdownGroup(ended, "g")
	}()
	recv(t, exited, "ShutdownGroup returned or exited")
	ctx, cancel := context.WithTimeout(bg, 10*time.Second) // a hang guard
	defer cancel()
	for i, h := range waiting {
		if r, err := h.Wait(ctx); err != nil || r.Status != executor.Cancelled {
			t.Fatalf("waiting task %d, removed by the group's cancellation: %+v, %v", i, r, err)
		}
	}
	close(release)
	if _, err := running.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	ex.Close()
}

// A listener call that exits the goroutine of Close, while it cancels
// every group, still lets Close cancel the groups after the one told of:
// their waiting tasks, which Close never starts, complete Cancelled.
func TestListenerGoexitOnCloseCancelsEveryGroup(t *testing.T) {
	ex, running, release := cancelExitsExecutor(t)
	other, err := executor.Submit(ex, bg, executor.Task[int]{Group: "h", Fn: func(context.Context) (int, error) { <-release; return 1, nil }})
	if err != nil {
		t.Fatal(err)
	}
	// Two groups with waiting tasks: whichever Close cancels first, its
	// first Cancelled task exits Close's goroutine, and the other group
	// is the one after.
	var waiting []*executor.Handle[int]
	for _, key := range []string{"g", "h"} {
		h, err := executor.Submit(ex, bg, executor.Task[int]{Group: key, Fn: func(context.Context) (int, error) { return 2, nil }})
		if err != nil {
			t.Fatal(err)
		}
		waiting = append(waiting, h)
	}
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		ex.Close()
	}()
	recv(t, exited, "Close returned or exited")
	ctx, cancel := context.WithTimeout(bg, 10*time.Second) // a hang guard
	defer cancel()
	for i, h := range waiting {
		if r, err := h.Wait(ctx); err != nil || r.Status != executor.Cancelled {
			t.Fatalf("waiting task %d, whose group Close cancels: %+v, %v", i, r, err)
		}
	}
	close(release)
	for _, h := range []*executor.Handle[int]{running, other} {
		if _, err := h.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	ex.Close()
}

// cancelExitsExecutor returns an executor of concurrency 1 per group whose
// listener exits the goroutine it is told of a Cancelled task on, and a
// task of group "g" that runs until release is closed.
func cancelExitsExecutor(t *testing.T) (ex *executor.Executor, running *executor.Handle[int], release chan struct{}) {
	t.Helper()
	p, _ := policy.New(policy.WithDefaultMaxConcurrency(1))
	var err error
	ex, err = executor.New(p, executor.WithListener(executor.ListenerFuncs{Completed: func(e executor.Event) {
		if e.Status == executor.Cancelled {
			runtime.Goexit()
		}
	}}))
	if err != nil {
		t.Fatal(err)
	}
	release = make(chan struct{})
	running, err = executor.Submit(ex, bg, executor.Task[int]{Group: "g", Fn: func(context.Context) (int, error) { <-release; return 1, nil }})
	if err != nil {
		t.Fatal(err)
	}
	return ex, running, release
}

// A Do call refused under CallerRuns whose listener's OnRejected exits the
// goroutine has its outcome counted, as a Submit task's is: it was counted
// submitted, and would otherwise never end in the counts.
func TestListenerGoexitOnRejectedCountsCallerRuns(t *testing.T) {
	for _, via := range []string{"Do", "Submit"} {
		t.Run(via, func(t *testing.T) {
			ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1), policy.WithDefaultQueueThreshold(0),
				policy.WithRejectionPolicy(policy.CallerRuns)},
				executor.WithListener(executor.ListenerFuncs{Rejected: func(executor.Event) { runtime.Goexit() }}))
			s := refuseOnItsOwnGoroutine(t, ex, via)
			if sum := s.Succeeded + s.Failed + s.Cancelled + s.Rejected; sum != s.Submitted || s.Failed != 1 || s.CallerRuns != 1 {
				t.Fatalf("%+v: want every submitted task's outcome counted, the refused one Failed in its caller", s.TaskCounts)
			}
		})
	}
}

// A task run by RunInCaller on a goroutine of the rejection handler's,
// whose listener call OnCompleted exits that goroutine, still completes
// its handle, which Submit returned to its caller.
func TestListenerGoexitOnCompletedOfRunInCallerCompletesHandle(t *testing.T) {
	handler := func(r *executor.Rejection) error {
		ran := make(chan struct{})
		go func() { defer close(ran); r.RunInCaller() }()
		recv(t, ran, "RunInCaller returned or exited")
		return nil
	}
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1), policy.WithDefaultQueueThreshold(0)},
		executor.WithRejectionHandler(handler),
		executor.WithListener(executor.ListenerFuncs{Completed: func(e executor.Event) {
			if e.ID == "refused" {
				runtime.Goexit()
			}
		}}))
	release, started := make(chan struct{}), make(chan struct{})
	holder, err := executor.Submit(ex, bg, executor.Task[int]{Group: "a", Fn: func(context.Context) (int, error) { close(started); <-release; return 1, nil }})
	if err != nil {
		t.Fatal(err)
	}
	recv(t, started, "the holder started")
	h, err := executor.Submit(ex, bg, executor.Task[int]{Group: "a", ID: "refused", Fn: func(context.Context) (int, error) { return 2, nil }})
	close(release)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(bg, 10*time.Second) // a hang guard
	defer cancel()
	if _, err := holder.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := h.Wait(ctx)
	if err != nil {
		t.Fatalf("the handle of the task run by RunInCaller never completed: %v", err)
	}
	if r.Status != executor.Success || r.Value != 2 {
		t.Fatalf("%+v, want Success with 2", r)
	}
}
