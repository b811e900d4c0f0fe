package executor_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// countingClock is a fake clock that counts its readings.
type countingClock struct {
	*clock.Fake
	reads atomic.Int64
}

func (c *countingClock) Now() time.Time { c.reads.Add(1); return c.Fake.Now() }

// drain shuts ex down, failing t if no task starts or completes for a hang
// guard's time while it waits. The guard bounds a stall, not the whole
// drain: a drain's length grows with the tasks left and shrinks with the
// CPU the machine lends, and a stress test's invariant loop, which holds
// every lock while it walks every queue, makes it grow with their square.
func drain(t *testing.T, ex *executor.Executor) {
	t.Helper()
	const stall = 30 * time.Second // a hang guard
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- ex.Shutdown(ctx) }()
	tick := time.NewTicker(stall)
	defer tick.Stop()
	last := moved(ex.Stats().TaskCounts)
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Shutdown: %v", err)
			}
			return
		case <-tick.C:
			n := moved(ex.Stats().TaskCounts)
			if n == last {
				cancel()
				t.Fatalf("Shutdown: no task started or completed in %v (%v); %+v", stall, <-done, ex.Stats())
			}
			last = n
		}
	}
}

// moved counts the starts and outcomes in c: it grows while tasks move.
func moved(c executor.TaskCounts) uint64 {
	return c.Started + c.Succeeded + c.Failed + c.Cancelled + c.Rejected + c.CallerRuns
}

func TestGoOutcomesAreCounted(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithGlobalMaxInFlight(2)})
	var ran atomic.Int32
	fns := []func(context.Context) error{
		func(context.Context) error { ran.Add(1); return nil },
		func(context.Context) error { ran.Add(1); return errStress },
		func(context.Context) error { ran.Add(1); panic("go panic") },
		func(context.Context) error { ran.Add(1); return context.Canceled },
	}
	for _, fn := range fns {
		if err := ex.Go(bg, "a", fn); err != nil {
			t.Fatalf("Go: %v", err)
		}
	}
	drain(t, ex)
	if n := ran.Load(); n != int32(len(fns)) {
		t.Fatalf("%d of %d ran", n, len(fns))
	}
	s := ex.Stats()
	want := executor.TaskCounts{Submitted: 4, Started: 4, Succeeded: 1, Failed: 2, Cancelled: 1}
	if s.TaskCounts != want {
		t.Fatalf("counts %+v, want %+v", s.TaskCounts, want)
	}
	if s.Running != 0 || s.RunningTasks != 0 {
		t.Fatalf("permits held after the panic: %+v", s)
	}
}

func TestGoPanicIsToldToTheListener(t *testing.T) {
	var got atomic.Value
	l := executor.ListenerFuncs{Completed: func(e executor.Event) { got.Store(e) }}
	ex := newExec(t, nil, executor.WithListener(l))
	if err := ex.Go(bg, "a", func(context.Context) error { panic("boom") }); err != nil {
		t.Fatal(err)
	}
	drain(t, ex)
	e, _ := got.Load().(executor.Event)
	var pe *executor.PanicError
	if e.Status != executor.Failed || !errors.As(e.Err, &pe) || pe.Value != "boom" {
		t.Fatalf("OnCompleted got %+v, want Failed with the panic", e)
	}
}

