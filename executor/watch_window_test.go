package executor_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// TestContextEndedBeforeWatcherNeverRuns: a task whose context ends after
// Submit (or Go) queued it, but before the watcher of that context is
// armed, and which a finishing task of its group starts in that moment,
// does not run: it waited while its context ended, so it completes
// Cancelled, as one started after its watcher saw the end does.
func TestContextEndedBeforeWatcherNeverRuns(t *testing.T) {
	for _, via := range []string{"Submit", "Go"} {
		t.Run(via, func(t *testing.T) {
			ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)})
			gt := newGate()
			defer gt.open()
			submit(t, ex, executor.Task[string]{Group: "g", Fn: gt.fn("blocker")})
			gt.waitStarted(t, 1)

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ran := make(chan struct{}, 1)
			var once sync.Once
			executor.SetHookQueued(func() {
				once.Do(func() {
					// The task is queued, its watcher not armed: its
					// context ends, then the blocker's finish starts it.
					cancel()
					gt.open()
					deadline := time.Now().Add(10 * time.Second)
					for {
						select {
						case <-ran:
							ran <- struct{}{}
							return
						default:
						}
						if s, _ := ex.GroupStats("g"); s.Succeeded == 1 && s.Cancelled == 1 {
							return
						}
						if time.Now().After(deadline) {
							t.Error("the queued task neither ran nor was cancelled")
							return
						}
						runtime.Gosched()
					}
				})
			})
			defer executor.SetHookQueued(nil)

			var h *executor.Handle[string]
			switch via {
			case "Submit":
				var err error
				h, err = executor.Submit(ex, ctx, executor.Task[string]{Group: "g", Fn: func(context.Context) (string, error) {
					ran <- struct{}{}
					return "ran", nil
				}})
				if err != nil {
					t.Fatal(err)
				}
			case "Go":
				// Go's task has no handle: its outcome is in the counts.
				if err := ex.Go(ctx, "g", func(context.Context) error {
					ran <- struct{}{}
					return nil
				}); err != nil {
					t.Fatal(err)
				}
			}
			select {
			case <-ran:
				t.Fatal("the task ran though its context ended while it waited")
			default:
			}
			if err := ex.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			s := groupStats(t, ex, "g")
			if s.Started != 1 || s.Succeeded != 1 || s.Cancelled != 1 {
				t.Errorf("counts %+v, want 1 started and succeeded (the blocker), 1 cancelled", s.TaskCounts)
			}
			if h != nil {
				if r := wait(t, h); r.Status != executor.Cancelled || !errors.Is(r.Err, context.Canceled) {
					t.Errorf("result %+v, want Cancelled with context.Canceled", r)
				}
			}
		})
	}
}
