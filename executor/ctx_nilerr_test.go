package executor_test

import (
	"context"
	"errors"
	"runtime"
	"testing"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// doneNilErrCtx breaks context.Context's contract: its Done closes while
// its Err stays nil.
type doneNilErrCtx struct {
	context.Context // values and deadline: Background's
	done            chan struct{}
}

func (c doneNilErrCtx) Done() <-chan struct{} { return c.done }

// A Do waiting in line whose context's Done closes with a nil Err leaves
// the line and returns an error: fn did not run, and a nil error would say
// it ran and succeeded.
func TestDoContextDoneWithNilErr(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(2), policy.WithDefaultMaxConcurrency(1)})
	g := newGate()
	defer g.open()
	submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("blocker")})
	g.waitStarted(t, 1)
	ctx := doneNilErrCtx{Context: bg, done: make(chan struct{})}
	done := doIn(ex, ctx, "g", func(context.Context) error { t.Error("Do ran fn after its context was done"); return nil })
	for groupStats(t, ex, "g").Waiting != 1 {
		runtime.Gosched()
	}
	close(ctx.done)
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Do = %v, want an error matching context.Canceled", err)
	}
	if s := groupStats(t, ex, "g"); s.Waiting != 0 || s.InFlight != 1 || s.Cancelled != 1 {
		t.Fatalf("stats after the context ended %+v: the place is not free", s)
	}
}

// Wait whose context's Done closes with a nil Err returns an error, not
// the zero Result with a nil error, which reads as the task's outcome.
func TestWaitContextDoneWithNilErr(t *testing.T) {
	ex := newExec(t, nil)
	g := newGate()
	defer g.open()
	h := submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("running")})
	ctx := doneNilErrCtx{Context: bg, done: make(chan struct{})}
	close(ctx.done)
	if r, err := h.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = (%+v, %v), want an error matching context.Canceled", r, err)
	}
}

// Shutdown and ShutdownGroup whose context's Done closes with a nil Err
// return an error: nil says every task has completed.
func TestShutdownContextDoneWithNilErr(t *testing.T) {
	for _, group := range []bool{true, false} {
		ex := newExec(t, nil)
		g := newGate()
		submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("running")})
		g.waitStarted(t, 1)
		ctx := doneNilErrCtx{Context: bg, done: make(chan struct{})}
		close(ctx.done)
		var err error
		if group {
			err = ex.ShutdownGroup(ctx, "g")
		} else {
			err = ex.Shutdown(ctx)
		}
		if !errors.Is(err, context.Canceled) {
			t.Errorf("shutdown (group %t) with a task running = %v, want an error matching context.Canceled", group, err)
		}
		g.open()
	}
}