// TestGoRefusals runs each refusal with a listener (Go tasks timed) and
// without (untimed).
func TestGoRefusals(t *testing.T) {
	cancelled, cancel := context.WithCancel(bg)
	cancel()
	noop := func(context.Context) error { return nil }
	rejectedCount := func(c executor.TaskCounts) uint64 { return c.Rejected }
	for _, tc := range []struct {
		name       string
		rp         policy.RejectionPolicy
		ctx        context.Context
		group      string
		fn         func(context.Context) error
		wantErr    error // nil: Go returns nil
		status     func(executor.TaskCounts) uint64
		onRejected int32 // OnRejected calls the listener gets
	}{
		{"abort", policy.Abort, bg, "a", noop, executor.ErrRejected, rejectedCount, 1},
		{"discard", policy.Discard, bg, "a", noop, nil, rejectedCount, 1},
		{"empty group", policy.Discard, bg, "", noop, executor.ErrInvalidTask, rejectedCount, 1},
		{"nil fn", policy.Discard, bg, "a", nil, executor.ErrInvalidTask, rejectedCount, 1},
		{"nil ctx", policy.Discard, nil, "a", noop, executor.ErrInvalidTask, rejectedCount, 1},
		{"done ctx", policy.Abort, cancelled, "a", noop, context.Canceled, func(c executor.TaskCounts) uint64 { return c.Cancelled }, 0},
	} {
		for _, listen := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/listener=%v", tc.name, listen), func(t *testing.T) {
				var rejected atomic.Int32
				var opts []executor.Option
				if listen {
					opts = append(opts, executor.WithListener(executor.ListenerFuncs{Rejected: func(executor.Event) { rejected.Add(1) }}))
				}
				// One slot, taken: a valid task is refused at the
				// group's in-flight limit.
				ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1), policy.WithRejectionPolicy(tc.rp)}, opts...)
				g := newGate()
				defer g.open()
				submit(t, ex, executor.Task[string]{Group: "a", Fn: g.fn("holder")})
				g.waitStarted(t, 1)
				before := tc.status(ex.Stats().TaskCounts)

				var ran atomic.Bool
				fn := tc.fn
				if fn != nil {
					fn = func(ctx context.Context) error { ran.Store(true); return tc.fn(ctx) }
				}
				err := ex.Go(tc.ctx, tc.group, fn)
				switch {
				case tc.wantErr == nil && err != nil:
					t.Fatalf("Go: %v, want nil", err)
				case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
					t.Fatalf("Go: %v, want %v", err, tc.wantErr)
				}
				g.open()
				drain(t, ex)
				if ran.Load() {
					t.Fatal("a refused task ran")
				}
				if got := tc.status(ex.Stats().TaskCounts) - before; got != 1 {
					t.Fatalf("outcome counted %d times, want once (%+v)", got, ex.Stats().TaskCounts)
				}
				if listen && rejected.Load() != tc.onRejected {
					t.Fatalf("OnRejected called %d times, want %d", rejected.Load(), tc.onRejected)
				}
			})
		}
	}
}

// TestGoRejectionHandler: the handler decides for a refused Go task; it may
// run it in the caller, once.
func TestGoRejectionHandler(t *testing.T) {
	for _, runIt := range []bool{false, true} {
		errHandled := errors.New("handled")
		h := func(r *executor.Rejection) error {
			if runIt {
				r.RunInCaller()
				r.RunInCaller() // a second call does nothing
				return nil
			}
			return errHandled
		}
		ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1)}, executor.WithRejectionHandler(h))
		g := newGate()
		submit(t, ex, executor.Task[string]{Group: "a", Fn: g.fn("holder")})
		g.waitStarted(t, 1)
		runs := 0 // the handler runs it in this goroutine, if at all
		err := ex.Go(bg, "a", func(context.Context) error { runs++; return nil })
		g.open()
		drain(t, ex)
		s := ex.Stats()
		switch {
		case runIt && (err != nil || runs != 1 || s.CallerRuns != 1):
			t.Errorf("RunInCaller: Go %v, %d runs, counts %+v; want nil, 1 run, 1 CallerRuns", err, runs, s.TaskCounts)
		case !runIt && (!errors.Is(err, errHandled) || runs != 0 || s.Rejected != 1):
			t.Errorf("handler error: Go %v, %d runs, counts %+v; want the handler's error, 0 runs, 1 Rejected", err, runs, s.TaskCounts)
		}
	}
}

// TestGoQueueTimeout: a Go task that waits past the queue timeout is
// rejected with ErrQueueTimeout and never runs; with a timeout Go tasks
// are timed, and the listener sees the wait.
func TestGoQueueTimeout(t *testing.T) {
	clk := fakeClock()
	var timedOut atomic.Value
	l := executor.ListenerFuncs{Rejected: func(e executor.Event) { timedOut.Store(e) }}
	ex := newExec(t, []policy.Option{policy.WithGlobalMaxInFlight(1), policy.WithQueueTimeout(time.Second)},
		executor.WithClock(clk), executor.WithListener(l))
	g := newGate()
	defer g.open()
	submit(t, ex, executor.Task[string]{Group: "a", Fn: g.fn("holder")})
	g.waitStarted(t, 1)
	var ran atomic.Bool
	if err := ex.Go(bg, "b", func(context.Context) error { ran.Store(true); return nil }); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Second) // the timer fires: b is removed
	for deadline := time.Now().Add(30 * time.Second); timedOut.Load() == nil; {
		if time.Now().After(deadline) {
			t.Fatal("the Go task never timed out")
		}
		time.Sleep(time.Millisecond)
	}
	g.open()
	drain(t, ex)
	e := timedOut.Load().(executor.Event)
	if ran.Load() || !errors.Is(e.Err, executor.ErrQueueTimeout) || e.Queued < time.Second {
		t.Fatalf("ran %v; OnRejected %+v, want ErrQueueTimeout after at least 1s", ran.Load(), e)
	}
}

