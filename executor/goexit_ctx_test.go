package executor_test

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// ownCtx is a cancellable context that is not one of package context's,
// so that a context derived from it watches it from a goroutine of its own
// until the derived one is cancelled.
type ownCtx struct{ done chan struct{} }

func (c ownCtx) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c ownCtx) Done() <-chan struct{}       { return c.done }
func (c ownCtx) Value(any) any               { return nil }
func (c ownCtx) Err() error {
	select {
	case <-c.done:
		return context.Canceled
	default:
		return nil
	}
}

// TestGoexitEndsRunContext: a task whose Fn calls runtime.Goexit ends as
// one whose Fn returns: its run context, derived from Submit's (or Go's)
// cancellable context, is released once it has completed, and nothing of
// it is left behind (no goroutine watching Submit's context, no
// registration in it).
func TestGoexitEndsRunContext(t *testing.T) {
	for _, via := range []string{"Submit", "Go"} {
		t.Run(via, func(t *testing.T) {
			parent := ownCtx{make(chan struct{})}
			defer close(parent.done)
			ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)})
			ran := make(chan context.Context, 1)
			fn := func(ctx context.Context) error {
				ran <- ctx
				runtime.Goexit()
				return nil
			}
			if via == "Submit" {
				h, err := executor.Submit(ex, parent, executor.Task[int]{Group: "g", Fn: func(ctx context.Context) (int, error) { return 0, fn(ctx) }})
				if err != nil {
					t.Fatal(err)
				}
				if r := wait(t, h); r.Status != executor.Failed {
					t.Fatalf("status %v, want Failed", r.Status)
				}
			} else if err := ex.Go(parent, "g", fn); err != nil {
				t.Fatal(err)
			}
			rc := <-ran
			drain(t, ex)
			if rc.Err() == nil {
				t.Errorf("the run context of a task whose Fn called runtime.Goexit is still live after the task completed")
			}
			// The watcher ends once the run context is cancelled: wait
			// for it (a hang guard, not a timing assertion).
			for deadline := time.Now().Add(5 * time.Second); watchers() != 0 && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
			if n := watchers(); n != 0 {
				t.Errorf("%d goroutines still watch Submit's context after the task completed", n)
			}
		})
	}
}

// watchers counts the goroutines package context runs to watch a parent
// that is not one of its own contexts for a derived context.
func watchers() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), "created by context.(*cancelCtx).propagateCancel")
}
