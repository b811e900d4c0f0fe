package executor_test

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/clock"
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
			rc := recv(t, ran, "the task ran")
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

// exitingCtx is a context that ends (errCtxEnded) when end is called,
// and whose Err or Value calls exit the goroutine (runtime.Goexit) while
// armed, once.
type exitingCtx struct {
	context.Context // Background: no deadline
	done            chan struct{}
	ended           atomic.Bool
	exitErr         atomic.Bool // the next Err call exits
	exitValue       atomic.Bool // the next Value call exits
}

func (c *exitingCtx) Done() <-chan struct{} { return c.done }

func (c *exitingCtx) Err() error {
	if c.exitErr.CompareAndSwap(true, false) {
		runtime.Goexit()
	}
	if c.ended.Load() {
		return errCtxEnded
	}
	return nil
}

func (c *exitingCtx) end() {
	c.ended.Store(true)
	close(c.done)
}

func (c *exitingCtx) Value(any) any {
	if c.exitValue.CompareAndSwap(true, false) {
		runtime.Goexit()
	}
	return nil
}

// TestGoexitAskingEndedContextAtStart: a task started before the watcher
// on its Submit context was armed has its worker ask that context whether
// it ended (Err, then context.Cause), before Fn. A context that exits the
// worker's goroutine as it is asked leaves the task completed (Failed,
// ErrGoexit) without running: not counted Started, and the listener,
// never told it started, hears of its completion with Event.Started false.
func TestGoexitAskingEndedContextAtStart(t *testing.T) {
	for _, via := range []string{"Err", "Value"} {
		t.Run(via, func(t *testing.T) {
			var started, completedStarted atomic.Int32
			completed := make(chan struct{})
			l := executor.ListenerFuncs{
				Started: func(executor.Event) { started.Add(1) },
				Completed: func(e executor.Event) {
					if e.Started {
						completedStarted.Add(1)
					}
					if e.Group == "g" && e.ID == "t" {
						close(completed)
					}
				},
			}
			ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)}, executor.WithListener(l))
			gt := newGate()
			defer gt.open()
			submit(t, ex, executor.Task[string]{Group: "g", Fn: gt.fn("blocker")})
			gt.waitStarted(t, 1)
			ctx := &exitingCtx{Context: bg, done: make(chan struct{})}
			var once sync.Once
			executor.SetHookQueued(func() {
				once.Do(func() {
					// The task is queued, its watcher not armed: the
					// blocker's end starts it, and its worker asks ctx.
					ctx.end()
					if via == "Err" {
						ctx.exitErr.Store(true)
					} else {
						ctx.exitValue.Store(true)
					}
					gt.open()
					recv(t, completed, "the task completed as its context exited the worker")
				})
			})
			defer executor.SetHookQueued(nil)
			h, err := executor.Submit(ex, ctx, executor.Task[string]{Group: "g", ID: "t", Fn: func(context.Context) (string, error) {
				t.Error("Fn ran after its context ended")
				return "", nil
			}})
			if err != nil {
				t.Fatal(err)
			}
			if r := wait(t, h); r.Status != executor.Failed || r.Err != executor.ErrGoexit {
				t.Errorf("task: %v %v, want Failed with ErrGoexit", r.Status, r.Err)
			}
			drain(t, ex)
			if s := ex.Stats(); started.Load() != 1 || completedStarted.Load() != 1 || s.Started != 1 {
				t.Errorf("OnStarted %d, OnCompleted with Event.Started %d, TaskCounts.Started %d; want 1 each (the blocker's)",
					started.Load(), completedStarted.Load(), s.Started)
			}
		})
	}
}

// clockedExitingCtx is an exitingCtx whose Err, armed to exit the
// goroutine, first moves clk on: the time spent asking it.
type clockedExitingCtx struct {
	*exitingCtx
	clk *clock.Fake
}

func (c clockedExitingCtx) Err() error {
	if c.exitErr.Load() {
		c.clk.Advance(time.Second)
	}
	return c.exitingCtx.Err()
}

