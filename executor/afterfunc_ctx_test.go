package executor_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// stopPanicCtx is a cancellable context with an AfterFunc method of its
// own, which context.AfterFunc calls to watch it; the stop function that
// its first call returns panics: the watcher's on a queued task. (A run
// context derived from it registers next; its stop is called on the
// task's worker, where a panic goes on as any of a run context's.) It
// never ends.
type stopPanicCtx struct {
	context.Context // Background: no deadline, no values, no error
	done            chan struct{}
	calls           atomic.Int32
	panicAt         int32 // the call whose stop panics, from 1; 0 for the first
}

func (c *stopPanicCtx) Done() <-chan struct{} { return c.done }

func (c *stopPanicCtx) AfterFunc(func()) func() bool {
	if c.calls.Add(1) != max(c.panicAt, 1) {
		return func() bool { return true }
	}
	return func() bool { panic("stop of a context's AfterFunc") }
}

// TestWatcherStopPanicLeavesNoLockHeld: the watcher on a queued task's
// Submit context is stopped when the task starts, or when it is removed
// (Cancel). A context whose own AfterFunc returns a stop that panics
// neither leaves its group's lock held nor keeps the task's permits: the
// task runs (or completes Cancelled), and the group serves the next one.
func TestWatcherStopPanicLeavesNoLockHeld(t *testing.T) {
	for _, via := range []string{"start", "cancel"} {
		t.Run(via, func(t *testing.T) {
			// A worker that panics is recovered, as a pool does: without
			// the recover here a panic on a worker would end the test binary.
			spawn := func(f func()) {
				go func() {
					defer func() { _ = recover() }()
					f()
				}()
			}
			p, err := policy.New(policy.WithDefaultMaxConcurrency(1))
			if err != nil {
				t.Fatal(err)
			}
			ex, err := executor.New(p, executor.WithSpawn(spawn))
			if err != nil {
				t.Fatal(err)
			}
			gt := newGate()
			submit(t, ex, executor.Task[string]{Group: "g", Fn: gt.fn("a")})
			gt.waitStarted(t, 1)
			ctx := &stopPanicCtx{Context: bg, done: make(chan struct{})}
			hb, err := executor.Submit(ex, ctx, executor.Task[string]{Group: "g", Fn: func(context.Context) (string, error) { return "c", nil }})
			if err != nil {
				t.Fatal(err)
			}
			want := executor.Success
			if via == "cancel" {
				want = executor.Cancelled
				var cancelled bool
				panicked := true
				func() {
					defer func() { _ = recover() }()
					cancelled = hb.Cancel()
					panicked = false
				}()
				if panicked || !cancelled {
					t.Errorf("Cancel of a waiting task: panicked %v, reported %v; want true without a panic", panicked, cancelled)
				}
			}
			gt.open()
			// The next task of the group must run: a hang guard, not a
			// timing assertion (the group's lock held is a deadlock).
			done := make(chan executor.Result[string], 1)
			go func() {
				hn, _ := executor.Submit(ex, bg, executor.Task[string]{Group: "g", Fn: func(context.Context) (string, error) { return "d", nil }})
				r, _ := hn.Wait(bg)
				done <- r
			}()
			select {
			case r := <-done:
				if r.Status != executor.Success {
					t.Fatalf("next task: %v %v", r.Status, r.Err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the group serves no task after a watcher's stop panicked: its lock is held or its permits kept")
			}
			if r := wait(t, hb); r.Status != want {
				t.Errorf("task with the context: %v %v, want %v", r.Status, r.Err, want)
			}
			wantInvariants(t, ex)
			ex.Close()
		})
	}
}

// TestDoContextStopPanicReleasesPermits: a Do call's fn that asks its
// context for Done makes the executor watch the call's context (through
// its own AfterFunc method, here) until the call ends. A stop of that watch
// that panics neither keeps the call's permits nor leaves the run
// context's lock held: Do returns fn's error, the context that fn kept
// answers, and the group serves the next call.
func TestDoContextStopPanicReleasesPermits(t *testing.T) {
	p, err := policy.New(policy.WithDefaultMaxConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	// Not closed if the call's permits are kept: Close would wait for ever.
	ex, err := executor.New(p)
	if err != nil {
		t.Fatal(err)
	}
	ctx := &stopPanicCtx{Context: bg, done: make(chan struct{})}
	var kept context.Context
	panicked := true
	func() {
		defer func() { _ = recover() }()
		err = ex.Do(ctx, "g", func(ctx context.Context) error {
			kept = ctx
			_ = ctx.Done() // a channel is made, and ctx watched
			return errBackend
		})
		panicked = false
	}()
	if panicked || err != errBackend {
		t.Errorf("Do: panicked %v, returned %v; want fn's error without a panic", panicked, err)
	}
	// A hang guard, not a timing assertion: a lock held or permits kept
	// is a deadlock.
	done := make(chan error, 1)
	go func() {
		if kept != nil {
			<-kept.Done() // closed by the call's end
		}
		done <- ex.Do(bg, "g", func(context.Context) error { return nil })
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("next Do: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call's context or its group is stuck after the stop of its watch panicked")
	}
	wantInvariants(t, ex)
	ex.Close()
}

// TestDoBoundContextStopPanicReleasesPermits: a Do call holding a cluster
// permit runs with a context derived from the call's (a standard one, for
// the permit's cancel), cancelled when the call ends, which stops its
// watch on the call's context. A context whose own AfterFunc returns a
// stop that panics makes that end panic, after fn returned: the panic goes
// on up Do's caller, as any of a run context's, but the call's permits,
// its group's and the cluster's, are given back.
func TestDoBoundContextStopPanicReleasesPermits(t *testing.T) {
	m := newMemLimiter()
	m.avail[""] = 1
	p, err := policy.New(policy.WithDefaultMaxConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	// Not closed if the call's permits are kept: Close would wait for ever.
	ex, err := executor.New(p, executor.WithGlobalLimiter(m))
	if err != nil {
		t.Fatal(err)
	}
	ctx := &stopPanicCtx{Context: bg, done: make(chan struct{})}
	ran := false
	func() {
		defer func() { _ = recover() }()
		_ = ex.Do(ctx, "g", func(context.Context) error { ran = true; return nil })
	}()
	if !ran {
		t.Fatal("fn did not run")
	}
	wantServes(t, ex, "g", "after the end of one whose context's stop panicked")
	if n := m.outstanding(); n != 0 {
		t.Errorf("%d cluster permits still out", n)
	}
	wantInvariants(t, ex)
	ex.Close()
}

// TestCallerRunsContextStopPanicCompletes: a task run in its caller
// (CallerRuns, or Rejection.RunInCaller) runs with a context derived from
// Submit's, cancelled once Fn returns, which stops its watch on Submit's
// context. A context whose own AfterFunc returns a stop that panics makes
// that end panic: the panic goes on up the caller, but the task is counted
// and its handle completes with Fn's outcome.
func TestCallerRunsContextStopPanicCompletes(t *testing.T) {
	for _, via := range []string{"CallerRuns", "RunInCaller"} {
		t.Run(via, func(t *testing.T) {
			var ex *executor.Executor
			if via == "CallerRuns" {
				ex, _ = full(t, policy.CallerRuns)
			} else {
				ex, _ = full(t, policy.Abort, executor.WithRejectionHandler(func(r *executor.Rejection) error {
					r.RunInCaller()
					return nil
				}))
			}
			ctx := &stopPanicCtx{Context: bg, done: make(chan struct{})}
			var h *executor.Handle[int]
			func() {
				defer func() { _ = recover() }()
				h, _ = executor.Submit(ex, ctx, executor.Task[int]{Group: "g", Fn: func(context.Context) (int, error) { return 7, nil }})
			}()
			s := groupStats(t, ex, "g")
			if s.CallerRuns != 1 || s.Succeeded != 1 {
				t.Errorf("counts %+v; want the task run in its caller counted, Succeeded", s.TaskCounts)
			}
			if h == nil {
				return // Submit's caller panicked: no handle to look at
			}
			if r := wait(t, h); r.Status != executor.Success || r.Value != 7 {
				t.Errorf("result %v %v %v; want Success 7", r.Status, r.Value, r.Err)
			}
		})
	}
}

// TestRunningTaskCancelWithStopPanic: a started task's run context derives
// from its Submit context, and cancelling it stops its watch on that
// context, through the stop that the context's own AfterFunc method
// returned. Cancelling the running task, by Handle.Cancel or by Close,
// does not panic when that stop does: the run context is cancelled by
// then, and the canceller is not the task's goroutine.
func TestRunningTaskCancelWithStopPanic(t *testing.T) {
	for _, via := range []string{"cancel", "close"} {
		t.Run(via, func(t *testing.T) {
			ex := newExec(t, nil)
			// The run context's watch is the context's first AfterFunc
			// call: its stop panics.
			ctx := &stopPanicCtx{Context: bg, done: make(chan struct{})}
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
			if via == "cancel" {
				var cancelled bool
				mustNotPanic(t, "Cancel of a running task", func() { cancelled = h.Cancel() })
				if !cancelled {
					t.Error("Cancel of a running task reported false")
				}
			} else {
				mustNotPanic(t, "Close with a running task", func() { ex.Close() })
			}
			if r := wait(t, h); r.Status != executor.Cancelled {
				t.Errorf("task: %v %v, want Cancelled", r.Status, r.Err)
			}
		})
	}
}

// TestWatcherArmedLateStopPanic: a task that starts before the watcher on
// its Submit context is armed has that watcher stopped at once by Submit,
// once it finds the task no longer waiting. A stop that panics there (the
// context's own AfterFunc method's) does not go up Submit's caller, which
// would lose the handle of a task that runs: it is ignored, as where the
// task's worker or its removal stops the watcher.
func TestWatcherArmedLateStopPanic(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)})
	gt := newGate()
	defer gt.open()
	submit(t, ex, executor.Task[string]{Group: "g", Fn: gt.fn("blocker")})
	gt.waitStarted(t, 1)
	// The task's run context watches the context first (call 1), on its
	// worker; the watcher that Submit arms after is call 2.
	ctx := &stopPanicCtx{Context: bg, done: make(chan struct{}), panicAt: 2}
	ran := make(chan struct{})
	var once sync.Once
	executor.SetHookQueued(func() {
		once.Do(func() {
			gt.open() // the blocker ends: the queued task starts, and runs
			recv(t, ran, "the queued task ran")
		})
	})
	defer executor.SetHookQueued(nil)
	var h *executor.Handle[string]
	mustNotPanic(t, "Submit", func() {
		var err error
		h, err = executor.Submit(ex, ctx, executor.Task[string]{Group: "g", Fn: func(context.Context) (string, error) {
			close(ran)
			return "ran", nil
		}})
		if err != nil {
			t.Error(err)
		}
	})
	if r := wait(t, h); r.Status != executor.Success {
		t.Errorf("task: %v %v, want Success", r.Status, r.Err)
	}
}

// watchPanicCtx is a cancellable context whose own AfterFunc method
// panics: a run context derived from it panics as it is made. It never
// ends.
type watchPanicCtx struct {
	context.Context // Background: no deadline, no values, no error
	done            chan struct{}
}

func (c *watchPanicCtx) Done() <-chan struct{} { return c.done }

func (c *watchPanicCtx) AfterFunc(func()) func() bool { panic("a context's AfterFunc") }

// TestRunContextPanicStartedEvent: a task whose run context panics as it
// is made (its Submit context is user code) never runs Fn, and ends its
// worker, as a panic of a run context does. It was started under the
// limits, and the listener hears so: OnStarted, then OnCompleted with
// Event.Started set, and TaskCounts.Started counts it, once.
func TestRunContextPanicStartedEvent(t *testing.T) {
	var started, completedStarted, completed atomic.Int32
	l := executor.ListenerFuncs{
		Started: func(executor.Event) { started.Add(1) },
		Completed: func(e executor.Event) {
			if e.Started {
				completedStarted.Add(1)
			}
			completed.Add(1)
		},
	}
	// The panic goes on up the worker: recovered here, as a pool does.
	spawn := func(f func()) {
		go func() {
			defer func() { _ = recover() }()
			f()
		}()
	}
	ex := newExec(t, nil, executor.WithListener(l), executor.WithSpawn(spawn))
	ctx := &watchPanicCtx{Context: bg, done: make(chan struct{})}
	h, err := executor.Submit(ex, ctx, executor.Task[string]{Group: "g", Fn: func(context.Context) (string, error) {
		t.Error("Fn ran with a run context that panicked")
		return "", nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if r := wait(t, h); r.Status != executor.Failed {
		t.Errorf("task: %v %v, want Failed", r.Status, r.Err)
	}
	drain(t, ex)
	s := ex.Stats()
	if completed.Load() != 1 || started.Load() != 1 || completedStarted.Load() != 1 || s.Started != 1 {
		t.Errorf("OnStarted %d, OnCompleted %d (%d with Event.Started), TaskCounts.Started %d; want 1 each",
			started.Load(), completed.Load(), completedStarted.Load(), s.Started)
	}
}

// TestWatcherArmPanicLeavesNoQueuedTask: a queued task whose Submit (or
// Go) context can end is watched, through context.AfterFunc, which calls
// the context: its own AfterFunc method, or its Done again. One that
// panics goes on up the caller, who has no handle then: the task leaves
// its queue first (Failed, ErrGoexit, never started), rather than
// starting later on a worker, where its context would panic again.
func TestWatcherArmPanicLeavesNoQueuedTask(t *testing.T) {
	for _, via := range []string{"Submit", "Go"} {
		for _, ctxKind := range []string{"AfterFunc", "Done"} {
			t.Run(via+"/"+ctxKind, func(t *testing.T) {
				var failed, started atomic.Int32
				l := executor.ListenerFuncs{
					Started: func(executor.Event) { started.Add(1) },
					Completed: func(e executor.Event) {
						if e.Status == executor.Failed && !e.Started && e.Err == executor.ErrGoexit {
							failed.Add(1)
						}
					},
				}
				// A worker that panics is recovered, as a pool does, and
				// counted: the task must not start.
				var workerPanics atomic.Int32
				spawn := func(f func()) {
					go func() {
						defer func() {
							if recover() != nil {
								workerPanics.Add(1)
							}
						}()
						f()
					}()
				}
				ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)}, executor.WithListener(l), executor.WithSpawn(spawn))
				gt := newGate()
				defer gt.open()
				submit(t, ex, executor.Task[string]{Group: "g", Fn: gt.fn("blocker")})
				gt.waitStarted(t, 1)
				var ctx context.Context = &watchPanicCtx{Context: bg, done: make(chan struct{})}
				if ctxKind == "Done" {
					// Its first Done is the caller's; context.AfterFunc asks again.
					ctx = &donePanicCtx{Context: bg, done: make(chan struct{}), panicAt: 2}
				}
				fn := func(context.Context) error {
					t.Error("the task ran though its context panicked as it was watched")
					return nil
				}
				panicked := true
				func() {
					defer func() { _ = recover() }()
					if via == "Submit" {
						_, _ = executor.Submit(ex, ctx, executor.Task[int]{Group: "g", Fn: func(ctx context.Context) (int, error) { return 0, fn(ctx) }})
					} else {
						_ = ex.Go(ctx, "g", fn)
					}
					panicked = false
				}()
				if !panicked {
					t.Fatalf("%s returned though its context panicked", via)
				}
				if s := groupStats(t, ex, "g"); s.Waiting != 0 {
					t.Errorf("after %s panicked: %d waiting, want 0", via, s.Waiting)
				}
				gt.open()
				drain(t, ex)
				if s := ex.Stats(); s.Started != 1 || started.Load() != 1 || failed.Load() != 1 || workerPanics.Load() != 0 {
					t.Errorf("Started %d, OnStarted %d, failed unstarted with ErrGoexit %d, worker panics %d; want 1, 1, 1, 0",
						s.Started, started.Load(), failed.Load(), workerPanics.Load())
				}
			})
		}
	}
}
