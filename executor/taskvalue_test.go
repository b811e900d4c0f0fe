package executor_test

import (
	"context"
	"testing"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/internal/taskvalue"
)

// taskValues is what a task found of a taskvalue key and of a plain one.
type taskValues struct{ task, plain any }

// A value under a taskvalue key belongs to one task (a cluster permit's,
// bound above the task's run context): a task given a context that holds
// one, as a task given another task's context does, must not find it,
// whatever its run context, while every other value is found.
func TestRunContextsHideOtherTasksValues(t *testing.T) {
	ex := newExec(t, nil)
	key := taskvalue.New("test")
	look := func(ctx context.Context) taskValues { return taskValues{ctx.Value(key), ctx.Value(ctxKey{})} }
	withValues := context.WithValue(context.WithValue(bg, key, "another task's"), ctxKey{}, "v")
	cancelable, cancel := context.WithCancel(withValues)
	defer cancel()
	submit := func(ctx context.Context) (s taskValues, err error) {
		h, err := executor.Submit(ex, ctx, executor.Task[int]{Group: "g", Fn: func(ctx context.Context) (int, error) {
			s = look(ctx)
			return 0, nil
		}})
		if err == nil {
			_, err = h.Wait(bg)
		}
		return s, err
	}
	do := func(ctx context.Context) (s taskValues, err error) {
		err = ex.Do(ctx, "g", func(ctx context.Context) error { s = look(ctx); return nil })
		return s, err
	}
	doneDo := func(ctx context.Context) (s taskValues, err error) {
		var kept context.Context
		err = ex.Do(ctx, "g", func(ctx context.Context) error { kept = ctx; return nil })
		return look(kept), err // the call has ended
	}
	for _, tc := range []struct {
		name string
		ctx  context.Context
		run  func(context.Context) (taskValues, error)
	}{
		{"Submit, no Done", withValues, submit}, // the task is its run context
		{"Submit, cancelable", cancelable, submit},
		{"Do, no Done", withValues, do},
		{"Do, cancelable", cancelable, do},
		{"Do, after the call", cancelable, doneDo},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.run(tc.ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got != (taskValues{nil, "v"}) {
				t.Fatalf("the task found %+v, want no task value and the plain one", got)
			}
		})
	}
}