// TestGoexitAskingContextAtStartRanZero: a task whose Submit context exits
// its worker's goroutine as it is asked at the task's start never ran Fn,
// so its Result and its OnCompleted event report a Duration of 0, as for
// any task that never ran, however long the asking took.
func TestGoexitAskingContextAtStartRanZero(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	var completedRan atomic.Int64
	completed := make(chan struct{})
	l := executor.ListenerFuncs{Completed: func(e executor.Event) {
		if e.Group == "g" && e.ID == "t" {
			completedRan.Store(int64(e.Duration))
			close(completed)
		}
	}}
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)}, executor.WithClock(clk), executor.WithListener(l))
	gt := newGate()
	defer gt.open()
	submit(t, ex, executor.Task[string]{Group: "g", Fn: gt.fn("blocker")})
	gt.waitStarted(t, 1)
	ctx := clockedExitingCtx{&exitingCtx{Context: bg, done: make(chan struct{})}, clk}
	var once sync.Once
	executor.SetHookQueued(func() {
		once.Do(func() {
			// Queued, its watcher not armed: the blocker's end starts it,
			// and its worker asks ctx, which moves the clock on and exits.
			ctx.end()
			ctx.exitErr.Store(true)
			gt.open()
			recv(t, completed, "the task completed as its context exited the worker")
		})
	})
	defer executor.SetHookQueued(nil)
	h, err := executor.Submit(ex, ctx, executor.Task[string]{Group: "g", ID: "t", Fn: func(context.Context) (string, error) {
		t.Error("Fn ran after its context ended")
		return "", nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if r := wait(t, h); r.Status != executor.Failed || r.Err != executor.ErrGoexit || r.Duration != 0 {
		t.Errorf("task: %v %v ran %v, want Failed with ErrGoexit, ran 0", r.Status, r.Err, r.Duration)
	}
	if d := time.Duration(completedRan.Load()); d != 0 {
		t.Errorf("OnCompleted: Duration %v, want 0", d)
	}
}

// exitStopCtx is a cancellable context that never ends, with an AfterFunc
// method of its own whose stops exit the goroutine (runtime.Goexit).
type exitStopCtx struct {
	context.Context // Background: no deadline, no values, no error
	done            chan struct{}
}

func (c *exitStopCtx) Done() <-chan struct{} { return c.done }

func (c *exitStopCtx) AfterFunc(func()) func() bool {
	return func() bool { runtime.Goexit(); return false }
}

// TestGoexitStoppingRemovedTaskWatcher: a queued task removed by Cancel
// has the watcher on its Submit context stopped by the canceller. A stop
// that exits that goroutine (the context's own AfterFunc method's) still
// leaves the task completed, Cancelled, and its drain settled.
func TestGoexitStoppingRemovedTaskWatcher(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)})
	gt := newGate()
	defer gt.open()
	submit(t, ex, executor.Task[string]{Group: "g", Fn: gt.fn("blocker")})
	gt.waitStarted(t, 1)
	ctx := &exitStopCtx{Context: bg, done: make(chan struct{})}
	h, err := executor.Submit(ex, ctx, executor.Task[string]{Group: "g", Fn: gt.fn("x")})
	if err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		h.Cancel()
	}()
	recv(t, exited, "Cancel returned or exited")
	if r := wait(t, h); r.Status != executor.Cancelled {
		t.Errorf("task: %v %v, want Cancelled", r.Status, r.Err)
	}
	gt.open()
	drain(t, ex)
}

// panicErrCtx is a cancellable context that never ends, whose Err panics
// while armed.
type panicErrCtx struct {
	context.Context // Background: no deadline, no values
	done            chan struct{}
	panics          atomic.Bool
}

func (c *panicErrCtx) Done() <-chan struct{} { return c.done }

func (c *panicErrCtx) Err() error {
	if c.panics.Load() {
		panic("a context's Err")
	}
	return nil
}

