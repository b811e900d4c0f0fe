package executor_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

var errCtxEnded = errors.New("the task's context ended")

// steppedCtx is a context whose end a test takes step by step: end sets
// its error (errCtxEnded); the function its AfterFunc method was given,
// which context.AfterFunc runs when it ends, is called by the test (fire);
// and the Value calls that hold names, counted from hold, block until
// release (context.Cause asks Value, then Err).
type steppedCtx struct {
	context.Context // Background: no deadline, no values
	done            chan struct{}
	ended           atomic.Bool

	mu      sync.Mutex
	fns     []func()
	held    map[int32]bool
	calls   atomic.Int32
	entered chan int32
	release chan struct{}
}

func newSteppedCtx() *steppedCtx {
	return &steppedCtx{Context: bg, done: make(chan struct{}), entered: make(chan int32, 8), release: make(chan struct{})}
}

func (c *steppedCtx) Done() <-chan struct{} { return c.done }

func (c *steppedCtx) Err() error {
	if c.ended.Load() {
		return errCtxEnded
	}
	return nil
}

func (c *steppedCtx) Value(key any) any {
	n := c.calls.Add(1)
	c.mu.Lock()
	h := c.held[n]
	c.mu.Unlock()
	if h {
		c.entered <- n
		<-c.release
	}
	return nil
}

func (c *steppedCtx) AfterFunc(f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fns = append(c.fns, f)
	return func() bool { return true }
}

// hold makes the ns-th Value calls from now on block until release.
func (c *steppedCtx) hold(ns ...int32) {
	c.mu.Lock()
	c.held = map[int32]bool{}
	for _, n := range ns {
		c.held[n] = true
	}
	c.mu.Unlock()
	c.calls.Store(0)
}

// fire runs the functions given to AfterFunc, as the context's end does.
func (c *steppedCtx) fire() {
	c.mu.Lock()
	fns := c.fns
	c.mu.Unlock()
	for _, f := range fns {
		f()
	}
}

func (c *steppedCtx) waitEntered(t *testing.T) {
	t.Helper()
	select {
	case <-c.entered:
	case <-time.After(10 * time.Second): // a hang guard
		t.Fatal("no call reached the context")
	}
}

// TestCancelAsTaskStartsWithItsContextEnded: a task whose Submit context
// ended while it waited does not run, even when it starts before the
// watcher on that context removes it. A Cancel made meanwhile (the task
// is running, for the executor) reports true exactly when its own
// cancellation is the one the task completes with: Cancelled with
// context.Canceled. Otherwise it reports false and the task completes
// with the context's cause. Both ways the context's end reaches the
// executor: through its watcher ("watched"), or, for a task started
// before its watcher was armed, through its worker asking the context
// ("unwatched").
func TestCancelAsTaskStartsWithItsContextEnded(t *testing.T) {
	for _, via := range []string{"watched", "unwatched"} {
		t.Run(via, func(t *testing.T) {
			ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)})
			gt := newGate()
			defer gt.open()
			submit(t, ex, executor.Task[string]{Group: "g", Fn: gt.fn("blocker")})
			gt.waitStarted(t, 1)
			ctx := newSteppedCtx()
			var cancelled bool
			var ran atomic.Bool
			// start ends ctx and lets the blocker's finish start the task,
			// whose worker then reads the context's cause (Value held).
			start := func(watched bool) {
				ctx.ended.Store(true)
				if watched {
					// The first Value is context.AfterFunc's own, in
					// fire; the second the watcher's, held so that it does
					// not remove the task; the third the worker's.
					ctx.hold(2, 3)
					ctx.fire()
					ctx.waitEntered(t)
				} else {
					ctx.hold(1) // the worker's
				}
				gt.open()
				ctx.waitEntered(t)
			}
			if via == "unwatched" {
				var once sync.Once
				executor.SetHookQueued(func() { once.Do(func() { start(false) }) })
				defer executor.SetHookQueued(nil)
			}
			h, err := executor.Submit(ex, ctx, executor.Task[string]{Group: "g", Fn: func(context.Context) (string, error) {
				ran.Store(true)
				return "ran", nil
			}})
			if err != nil {
				t.Fatal(err)
			}
			if via == "watched" {
				if !executor.WatchesParent(h) {
					t.Fatal("the queued task's watcher is not armed")
				}
				start(true)
			}
			cancelled = h.Cancel()
			close(ctx.release)
			r := wait(t, h)
			if ran.Load() || r.Status != executor.Cancelled {
				t.Fatalf("ran %v, status %v; want Cancelled without running", ran.Load(), r.Status)
			}
			want := errCtxEnded
			if cancelled {
				want = context.Canceled
			}
			if r.Err != want {
				t.Errorf("Cancel reported %v, and the task completed with %v; want %v", cancelled, r.Err, want)
			}
		})
	}
}