func TestGoCallerRuns(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1), policy.WithRejectionPolicy(policy.CallerRuns)})
	g := newGate()
	defer g.open()
	submit(t, ex, executor.Task[string]{Group: "a", Fn: g.fn("holder")})
	g.waitStarted(t, 1)
	ran := false // no synchronisation: it must run in this goroutine
	if err := ex.Go(bg, "a", func(context.Context) error { ran = true; return nil }); err != nil {
		t.Fatal(err)
	}
	if !ran {
		t.Fatal("Go returned before the caller ran the refused task")
	}
	if s := ex.Stats(); s.CallerRuns != 1 || s.Succeeded != 1 {
		t.Fatalf("counts %+v", s.TaskCounts)
	}
}

func TestGoAfterShutdown(t *testing.T) {
	ex := newExec(t, nil)
	drain(t, ex)
	if err := ex.Go(bg, "a", func(context.Context) error { t.Error("ran after Shutdown"); return nil }); !errors.Is(err, executor.ErrShutdown) {
		t.Fatalf("Go after Shutdown: %v, want ErrShutdown", err)
	}
}

// TestGoCancel cancels Go tasks through their context: a waiting one is
// removed and never runs, a running one sees its context end.
func TestGoCancel(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithGlobalMaxInFlight(1)})
	runCtx, cancelRun := context.WithCancel(bg)
	started := make(chan struct{})
	var sawCancel atomic.Bool
	if err := ex.Go(runCtx, "a", func(ctx context.Context) error {
		close(started)
		<-ctx.Done()
		sawCancel.Store(true)
		return ctx.Err()
	}); err != nil {
		t.Fatal(err)
	}
	recv(t, started, "the Go task started")
	waitCtx, cancelWait := context.WithCancel(bg)
	var waiterRan atomic.Bool
	if err := ex.Go(waitCtx, "b", func(context.Context) error { waiterRan.Store(true); return nil }); err != nil {
		t.Fatal(err)
	}
	if s := ex.Stats(); s.Waiting != 1 {
		t.Fatalf("want one waiting task: %+v", s)
	}
	cancelWait()
	// The watcher removes it in its own goroutine: wait for that, with a
	// hang guard, while the running task still holds the only permit.
	for deadline := time.Now().Add(30 * time.Second); ex.Stats().Waiting != 0; {
		if time.Now().After(deadline) {
			t.Fatal("the cancelled Go task is still waiting")
		}
		time.Sleep(time.Millisecond)
	}
	cancelRun()
	drain(t, ex)
	if !sawCancel.Load() || waiterRan.Load() {
		t.Fatalf("running task saw cancel: %v; waiting task ran: %v", sawCancel.Load(), waiterRan.Load())
	}
	if s := ex.Stats(); s.Cancelled != 2 || s.Started != 1 {
		t.Fatalf("counts %+v, want 2 cancelled, 1 started", s.TaskCounts)
	}
}