// TestDoContextPanicsAtStart: a queued Do call asks its context whether
// it ended once it has started, before fn: a call to user code. One that
// panics, or exits the goroutine, goes on up the caller, as a panic in fn
// does, but the call's permits come back first: its group serves its
// next task, and the call is not counted started.
func TestDoContextPanicsAtStart(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)})
	gt := newGate()
	defer gt.open()
	submit(t, ex, executor.Task[string]{Group: "g", Fn: gt.fn("blocker")})
	gt.waitStarted(t, 1)
	ctx := &panicErrCtx{Context: bg, done: make(chan struct{})}
	returned := make(chan any, 1)
	go func() {
		defer func() { returned <- recover() }()
		_ = ex.Do(ctx, "g", func(context.Context) error {
			t.Error("fn ran though its context panicked")
			return nil
		})
	}()
	// A hang guard, not a timing assertion: the call queues at once.
	for deadline := time.Now().Add(10 * time.Second); groupStats(t, ex, "g").Waiting != 1; runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatal("the Do call does not queue")
		}
	}
	ctx.panics.Store(true)
	gt.open() // the blocker ends: the call starts, and asks ctx
	if v := recv(t, returned, "the Do call returned or panicked"); v == nil {
		t.Error("Do returned without the context's panic")
	}
	if s := groupStats(t, ex, "g"); s.Running != 0 || s.InFlight != 0 {
		t.Fatalf("after the call: running %d, in flight %d; want its permits back", s.Running, s.InFlight)
	}
	if s := ex.Stats(); s.Started != 1 {
		t.Errorf("Started %d, want 1 (the blocker)", s.Started)
	}
}

// donePanicCtx is a cancellable context that never ends, whose Done
// panics, or exits the goroutine (exits), from its call number panicAt
// (from 1) on.
type donePanicCtx struct {
	context.Context // Background: no deadline, no values, no error
	done            chan struct{}
	calls           atomic.Int32
	panicAt         int32
	exits           bool
}

func (c *donePanicCtx) Done() <-chan struct{} {
	if c.calls.Add(1) >= c.panicAt {
		if c.exits {
			runtime.Goexit()
		}
		panic("a context's Done")
	}
	return c.done
}

// valuePanicCtx is a context that ends when done is closed, and whose
// Value panics: context.Cause asks it.
type valuePanicCtx struct {
	context.Context // Background: no deadline
	done            chan struct{}
}

func (c *valuePanicCtx) Done() <-chan struct{} { return c.done }
func (c *valuePanicCtx) Err() error {
	select {
	case <-c.done:
		return errCtxEnded
	default:
		return nil
	}
}
func (c *valuePanicCtx) Value(any) any { panic("a context's Value") }

