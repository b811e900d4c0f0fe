package executor_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// A Do call's context that panics while the call waits (its Done) or as
// the call starts (its Err) panics in Do's caller, even when the listener,
// told that the call completed unrun, exits the goroutine: the call leaves
// its queue, or gives its permits back, in a deferred call, the panic
// under way, and Go drops a panic when a deferred call exits its goroutine.
func TestDoContextPanicSurvivesListenerGoexit(t *testing.T) {
	for _, at := range []string{"queued", "start"} {
		t.Run(at, func(t *testing.T) {
			l := executor.ListenerFuncs{Completed: func(e executor.Event) {
				if e.Status == executor.Failed && !e.Started {
					runtime.Goexit()
				}
			}}
			ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)}, executor.WithListener(l))
			gt := newGate()
			defer gt.open()
			submit(t, ex, executor.Task[string]{Group: "g", Fn: gt.fn("blocker")})
			gt.waitStarted(t, 1)
			var ctx context.Context = &donePanicCtx{Context: bg, done: make(chan struct{}), panicAt: 1}
			errCtx := &panicErrCtx{Context: bg, done: make(chan struct{})}
			if at == "start" {
				ctx = errCtx
			}
			returned := make(chan any, 1)
			go func() {
				defer func() { returned <- recover() }()
				_ = ex.Do(ctx, "g", func(context.Context) error {
					t.Error("fn ran though its context panicked")
					return nil
				})
			}()
			if at == "start" {
				// A hang guard, not a timing assertion: the call queues at once.
				for deadline := time.Now().Add(10 * time.Second); groupStats(t, ex, "g").Waiting != 1; runtime.Gosched() {
					if time.Now().After(deadline) {
						t.Fatal("the Do call does not queue")
					}
				}
				errCtx.panics.Store(true)
				gt.open() // the blocker ends: the call starts, and asks ctx
			}
			if v := recv(t, returned, "the Do call returned or panicked"); v == nil {
				t.Fatal("Do's caller recovered nil: the context's panic was dropped")
			}
			gt.open()
			wantServes(t, ex, "g", "after a call's context panicked")
			drain(t, ex)
			wantInvariants(t, ex)
		})
	}
}