// TestGoShutdownWaits: Shutdown and ShutdownGroup wait for Go tasks. The
// tasks are released only once Shutdown waits (it asks its context's
// Done), or has returned: a Shutdown that does not wait for them returns
// before they finish, whatever the machine's speed.
func TestGoShutdownWaits(t *testing.T) {
	ex := newExec(t, nil)
	release := make(chan struct{})
	closeAtEnd(t, release)
	started := make(chan struct{}, 2)
	var finished atomic.Int32
	for _, grp := range []string{"a", "b"} {
		if err := ex.Go(bg, grp, func(context.Context) error {
			started <- struct{}{}
			<-release
			finished.Add(1)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	recv(t, started, "the first Go task started")
	recv(t, started, "the second Go task started")
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if err := ex.ShutdownGroup(ctx, "a"); !errors.Is(err, context.Canceled) {
		t.Fatalf("ShutdownGroup with a running Go task and a done ctx: %v", err)
	}
	type shutdown struct {
		err      error
		finished int32 // when Shutdown returned
	}
	done := make(chan shutdown, 1)
	waiting := newWaitingCtx()
	go func() {
		err := ex.Shutdown(waiting)
		done <- shutdown{err, finished.Load()}
	}()
	select {
	case r := <-done:
		t.Fatalf("Shutdown returned (%v) with Go tasks running, without waiting", r.err)
	case <-waiting.asked:
	}
	close(release)
	r := recv(t, done, "Shutdown returned once the Go tasks had finished")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.finished != 2 {
		t.Fatalf("%d of 2 finished when Shutdown returned", r.finished)
	}
}

// TestGoReadsNoClock: with neither a listener nor a queue timeout, a task
// started with Go never reads the clock; with a listener it is timed, and
// the listener sees each task's own run time.
func TestGoReadsNoClock(t *testing.T) {
	const n = 200
	t.Run("no listener", func(t *testing.T) {
		clk := &countingClock{Fake: fakeClock()}
		ex := newExec(t, []policy.Option{policy.WithGlobalMaxInFlight(2), policy.WithDefaultMaxConcurrency(2)}, executor.WithClock(clk))
		before := clk.reads.Load()
		var wg sync.WaitGroup
		wg.Add(n)
		for range n {
			if err := ex.Go(bg, "a", func(context.Context) error { wg.Done(); return nil }); err != nil {
				t.Fatal(err)
			}
		}
		waitAll(t, &wg, "every Go task ran")
		drain(t, ex)
		if reads := clk.reads.Load() - before; reads != 0 {
			t.Errorf("%d clock reads for %d Go tasks, want 0", reads, n)
		}
	})
	t.Run("listener", func(t *testing.T) {
		clk := fakeClock()
		var mu sync.Mutex
		var durations []time.Duration
		l := executor.ListenerFuncs{Completed: func(e executor.Event) {
			mu.Lock()
			durations = append(durations, e.Duration)
			mu.Unlock()
		}}
		// One at a time, so that each run sees only its own advance.
		ex := newExec(t, []policy.Option{policy.WithGlobalMaxInFlight(1)}, executor.WithClock(clk), executor.WithListener(l))
		for range n {
			if err := ex.Go(bg, "a", func(context.Context) error { clk.Advance(time.Millisecond); return nil }); err != nil {
				t.Fatal(err)
			}
		}
		drain(t, ex)
		mu.Lock()
		defer mu.Unlock()
		if len(durations) != n {
			t.Fatalf("listener saw %d completions, want %d", len(durations), n)
		}
		for i, d := range durations {
			if d != time.Millisecond {
				t.Fatalf("completion %d: Duration %v, want 1ms", i, d)
			}
		}
	})
}

// TestGoThenHandleTimings: a worker that ran an untimed Go task, and so has
// no time read, times the handle task it runs next correctly.
func TestGoThenHandleTimings(t *testing.T) {
	clk := fakeClock()
	ex := newExec(t, []policy.Option{policy.WithGlobalMaxInFlight(1)}, executor.WithClock(clk))
	release, started := make(chan struct{}), make(chan struct{})
	closeAtEnd(t, release)
	if err := ex.Go(bg, "a", func(context.Context) error { close(started); <-release; return nil }); err != nil {
		t.Fatal(err)
	}
	recv(t, started, "the Go task started")
	h := submit(t, ex, executor.Task[int]{Group: "b", Fn: func(context.Context) (int, error) {
		clk.Advance(3 * time.Second)
		return 1, nil
	}})
	clk.Advance(5 * time.Second)
	close(release) // the Go task's worker goes on with h
	r := wait(t, h)
	if r.Status != executor.Success || r.Queued != 5*time.Second || r.Duration != 3*time.Second {
		t.Fatalf("result %+v, want Success, Queued 5s, Duration 3s", r)
	}
}

// TestGoStress mixes Go and Submit from many goroutines in a configuration
// where the lanes open and Go tasks go untimed, while limits change, groups
// are evicted and tasks fail, panic and are cancelled. It checks, from
// inside the tasks and at the end: limits never exceeded, the books always
// consistent, a Go task that Go refused never runs, one it accepted runs
// exactly once unless cancelled, and every outcome is counted once.
func TestGoStress(t *testing.T) {
	const (
		submitters = 16
		perWorker  = 600
		groups     = 8
		maxGlobal  = 6
		maxConc    = 3
	)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	ex := newExec(t, []policy.Option{
		policy.WithGlobalMaxInFlight(maxGlobal),
		policy.WithDefaultMaxInFlight(2000),
		policy.WithDefaultMaxConcurrency(2),
		policy.WithDefaultQueueThreshold(1500),
	}, executor.WithMaxIdleGroups(2))
	var (
		globalRunning atomic.Int64
		groupRunning  [groups]atomic.Int64
		broken        violations
	)
	violate := broken.add
	chaos := newBackground()
	rnd := sharedRand(seed)
	chaos.churn(ex, rnd, 128, groups, maxConc, 3, maxGlobal, violate)
	chaos.checkInvariants(ex, violate)

	type record struct {
		h        *executor.Handle[int] // nil: started with Go
		err      error
		runs     *atomic.Int32
		cancelFn context.CancelFunc
	}
	records := make([][]record, submitters)
	var wg sync.WaitGroup
	for w := range submitters {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seed, uint64(w)+2))
			for i := range perWorker {
				gi := r.IntN(groups)
				grp := fmt.Sprint("g", gi)
				rec := record{runs: new(atomic.Int32)}
				ctx := bg
				if r.IntN(6) == 0 {
					ctx, rec.cancelFn = context.WithCancel(bg)
				}
				kind := stressKind(r.IntN(int(stressSucceeds) + 1))
				if kind == stressWaitsCancel && rec.cancelFn == nil {
					kind = stressSucceeds // it would never return
				}
				useGo := r.IntN(2) == 0
				weight := 1
				if !useGo {
					weight = r.IntN(3) // 0 means 1
				}
				fn := stressBody(rec.runs, weight, stressRunning{&globalRunning, &groupRunning[gi], maxGlobal, maxConc, grp},
					violate, kind, func() {
						for range 10 {
							runtime.Gosched()
						}
					}, i)
				if useGo {
					rec.err = ex.Go(ctx, grp, func(ctx context.Context) error { _, err := fn(ctx); return err })
				} else {
					rec.h, rec.err = executor.Submit(ex, ctx, executor.Task[int]{Group: grp, Weight: weight, Fn: fn})
				}
				if rec.cancelFn != nil && r.IntN(2) == 0 {
					rec.cancelFn()
				}
				records[w] = append(records[w], rec)
				if r.IntN(4) == 0 {
					runtime.Gosched()
				}
			}
		})
	}
	wg.Wait()
	for _, rs := range records {
		for _, rec := range rs {
			if rec.cancelFn != nil {
				rec.cancelFn() // tasks that wait on their context end now
			}
		}
	}
	drain(t, ex)
	chaos.halt()

	goRefused, goRan := 0, 0
	for _, rs := range records {
		for _, rec := range rs {
			runs := rec.runs.Load()
			if rec.h != nil {
				r, ok := rec.h.Result()
				if !ok {
					t.Fatal("a handle is not complete after Shutdown returned")
				}
				checkRuns(t, "submitted", r, runs)
				continue
			}
			switch {
			case rec.err != nil && runs != 0:
				t.Errorf("Go refused a task (%v) that then ran %d times", rec.err, runs)
			case rec.err == nil && rec.cancelFn == nil && runs != 1:
				t.Errorf("Go accepted an uncancelled task that ran %d times", runs)
			case runs > 1:
				t.Errorf("a Go task ran %d times", runs)
			}
			if rec.err != nil {
				goRefused++
			}
			goRan += int(runs)
		}
	}
	broken.check(t)
	s := ex.Stats()
	if s.Running != 0 || s.Waiting != 0 || s.RunningTasks != 0 {
		t.Errorf("after Shutdown: %+v", s)
	}
	total := uint64(submitters * perWorker)
	if got := s.Succeeded + s.Failed + s.Cancelled + s.Rejected; got != total || s.Submitted != total {
		t.Errorf("outcomes %d, submitted %d, want %d (%+v)", got, s.Submitted, total, s.TaskCounts)
	}
	t.Logf("Go tasks: %d ran, %d refused; stats %+v", goRan, goRefused, s.TaskCounts)
	if goRan == 0 || s.Failed == 0 || s.Cancelled == 0 {
		t.Errorf("the mix did not exercise Go tasks running, failing and being cancelled: %+v", s.TaskCounts)
	}
}