// TestDoContextDonePanicsWhileQueued: a Do call that queues waits on its
// context's Done, user code, and asks the context for its cause if it
// ends. One that panics, or exits the goroutine, goes on up the caller,
// but the call leaves its queue first, and its place with it: it never
// starts, and its group serves the next call.
func TestDoContextDonePanicsWhileQueued(t *testing.T) {
	for _, via := range []string{"panic", "Goexit", "Value"} {
		t.Run(via, func(t *testing.T) {
			var completed atomic.Int32
			l := executor.ListenerFuncs{Completed: func(e executor.Event) {
				if e.Status == executor.Failed && !e.Started {
					completed.Add(1)
				}
			}}
			p, err := policy.New(policy.WithDefaultMaxConcurrency(1))
			if err != nil {
				t.Fatal(err)
			}
			// Not closed if the call's permits are kept: Close would wait
			// for ever.
			ex, err := executor.New(p, executor.WithListener(l))
			if err != nil {
				t.Fatal(err)
			}
			gt := newGate()
			defer gt.open()
			submit(t, ex, executor.Task[string]{Group: "g", Fn: gt.fn("blocker")})
			gt.waitStarted(t, 1)
			var ctx context.Context = &donePanicCtx{Context: bg, done: make(chan struct{}), panicAt: 1, exits: via == "Goexit"}
			vctx := &valuePanicCtx{Context: bg, done: make(chan struct{})}
			if via == "Value" {
				ctx = vctx
			}
			returned := make(chan any, 1)
			go func() {
				panicked := true
				defer func() {
					v := recover()
					if v == nil && panicked {
						v = "Goexit"
					}
					returned <- v
				}()
				_ = ex.Do(ctx, "g", func(context.Context) error {
					t.Error("fn ran though its context panicked")
					return nil
				})
				panicked = false
			}()
			if via == "Value" {
				// A hang guard, not a timing assertion: the call queues at once.
				for deadline := time.Now().Add(10 * time.Second); groupStats(t, ex, "g").Waiting != 1; runtime.Gosched() {
					if time.Now().After(deadline) {
						t.Fatal("the Do call does not queue")
					}
				}
				close(vctx.done) // the call wakes, and asks ctx its cause
			}
			if v := recv(t, returned, "the Do call returned or panicked"); v == nil {
				t.Error("Do returned without the context's panic")
			}
			if s := groupStats(t, ex, "g"); s.Waiting != 0 || s.InFlight != 1 {
				t.Errorf("after the call: waiting %d, in flight %d; want the call out of the queue (0, 1)", s.Waiting, s.InFlight)
			}
			gt.open()
			// A call left in line would start, never to run, and keep the
			// group's one permit.
			wantServes(t, ex, "g", "after a queued call's context panicked")
			drain(t, ex)
			if s := ex.Stats(); s.Started != 2 || completed.Load() != 1 {
				t.Errorf("Started %d, Failed unstarted completions %d; want 2 (the blocker, the next call) and 1", s.Started, completed.Load())
			}
			wantInvariants(t, ex)
			ex.Close()
		})
	}
}

// TestGoexitStoppingRunContextWatchInGroupCancel: a group's cancel (a
// shutdown's deadline, Close) cancels its running tasks' contexts, whose
// cancel stops their watch on Submit's context, through the stop that the
// context's own AfterFunc method returned, then completes its removed
// waiting tasks. A stop that exits the goroutine ends the caller's only
// once the rest is done: the waiting task completes Cancelled.
func TestGoexitStoppingRunContextWatchInGroupCancel(t *testing.T) {
	for _, via := range []string{"ShutdownGroup", "Close"} {
		t.Run(via, func(t *testing.T) {
			p, err := policy.New(policy.WithDefaultMaxConcurrency(1))
			if err != nil {
				t.Fatal(err)
			}
			// Not closed if a removed task is left incomplete: Close would
			// wait for ever.
			ex, err := executor.New(p)
			if err != nil {
				t.Fatal(err)
			}
			ctx := &exitStopCtx{Context: bg, done: make(chan struct{})}
			started := make(chan struct{})
			h, err := executor.Submit(ex, ctx, executor.Task[string]{Group: "g", Fn: func(ctx context.Context) (string, error) {
				close(started)
				<-ctx.Done()
				return "", ctx.Err()
			}})
			if err != nil {
				t.Fatal(err)
			}
			recv(t, started, "the task started")
			waiting := submit(t, ex, executor.Task[string]{Group: "g", Fn: func(context.Context) (string, error) {
				t.Error("a task removed by its group's cancel ran")
				return "", nil
			}})
			exited := make(chan struct{})
			go func() {
				defer close(exited)
				if via == "Close" {
					_ = ex.Close()
					return
				}
				ended, cancel := context.WithCancel(bg)
				cancel()
				_ = ex.ShutdownGroup(ended, "g")
			}()
			recv(t, exited, via+" returned or exited")
			if r := wait(t, waiting); r.Status != executor.Cancelled {
				t.Errorf("waiting task: %v %v, want Cancelled", r.Status, r.Err)
			}
			if r := wait(t, h); r.Status != executor.Cancelled {
				t.Errorf("running task: %v %v, want Cancelled", r.Status, r.Err)
			}
			wantInvariants(t, ex)
			ex.Close()
		})
	}
}
