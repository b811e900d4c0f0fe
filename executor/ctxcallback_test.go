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

// errHookCtx is a context that never ends (its Done is nil, as
// context.Background's) whose Err calls hook, if set, once.
type errHookCtx struct {
	context.Context // Background
	hook            atomic.Pointer[func()]
}

func (c *errHookCtx) Err() error {
	if f := c.hook.Swap(nil); f != nil {
		(*f)()
	}
	return nil
}

// afterFuncHookCtx is a cancellable context with an AfterFunc method of its
// own, which context.AfterFunc calls to watch it, that calls hook, if set,
// once. It never ends.
type afterFuncHookCtx struct {
	context.Context // Background
	done            chan struct{}
	hook            atomic.Pointer[func()]
}

func (c *afterFuncHookCtx) Done() <-chan struct{} { return c.done }

func (c *afterFuncHookCtx) AfterFunc(func()) func() bool {
	if f := c.hook.Swap(nil); f != nil {
		(*f)()
	}
	return func() bool { return true }
}

// TestRunContextDoneCallsParentUnlocked: a task's context asks its parent,
// Submit's or Do's context, whether it ended and to watch it when Fn first
// asks for Done. The parent is user code, which may use the executor on
// the same task: cancel it through its handle, or ask its context's Err.
// Done must not hold the task's lock while it calls the parent, or the
// task waits for itself for ever.
func TestRunContextDoneCallsParentUnlocked(t *testing.T) {
	// run runs a task that asks its context for Done, and fails the test if
	// it does not return: it is then left blocked, with its executor.
	run := func(t *testing.T, start func(ex *executor.Executor, fn func(context.Context) error) error) error {
		t.Helper()
		p, err := policy.New()
		if err != nil {
			t.Fatal(err)
		}
		ex, err := executor.New(p)
		if err != nil {
			t.Fatal(err)
		}
		result := make(chan error, 1)
		go func() {
			result <- start(ex, func(ctx context.Context) error {
				select {
				case <-ctx.Done():
					return context.Cause(ctx)
				default:
					return nil
				}
			})
		}()
		select {
		case err := <-result:
			ex.Close()
			return err
		case <-time.After(10 * time.Second): // a hang guard
			t.Fatal("the task's Done did not return: it waits for a lock it holds")
			return nil
		}
	}

	t.Run("Err cancels through the handle", func(t *testing.T) {
		parent := &errHookCtx{Context: bg}
		err := run(t, func(ex *executor.Executor, fn func(context.Context) error) error {
			var h *executor.Handle[int]
			ready := make(chan struct{})
			hook := func() { <-ready; h.Cancel() }
			// Armed from Fn: the hook is for Done's call alone.
			h, err := executor.Submit(ex, parent, executor.Task[int]{Group: "a", Fn: func(ctx context.Context) (int, error) {
				parent.hook.Store(&hook)
				return 0, fn(ctx)
			}})
			if err != nil {
				return err
			}
			close(ready)
			r, err := h.Wait(bg)
			if err != nil {
				return err
			}
			return r.Err
		})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the task ended with %v, want it cancelled through its handle before Done returned", err)
		}
	})

	t.Run("AfterFunc asks the task's Err", func(t *testing.T) {
		parent := &afterFuncHookCtx{Context: bg, done: make(chan struct{})}
		err := run(t, func(ex *executor.Executor, fn func(context.Context) error) error {
			return ex.Do(parent, "a", func(ctx context.Context) error {
				hook := func() { _ = ctx.Err() }
				parent.hook.Store(&hook)
				return fn(ctx)
			})
		})
		if err != nil {
			t.Errorf("Do: %v, want nil: nothing ends the parent", err)
		}
	})
}