// pausingClock is a fake clock whose next reading, once armed, is taken and
// then held until resume: the reader is stopped just after reading.
type pausingClock struct {
	*clock.Fake
	armed  atomic.Bool
	paused chan struct{}
	resume chan struct{}
}

func (c *pausingClock) Now() time.Time {
	t := c.Fake.Now()
	if c.armed.CompareAndSwap(true, false) {
		close(c.paused)
		<-c.resume
	}
	return t
}

// TestStartAfterEndReading: a worker reads the end of its task's run before
// it takes the lock; a task submitted after that reading and started by the
// same worker must not get a wait computed from it (it was negative).
func TestStartAfterEndReading(t *testing.T) {
	clk := &pausingClock{Fake: fakeClock(), paused: make(chan struct{}), resume: make(chan struct{})}
	ex := newExec(t, []policy.Option{policy.WithGlobalMaxInFlight(1)}, executor.WithClock(clk))
	a := submit(t, ex, executor.Task[int]{Group: "a", Fn: func(context.Context) (int, error) {
		clk.armed.Store(true) // the worker's next reading is the run's end
		return 0, nil
	}})
	recv(t, clk.paused, "a's worker read the clock at a's end")
	clk.Advance(5 * time.Second)
	b := submit(t, ex, executor.Task[int]{Group: "b", Fn: func(context.Context) (int, error) {
		clk.Advance(3 * time.Second)
		return 1, nil
	}})
	close(clk.resume) // a's worker finishes a and starts b
	if r := wait(t, a); r.Status != executor.Success {
		t.Fatalf("a: %+v", r)
	}
	if r := wait(t, b); r.Status != executor.Success || r.Queued != 0 || r.Duration != 3*time.Second {
		t.Fatalf("b: %+v, want Success, Queued 0, Duration 3s", r)
	}
}

