package executor_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/groupexec/groupexec/executor"
)

// A task's run context that panics on its worker, outside Fn (its Submit
// context is user code), makes the worker panic, as without the executor
// (TestRunContextPanicStartedEvent), even when the listener told the task
// completed exits the goroutine (runtime.Goexit) as the worker finishes
// it: Go drops a panic when a deferred call exits its goroutine, and the
// worker finishes the task in a deferred call.
func TestWorkerPanicSurvivesListenerGoexit(t *testing.T) {
	recovered := make(chan any, 1)
	// The panic goes on up the worker: recovered here, as a pool does.
	spawn := func(f func()) {
		go func() {
			defer func() { recovered <- recover() }()
			f()
		}()
	}
	ex := newExec(t, nil, executor.WithSpawn(spawn), executor.WithListener(executor.ListenerFuncs{
		Completed: func(executor.Event) { runtime.Goexit() },
	}))
	ctx := &watchPanicCtx{Context: bg, done: make(chan struct{})}
	h, err := executor.Submit(ex, ctx, executor.Task[string]{Group: "g", Fn: func(context.Context) (string, error) {
		t.Error("Fn ran with a run context that panicked")
		return "", nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if r := wait(t, h); r.Status != executor.Failed {
		t.Errorf("task: %v %v, want Failed", r.Status, r.Err)
	}
	if r := <-recovered; r != "a context's AfterFunc" {
		t.Fatalf("the worker's goroutine recovered %v, want the run context's panic", r)
	}
}
