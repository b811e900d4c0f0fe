package executor_test

import (
	"context"
	"sync"
	"testing"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// lateWatcherCtx is a context whose end its Err and Done report at once,
// while the functions registered through its AfterFunc method run only when
// the test says: a cancellation still on its way to its watchers, as when
// context's cancel has closed Done and set Err and is still calling its
// children's. A stop called before fire reports true, as context.AfterFunc's
// does for a watcher that has not fired yet.
type lateWatcherCtx struct {
	context.Context // Background: no deadline, no values
	done            chan struct{}

	mu    sync.Mutex
	err   error
	funcs []*lateWatcher
}

type lateWatcher struct {
	once sync.Once
	f    func()
}

func newLateWatcherCtx() *lateWatcherCtx {
	return &lateWatcherCtx{Context: bg, done: make(chan struct{})}
}

func (c *lateWatcherCtx) Done() <-chan struct{} { return c.done }

func (c *lateWatcherCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *lateWatcherCtx) AfterFunc(f func()) func() bool {
	w := &lateWatcher{f: f}
	c.mu.Lock()
	c.funcs = append(c.funcs, w)
	c.mu.Unlock()
	return func() bool {
		stopped := false
		w.once.Do(func() { stopped = true })
		return stopped
	}
}

// end makes Err and Done report the end; the watchers are left unfired.
func (c *lateWatcherCtx) end() {
	c.mu.Lock()
	c.err = context.Canceled
	c.mu.Unlock()
	close(c.done)
}

// fire runs the watchers not stopped, as the rest of a cancellation would.
func (c *lateWatcherCtx) fire() {
	c.mu.Lock()
	funcs := c.funcs
	c.mu.Unlock()
	for _, w := range funcs {
		w.once.Do(func() { go w.f() })
	}
}

// TestQueuedTaskNotRunAfterItsContextEndedBeforeItsWatcherFired: a waiting
// task whose Submit context has ended never runs, even when its group's
// room comes free before the context's cancellation has reached the
// task's watcher. Stopping that watcher then succeeds, yet the context
// reports its end: the task completes Cancelled, its Fn not called, and
// is not counted started. (With two tasks running and three waiting, a
// request's end that reaches a running task first frees room for a
// waiting one whose watcher has not fired yet.)
func TestQueuedTaskNotRunAfterItsContextEndedBeforeItsWatcherFired(t *testing.T) {
	for _, via := range []string{"Submit", "Go"} {
		t.Run(via, func(t *testing.T) {
			ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)})
			gt := newGate()
			first := submit(t, ex, executor.Task[string]{Group: "g", Fn: gt.fn("first")})
			gt.waitStarted(t, 1)

			ctx := newLateWatcherCtx()
			ran := make(chan struct{}, 1)
			var (
				h   *executor.Handle[string]
				err error
			)
			switch via {
			case "Submit":
				h, err = executor.Submit(ex, ctx, executor.Task[string]{Group: "g", Fn: func(context.Context) (string, error) {
					ran <- struct{}{}
					return "ran", nil
				}})
			case "Go":
				err = ex.Go(ctx, "g", func(context.Context) error {
					ran <- struct{}{}
					return nil
				})
			}
			if err != nil {
				t.Fatal(err)
			}
			if s, _ := ex.GroupStats("g"); s.Waiting != 1 {
				t.Fatalf("waiting tasks %d, want 1", s.Waiting)
			}

			ctx.end()
			gt.open()
			if r := wait(t, first); r.Status != executor.Success {
				t.Fatalf("first task: %v, want Success", r.Status)
			}
			if h != nil {
				if r := wait(t, h); r.Status != executor.Cancelled {
					t.Errorf("waiting task completed %v (%v), want Cancelled", r.Status, r.Err)
				}
			}
			if err := ex.Shutdown(bg); err != nil {
				t.Fatal(err)
			}
			ctx.fire()
			select {
			case <-ran:
				t.Error("the waiting task's Fn ran after its context ended")
			default:
			}
			s := ex.Stats()
			if s.Started != 1 || s.Cancelled != 1 {
				t.Errorf("Started %d, Cancelled %d; want 1 and 1", s.Started, s.Cancelled)
			}
		})
	}
}