// TestGoReusesTasks: a busy group keeps its finished Go tasks with
// context.Background for its next Go calls, so Go allocates nothing once
// warm, and a kept task runs its new function, once.
func TestGoReusesTasks(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(2)})
	g := newGate()
	defer g.open()
	submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("holder")}) // keeps the group busy
	g.waitStarted(t, 1)
	done := make(chan int, 1)
	var calls [2]func(context.Context) error
	for i := range calls {
		calls[i] = func(context.Context) error { done <- i; return nil }
	}
	var finished uint64
	run := func(i int) {
		if err := ex.Go(bg, "g", calls[i]); err != nil {
			t.Fatal(err)
		}
		if got := <-done; got != i {
			t.Fatalf("ran function %d, want %d", got, i)
		}
		// The function's signal comes before its task's finish, which
		// keeps the task for the next Go: wait for the finish, or a
		// worker paused in between (a loaded machine) has the next Go
		// allocate.
		finished++
		for s, _ := ex.GroupStats("g"); s.Succeeded < finished; s, _ = ex.GroupStats("g") {
			runtime.Gosched()
		}
	}
	run(0) // a task to keep
	for range 3 {
		run(1)
		run(0)
	}
	if n := testing.AllocsPerRun(100, func() { run(1) }); n > 0 {
		t.Errorf("Go allocated %v times per call in a busy group, want 0", n)
	}
	if s := groupStats(t, ex, "g"); s.Succeeded < 100 || s.Running != 1 {
		t.Errorf("stats %+v", s)
	}
}

// TestGoFanOutReusesTasks: Go tasks queued beyond what their group keeps
// for reuse are pooled once they complete, so a fan-out larger than the
// group's concurrency limit, repeated, allocates next to nothing, and
// every pooled task runs its new function, once. (The race detector
// makes the pool drop some of what it is given: allocations are checked
// without it.)
func TestGoFanOutReusesTasks(t *testing.T) {
	const fanOut = 200
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(2), policy.WithDefaultMaxInFlight(policy.Unlimited)})
	ran := make([]atomic.Int32, fanOut)
	var wg sync.WaitGroup
	calls := make([]func(context.Context) error, fanOut)
	for i := range calls {
		calls[i] = func(context.Context) error { ran[i].Add(1); wg.Done(); return nil }
	}
	round := func() {
		g := newGate()
		submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("holder")}) // the fan-out queues behind it
		g.waitStarted(t, 1)
		wg.Add(fanOut)
		for _, call := range calls {
			if err := ex.Go(bg, "g", call); err != nil {
				t.Fatal(err)
			}
		}
		g.open()
		wg.Wait()
	}
	round()
	rounds := 1
	if n := testing.AllocsPerRun(20, round); !raceEnabled && n > fanOut/10 {
		t.Errorf("a fan-out of %d Go tasks allocated %v times, want at most %d", fanOut, n, fanOut/10)
	}
	rounds += 21
	for i := range ran {
		if got := ran[i].Load(); got != int32(rounds) {
			t.Fatalf("function %d ran %d times in %d rounds", i, got, rounds)
		}
	}
}
