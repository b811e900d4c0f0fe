package executor_test

import (
	"context"
	"errors"
	"testing"

	"github.com/groupexec/groupexec/executor"
)

type afterEndKey struct{}

// valueOnly is a context that can never be cancelled (its Done is nil) but
// is not context.Background: Fn's context is then the task itself, which
// makes a Done channel only when asked for one.
var valueOnly = context.WithValue(bg, afterEndKey{}, 1)

// A task's context kept by a goroutine that outlives the task is done once
// the task has completed, as a standard context derived for the run is
// cancelled as the run ends: whether the goroutine asked for Done during
// the run, or only after it.
func TestSubmitContextKeptPastTheRunIsDone(t *testing.T) {
	for _, askDuring := range []bool{true, false} {
		ex := newExec(t, nil)
		var kept context.Context
		h, err := executor.Submit(ex, valueOnly, executor.Task[int]{Group: "g", Fn: func(ctx context.Context) (int, error) {
			if askDuring {
				ctx.Done()
			}
			kept = ctx
			return 0, nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		wait(t, h)
		if !isClosed(kept.Done()) {
			t.Errorf("Done asked during the run %v: Done open once the task completed", askDuring)
		}
		if err := kept.Err(); !errors.Is(err, context.Canceled) {
			t.Errorf("Done asked during the run %v: Err = %v once the task completed, want context.Canceled", askDuring, err)
		}
	}
}

// The same holds for a Go task, which has no handle: its context asked for
// Done only after the task completed (its group counts it, in the locked
// section that completes it) is done.
func TestGoContextKeptPastTheRunIsDone(t *testing.T) {
	ex := newExec(t, nil)
	kept := make(chan context.Context, 1)
	if err := ex.Go(valueOnly, "g", func(ctx context.Context) error {
		kept <- ctx
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ctx := <-kept
	await(t, "the Go task to complete", func() bool { return groupStats(t, ex, "g").Succeeded == 1 })
	if !isClosed(ctx.Done()) {
		t.Error("Done open once the Go task completed")
	}
	if err := ctx.Err(); !errors.Is(err, context.Canceled) {
		t.Errorf("Err = %v once the Go task completed, want context.Canceled", err)
	}
}

// A Done asked for between the end of the run and the completion of the
// task's handle (here by the listener told of the completion, which is
// told before the handle completes) is closed by the completion, by the
// time Wait returns: the end of the run had no channel to close. Closed
// after the handle's completion is published, it was found open by a
// Wait that returned in between (about once in 170 tasks on the 2-core
// machine): many tasks, each with its executor, to meet that window.
func TestSubmitContextDoneAskedAsTheRunEndsIsClosed(t *testing.T) {
	for i := range 1000 {
		var kept context.Context
		var ch <-chan struct{}
		ex := newExec(t, nil, executor.WithListener(executor.ListenerFuncs{
			Completed: func(executor.Event) {
				ch = kept.Done()
				if isClosed(ch) {
					// Not what this test sets up: the handle has not
					// completed yet.
					t.Error("Done closed before the handle completed")
				}
			},
		}))
		h, err := executor.Submit(ex, valueOnly, executor.Task[int]{Group: "g", Fn: func(ctx context.Context) (int, error) {
			kept = ctx
			return 0, nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		wait(t, h)
		if ch == nil {
			t.Fatal("the listener was not told of the completion")
		}
		if !isClosed(ch) {
			t.Fatalf("task %d: Done, asked for as the run ended, open once Wait returned", i)
		}
	}
}
