package executor_test

// pond v2's pool, subpool, task group, result and task tests, ported to the
// executor.
//
// Source: github.com/alitto/pond/v2 (MIT License, Copyright (c) 2020
// Alejandro Durante), v2.7.1 (commit e309c37e): pool_test.go,
// subpool_test.go, group_test.go, result_test.go and task_test.go, and the
// cases of default_test.go that its package-level pool shares with a pool
// (TestSubmit, TestSubmitWithError, TestSubmitWithPanic, TestNewGroup,
// TestNewSubpool: the executor has no default one, so they run on a new
// executor). These test files are as in v2.7.0 (commit a2e34e8e). Each
// case names the upstream tests it ports, and each port is named TestPond
// and a name of its own. The scripts of the cases are ported; no upstream
// code is.
//
// What was adapted, and why:
//   - A pond pool of maxConcurrency n is the global in-flight limit n; its
//     tasks are one group's, with no concurrency limit of its own. A subpool
//     of maxConcurrency m is a group whose concurrency limit is m. The
//     executor has one level of groups under the global limit: a subpool of
//     a subpool is a group with its own limit under the global one, and its
//     tasks do not count against a sibling group's limit.
//   - WithQueueSize with WithNonBlocking is a group's in-flight limit (its
//     bulkhead: running plus waiting) or its queue threshold, and a task
//     refused for lack of room is refused at once, under Abort, with a
//     *RejectedError naming the limit (pond: ErrQueueFull). A Submit never
//     blocks: a blocking submit is CallerRuns, which slows the submitter
//     down to the executor's pace by running the refused task itself, or
//     a Do, whose caller waits in the queue until its task has run.
//   - StopAndWait is Shutdown (ShutdownGroup for a subpool); cancelling
//     the pool's context (WithContext) is Close (a ShutdownGroup whose
//     context has ended, for a subpool): waiting tasks complete Cancelled
//     with a cause matching ErrShutdown (ErrGroupShutdown), running ones
//     have their context cancelled. ErrPoolStopped is ErrShutdown
//     (ErrGroupShutdown for a stopped subpool), which matches ErrRejected.
//   - ErrPanic is a *PanicError; the counters are Stats and GroupStats.
//   - A task group is ExecuteAll, or handles submitted with one context.
//   - Upstream's sleeps and elapsed-time bounds become gates and counts of
//     running tasks taken inside the tasks, so no outcome depends on the
//     machine's speed.
//
// Where the executor's documented semantics differ from pond's on purpose,
// the case says so. Left out: TestPoolDefaultHasPanicRecoveryEnabled,
// TestPoolWithoutPanicRecoveryOption and
// TestInvokeTaskWithoutPanicRecoveryPanics (Submit and Go always recover;
// Do never does, which TestPondDoDoesNotRecoverPanics ports instead); the
// blocking half of TestPoolWithQueueSizeZero (a Submit that blocks, with
// nothing counted waiting, until a running task is done: Submit never
// blocks, and a Do that waits is counted waiting);
// TestPoolWithQueueSizeOne's queue size (TestPondBlockedSubmitterIsDo
// ports its blocked callers as Do calls); the task group cases whose Wait
// stops at the first error and cancels the group's context
// (TestResultTaskGroupWaitWithError's skipped tasks,
// TestResultTaskGroupWaitWithErrorInLastTask,
// TestResultTaskGroupWaitWithMultipleErrors,
// TestTaskGroupCanceledShouldSkipRemainingTasks, TestTaskGroupContext):
// ExecuteAll gives every task its own result and cancels nothing on an
// error, so TestPondGroupErrorStopsNothing says what it does instead;
// TestResultBackwardCompatibility and TestResultInterfaceCompatibility
// (type assertions, no behaviour); the benchmarks.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// pondPool is the policy of a pond pool of maxConcurrency n: the global
// limit n, over groups limited by nothing else unless more says so.
func pondPool(n int, more ...policy.Option) []policy.Option {
	return append([]policy.Option{
		policy.WithGlobalMaxInFlight(n),
		policy.WithDefaultMaxConcurrency(policy.Unlimited),
		policy.WithDefaultMaxInFlight(policy.Unlimited),
	}, more...)
}

// pondCounts checks the counters of an executor or a group.
func pondCounts(t *testing.T, what string, got, want executor.TaskCounts) {
	t.Helper()
	if got != want {
		t.Errorf("%s counts %+v, want %+v", what, got, want)
	}
}

func pondShutdown(t *testing.T, ex *executor.Executor) {
	t.Helper()
	if err := ex.Shutdown(guardCtx(t)); err != nil {
		t.Fatalf("Shutdown: %v: the tasks did not all finish", err)
	}
}

func pondNop(context.Context) (int, error) { return 0, nil }

// TestPoolSubmit: every task submitted runs once Shutdown returns, never
// more at once than the pool's limit.
func TestPondPoolSubmit(t *testing.T) {
	ex := newExec(t, pondPool(100))
	var executed atomic.Int64
	var running peak
	for range 1000 {
		err := ex.Go(bg, "pool", func(context.Context) error {
			running.enter()
			defer running.leave()
			runtime.Gosched()
			executed.Add(1)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	pondShutdown(t, ex)
	if n := executed.Load(); n != 1000 {
		t.Errorf("%d tasks ran, want 1000", n)
	}
	if m := running.max.Load(); m > 100 {
		t.Errorf("%d tasks ran at once, over the limit of 100", m)
	}
}

// TestPoolSubmitAndWait, TestResultPoolSubmitAndWait, TestSubmit.
func TestPondPoolSubmitAndWait(t *testing.T) {
	ex := newExec(t, pondPool(100))
	r := wait(t, submit(t, ex, executor.Task[int]{Group: "pool", Fn: func(context.Context) (int, error) { return 10, nil }}))
	if r.Status != executor.Success || r.Err != nil || r.Value != 10 {
		t.Fatalf("result %+v, want Success with 10", r)
	}
}

// TestPoolSubmitWithErr, TestSubmitWithError.
func TestPondPoolSubmitWithErr(t *testing.T) {
	ex := newExec(t, pondPool(100))
	sampleErr := errors.New("sample error")
	r := wait(t, submit(t, ex, executor.Task[int]{Group: "pool", Fn: func(context.Context) (int, error) { return 0, sampleErr }}))
	if r.Status != executor.Failed || r.Err != sampleErr {
		t.Fatalf("result %+v, want Failed with %v", r, sampleErr)
	}
}

// TestPoolSubmitWithPanic, TestResultPoolSubmitTaskWithPanic,
// TestSubmitWithPanic and TestInvokeTaskHandlesPanicByDefault: a panic is
// the task's error, a *PanicError that unwraps to the panic value when it
// is an error, and the executor runs the next task. pond writes the stack
// into the error's message; PanicError keeps it in Stack.
func TestPondPoolSubmitWithPanic(t *testing.T) {
	ex := newExec(t, pondPool(1))
	sampleErr := errors.New("sample error")
	for _, c := range []struct {
		value any
		msg   string
	}{
		{sampleErr, "executor: task panicked: sample error"},
		{"dummy panic", "executor: task panicked: dummy panic"},
	} {
		r := wait(t, submit(t, ex, executor.Task[int]{Group: "pool", Fn: func(context.Context) (int, error) { panic(c.value) }}))
		var pe *executor.PanicError
		if r.Status != executor.Failed || !errors.As(r.Err, &pe) || r.Value != 0 {
			t.Fatalf("result %+v, want Failed with a *PanicError", r)
		}
		if pe.Value != c.value || r.Err.Error() != c.msg {
			t.Errorf("panic error %q with value %v, want %q with %v", r.Err, pe.Value, c.msg, c.value)
		}
		if err, isErr := c.value.(error); isErr && !errors.Is(r.Err, err) {
			t.Errorf("%v does not match the panic's error", r.Err)
		}
		if !bytes.Contains(pe.Stack, []byte("runtime/debug.Stack")) {
			t.Errorf("stack %q", pe.Stack)
		}
	}
	// A panic in a task started with Go is counted as a failure.
	if err := ex.Go(bg, "pool", func(context.Context) error { panic(sampleErr) }); err != nil {
		t.Fatal(err)
	}
	if r := wait(t, submit(t, ex, executor.Task[int]{Group: "pool", Fn: succeeding})); r.Status != executor.Success {
		t.Fatalf("the task after the panics: %+v", r)
	}
	pondShutdown(t, ex)
	pondCounts(t, "executor", ex.Stats().TaskCounts, executor.TaskCounts{Submitted: 4, Started: 4, Succeeded: 1, Failed: 3})
}

// TestPoolWithoutPanicRecoveryOption,
// TestInvokeTaskWithoutPanicRecoveryPanics: pond recovers unless told not
// to. The executor's Submit and Go always recover; Do runs in its caller
// and lets a panic go on up the caller's stack (Do's doc), having released
// its permits and counted the call Failed.
func TestPondDoDoesNotRecoverPanics(t *testing.T) {
	ex := newExec(t, pondPool(1))
	func() {
		defer func() {
			if v := recover(); v != "boom" {
				t.Errorf("recovered %v, want boom", v)
			}
		}()
		_ = ex.Do(bg, "pool", func(context.Context) error { panic("boom") })
		t.Error("Do returned from a panicking fn")
	}()
	if s := ex.Stats(); s.Running != 0 {
		t.Fatalf("%d permits still running after the panic", s.Running)
	}
	// guardCtx: were the permit kept, this Do would wait for ever.
	if err := ex.Do(guardCtx(t), "pool", func(context.Context) error { return nil }); err != nil {
		t.Fatalf("Do after the panic: %v", err)
	}
	// Not recovered, but counted: Stats sees the panicking call Failed.
	pondCounts(t, "executor", ex.Stats().TaskCounts, executor.TaskCounts{Submitted: 2, Started: 2, Succeeded: 1, Failed: 1})
}

// TestPoolWithContextCanceled: cancelling the pool's context, here Close,
// ends the running tasks and runs no waiting one.
func TestPondPoolCloseCancels(t *testing.T) {
	ex := newExec(t, pondPool(10))
	const n = 1000
	var executed atomic.Int64
	g := newGate()
	hs := make([]*executor.Handle[int], n)
	for i := range hs {
		hs[i] = submit(t, ex, executor.Task[int]{Group: "pool", Fn: func(ctx context.Context) (int, error) {
			executed.Add(1)
			g.started <- ""
			<-ctx.Done()
			return 0, ctx.Err()
		}})
	}
	g.waitStarted(t, 10)
	if s := ex.Stats(); s.RunningTasks != 10 || s.Waiting != n-10 || s.Submitted != n {
		t.Fatalf("stats %+v, want 10 running, %d waiting, %d submitted", s, n-10, n)
	}
	if err := closeWithin(t, ex, "Close returned, the running tasks cancelled"); err != nil {
		t.Fatal(err)
	}
	if e := executed.Load(); e != 10 {
		t.Errorf("%d tasks ran, want the 10 running at Close", e)
	}
	for i, h := range hs {
		r, ok := h.Result()
		if !ok || r.Status != executor.Cancelled || !errors.Is(r.Err, context.Canceled) {
			t.Fatalf("task %d: %+v (complete %v), want Cancelled", i, r, ok)
		}
	}
	s := ex.Stats()
	if s.Running != 0 || s.RunningTasks != 0 || s.Waiting != 0 {
		t.Errorf("stats %+v after Close", s)
	}
	pondCounts(t, "executor", s.TaskCounts, executor.TaskCounts{Submitted: n, Started: 10, Cancelled: n})
}

// TestPoolStopAndWaitShouldNotDeadlockWhenContextCanceledWithQueuedTasks,
// TestSubpoolStopAndWaitShouldNotDeadlockWhenContextCanceledWithQueuedTasks:
// cancelling with a task running and one waiting completes the waiting one
// Cancelled and returns once the running one has finished. pond reports
// context.Canceled for the running task too; the executor cancels its
// context, and its outcome is what Fn returns (Handle.Cancel): this Fn
// ignores its context and succeeds.
func TestPondCancelWithQueuedTasks(t *testing.T) {
	for _, sub := range []bool{false, true} {
		t.Run(fmt.Sprint("subpool ", sub), func(t *testing.T) {
			ex := newExec(t, pondPool(1, policy.WithGroupMaxConcurrency("sub", 1)))
			started, release := make(chan struct{}), make(chan struct{})
			closeAtEnd(t, release)
			first := submit(t, ex, executor.Task[int]{Group: "sub", Fn: func(context.Context) (int, error) {
				close(started)
				<-release
				return 1, nil
			}})
			second := submit(t, ex, executor.Task[int]{Group: "sub", Fn: pondNop})
			recv(t, started, "the first task started")
			closed := make(chan error, 1)
			cause := executor.ErrShutdown
			if sub {
				cause = executor.ErrGroupShutdown
				ended, cancel := context.WithCancel(bg)
				cancel()
				if err := ex.ShutdownGroup(ended, "sub"); err != context.Canceled {
					t.Fatalf("ShutdownGroup = %v, want context.Canceled", err)
				}
			} else {
				go func() { closed <- ex.Close() }()
			}
			r2 := wait(t, second) // cancelled while the first still runs
			close(release)
			if !sub {
				if err := recv(t, closed, "Close returned once the running task finished"); err != nil {
					t.Fatal(err)
				}
			}
			if r2.Status != executor.Cancelled || !errors.Is(r2.Err, context.Canceled) || !errors.Is(r2.Err, cause) {
				t.Errorf("waiting task %+v, want Cancelled by %v", r2, cause)
			}
			if r1 := wait(t, first); r1.Status != executor.Success || r1.Value != 1 {
				t.Errorf("running task %+v, want what its Fn returned", r1)
			}
			pondShutdown(t, ex)
			gs := groupStats(t, ex, "sub")
			if gs.Waiting != 0 || gs.RunningTasks != 0 {
				t.Errorf("group stats %+v", gs)
			}
			pondCounts(t, "group", gs.TaskCounts, executor.TaskCounts{Submitted: 2, Started: 1, Succeeded: 1, Cancelled: 1})
			pondCounts(t, "executor", ex.Stats().TaskCounts, gs.TaskCounts)
		})
	}
}

// TestTaskGroupWaitShouldNotDeadlockWhenPoolContextCanceledWithQueuedTasks:
// ExecuteAll returns once Close has cancelled its tasks.
func TestPondGroupReturnsWhenClosed(t *testing.T) {
	ex := newExec(t, pondPool(1))
	started := make(chan struct{})
	results := make(chan []executor.Result[int], 1)
	go func() {
		results <- executor.ExecuteAll(ex, bg, []executor.Task[int]{
			{Group: "pool", Fn: func(ctx context.Context) (int, error) {
				close(started)
				<-ctx.Done()
				return 0, ctx.Err()
			}},
			{Group: "pool", Fn: pondNop},
		})
	}()
	recv(t, started, "the first task started")
	await(t, "ExecuteAll queued the second task", func() bool { return groupStats(t, ex, "pool").Waiting == 1 })
	if err := closeWithin(t, ex, "Close returned, the tasks cancelled"); err != nil {
		t.Fatal(err)
	}
	for i, r := range recv(t, results, "ExecuteAll returned once Close cancelled its tasks") {
		if r.Status != executor.Cancelled || !errors.Is(r.Err, context.Canceled) {
			t.Errorf("task %d: %+v, want Cancelled", i, r)
		}
	}
	pondCounts(t, "executor", ex.Stats().TaskCounts, executor.TaskCounts{Submitted: 2, Started: 1, Cancelled: 2})
}

// TestPoolMetrics, TestResultPoolMetrics: the counters, before and after.
func TestPondPoolMetrics(t *testing.T) {
	ex := newExec(t, pondPool(100))
	if s := ex.Stats(); s.TaskCounts != (executor.TaskCounts{}) || s.RunningTasks != 0 || s.Waiting != 0 {
		t.Fatalf("stats of a new executor %+v", s)
	}
	const n = 10000
	var executed atomic.Int64
	sampleErr := errors.New("sample error")
	for i := range n {
		err := ex.Go(bg, "pool", func(context.Context) error {
			executed.Add(1)
			if i%2 == 0 {
				return nil
			}
			return sampleErr
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	pondShutdown(t, ex)
	if e := executed.Load(); e != n {
		t.Errorf("%d ran, want %d", e, n)
	}
	s := ex.Stats()
	if s.Running != 0 || s.RunningTasks != 0 || s.Waiting != 0 {
		t.Errorf("stats %+v", s)
	}
	pondCounts(t, "executor", s.TaskCounts, executor.TaskCounts{Submitted: n, Started: n, Succeeded: n / 2, Failed: n / 2})
}

// TestPoolSubmitOnStoppedPool, TestTaskGroupWithStoppedPool: after
// Shutdown every way in is refused with ErrShutdown.
func TestPondSubmitOnStoppedPool(t *testing.T) {
	ex := newExec(t, pondPool(100))
	submit(t, ex, executor.Task[int]{Group: "pool", Fn: pondNop})
	pondShutdown(t, ex)
	h, err := executor.Submit(ex, bg, executor.Task[int]{Group: "pool", Fn: pondNop})
	var rej *executor.RejectedError
	if !errors.Is(err, executor.ErrShutdown) || !errors.Is(err, executor.ErrRejected) || !errors.As(err, &rej) || rej.Limit != executor.LimitShutdown {
		t.Errorf("Submit = %v, want a refusal by the shutdown", err)
	}
	if r := wait(t, h); r.Status != executor.Rejected || !errors.Is(r.Err, executor.ErrShutdown) {
		t.Errorf("refused handle %+v", r)
	}
	if err := ex.Go(bg, "pool", func(context.Context) error { return nil }); !errors.Is(err, executor.ErrShutdown) {
		t.Errorf("Go = %v, want ErrShutdown", err)
	}
	if err := ex.Do(bg, "pool", func(context.Context) error { return nil }); !errors.Is(err, executor.ErrShutdown) {
		t.Errorf("Do = %v, want ErrShutdown", err)
	}
	rs := executor.ExecuteAll(ex, bg, []executor.Task[int]{{Group: "pool", Fn: pondNop}})
	if len(rs) != 1 || rs[0].Status != executor.Rejected || !errors.Is(rs[0].Err, executor.ErrShutdown) {
		t.Errorf("ExecuteAll = %+v", rs)
	}
}

// TestNewPoolWithInvalidMaxConcurrency, TestSubpoolMaxConcurrency,
// TestResultSubpoolMaxConcurrency, TestPoolResizeWithNegativeMaxConcurrency,
// TestPoolResizeWithZeroMaxConcurrency: pond panics on a negative limit and
// reads 0 as "no limit" (a subpool's: its parent's). Here a limit below 1 is
// an error naming the option and value (policy.Unlimited is "no limit"),
// and a group limit above the global limit, which pond refuses, is valid:
// the global limit still bounds the group (docs/admission.md), as the next
// case checks.
func TestPondInvalidMaxConcurrency(t *testing.T) {
	for _, o := range []policy.Option{
		policy.WithGlobalMaxInFlight(-1),
		policy.WithGlobalMaxInFlight(0),
		policy.WithGroupMaxConcurrency("sub", -1),
		policy.WithGroupMaxConcurrency("sub", 0),
	} {
		_, err := policy.New(o)
		var oe *policy.OptionError
		if !errors.As(err, &oe) {
			t.Errorf("policy.New = %v, want an *OptionError", err)
		}
	}
	if _, err := policy.New(policy.WithGlobalMaxInFlight(10), policy.WithGroupMaxConcurrency("sub", 11)); err != nil {
		t.Errorf("a group limit above the global limit: %v", err)
	}
	ex := newExec(t, pondPool(10))
	for _, n := range []int{-1, 0} {
		if err := ex.SetGlobalMaxInFlight(n); err == nil {
			t.Errorf("SetGlobalMaxInFlight(%d) = nil, want an error", n)
		}
		if err := ex.SetGroupLimits("sub", policy.GroupLimits{MaxInFlight: 10, MaxConcurrency: n, Share: 1}); err == nil {
			t.Errorf("SetGroupLimits with concurrency %d = nil, want an error", n)
		}
	}
}

// TestSubpoolMaxConcurrency, adapted: a group allowed 11 under a global
// limit of 10 runs 10 at once.
func TestPondGroupLimitAboveTheGlobalLimit(t *testing.T) {
	ex := newExec(t, pondPool(10, policy.WithGroupMaxConcurrency("sub", 11)))
	g := newGate()
	defer g.open()
	for i := range 11 {
		submit(t, ex, executor.Task[string]{Group: "sub", Fn: g.fn(fmt.Sprint(i))})
	}
	g.waitStarted(t, 10)
	g.noneStarted(t)
	if gs := groupStats(t, ex, "sub"); gs.RunningTasks != 10 || gs.Waiting != 1 {
		t.Errorf("group stats %+v, want 10 running and 1 waiting", gs)
	}
	g.open()
	pondShutdown(t, ex)
}

// TestPoolStoppedAfterCancel, TestResultPoolSubmitContextCanceled (the
// pool's half): a task that cancels the pool, here Close called by the
// task on a goroutine of its own (called from its Fn itself, Close would
// wait for the task it runs in, as a WaitGroup's Wait would), sees its
// own context cancelled, and Close returns once it has finished. Every way
// in is then refused with ErrShutdown.
func TestPondPoolStoppedAfterCancel(t *testing.T) {
	ex := newExec(t, pondPool(10))
	var cause error
	closed := make(chan error, 1)
	r := wait(t, submit(t, ex, executor.Task[int]{Group: "pool", Fn: func(ctx context.Context) (int, error) {
		go func() { closed <- ex.Close() }()
		<-ctx.Done()
		cause = context.Cause(ctx)
		return 0, ctx.Err()
	}}))
	if err := recv(t, closed, "Close started by a task returned"); err != nil {
		t.Errorf("Close started by a task = %v, want nil once the task has finished", err)
	}
	if r.Status != executor.Cancelled || r.Err != context.Canceled || !errors.Is(cause, executor.ErrShutdown) {
		t.Errorf("result %+v with cause %v, want Cancelled by the shutdown", r, cause)
	}
	for range 2 { // before and after the Close that waits
		if _, err := executor.Submit(ex, bg, executor.Task[int]{Group: "pool", Fn: pondNop}); !errors.Is(err, executor.ErrShutdown) {
			t.Errorf("Submit = %v, want ErrShutdown", err)
		}
		if err := ex.Go(bg, "pool", func(context.Context) error { return nil }); !errors.Is(err, executor.ErrShutdown) {
			t.Errorf("Go = %v, want ErrShutdown", err)
		}
		if err := ex.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPoolWithQueueSize, adapted: pond blocks a Submit while the queue is
// full. A Submit here never blocks; CallerRuns is the executor's way to
// slow a submitter down to its pace: a refused task runs in the submitting
// goroutine. Every task runs.
func TestPondBlockingQueueIsCallerRuns(t *testing.T) {
	ex := newExec(t, []policy.Option{
		policy.WithGroupMaxConcurrency("pool", 1),
		policy.WithGroupMaxInFlight("pool", 11), // 1 running, 10 queued
		policy.WithRejectionPolicy(policy.CallerRuns),
	})
	const n = 50
	g := newGate()
	defer g.open()
	hs := []*executor.Handle[string]{submit(t, ex, executor.Task[string]{Group: "pool", Fn: g.fn("first")})}
	g.waitStarted(t, 1)
	for i := 1; i < n; i++ {
		hs = append(hs, submit(t, ex, executor.Task[string]{Group: "pool", Fn: func(context.Context) (string, error) { return "", nil }}))
	}
	if gs := groupStats(t, ex, "pool"); gs.RunningTasks != 1 || gs.Waiting != 10 || gs.CallerRuns != n-11 {
		t.Errorf("group stats %+v, want 1 running, 10 waiting, %d run by the caller", gs, n-11)
	}
	g.open()
	pondShutdown(t, ex)
	for i, h := range hs {
		if r := wait(t, h); r.Status != executor.Success {
			t.Errorf("task %d: %+v", i, r)
		}
	}
	pondCounts(t, "group", groupStats(t, ex, "pool").TaskCounts, executor.TaskCounts{Submitted: n, Started: 11, Succeeded: n, CallerRuns: n - 11})
}

// TestPoolWithQueueSizeOne, adapted: in pond, with one task running and
// its queue of 1 full, a Submit blocks its caller until there is room, and
// the blocked callers' tasks run after the queued one. A Submit here never
// blocks; a caller that waits its turn is a Do, which waits in the group's
// FIFO queue and returns once its fn has run. The queue's size has no
// part: a bulkhead of 2 would refuse the Do, not hold it. pond leaves the
// order of the two blocked callers open (3+4 == 7); the executor's queue
// is FIFO, and each Do is seen waiting before the next is called, so the
// order here is 1, 2, 3, 4.
func TestPondBlockedSubmitterIsDo(t *testing.T) {
	ex := newExec(t, []policy.Option{
		policy.WithGroupMaxConcurrency("pool", 1),
		policy.WithGroupMaxInFlight("pool", policy.Unlimited),
	})
	completed := make(chan int, 4)
	release1, release2 := make(chan struct{}), make(chan struct{})
	closeAtEnd(t, release1)
	closeAtEnd(t, release2)
	held := func(release chan struct{}, v int) func(context.Context) (int, error) {
		return func(context.Context) (int, error) {
			<-release
			completed <- v
			return v, nil
		}
	}
	h1 := submit(t, ex, executor.Task[int]{Group: "pool", Fn: held(release1, 1)}) // runs
	h2 := submit(t, ex, executor.Task[int]{Group: "pool", Fn: held(release2, 2)}) // queued
	var callers sync.WaitGroup
	doErrs := make(chan error, 2) // not t.Errorf: a caller may outlive a test that failed
	for i, v := range []int{3, 4} {
		callers.Go(func() {
			if err := ex.Do(bg, "pool", func(context.Context) error { completed <- v; return nil }); err != nil {
				doErrs <- fmt.Errorf("Do %d: %w", v, err)
			}
		})
		await(t, fmt.Sprint("Do ", v, " waiting in the queue"), func() bool { return groupStats(t, ex, "pool").Waiting == 2+i })
	}
	select {
	case v := <-completed:
		t.Fatalf("task %d completed while the first task held the only permit", v)
	default:
	}
	close(release1)
	close(release2)
	waitAll(t, &callers, "both Do calls returned once their turn came")
	close(doErrs)
	for err := range doErrs {
		t.Error(err)
	}
	for i, h := range []*executor.Handle[int]{h1, h2} {
		if r := wait(t, h); r.Status != executor.Success || r.Value != i+1 {
			t.Errorf("task %d: %+v", i+1, r)
		}
	}
	pondShutdown(t, ex)
	close(completed)
	var order []int
	for v := range completed {
		order = append(order, v)
	}
	if fmt.Sprint(order) != "[1 2 3 4]" {
		t.Errorf("completed in the order %v, want [1 2 3 4]", order)
	}
	pondCounts(t, "group", groupStats(t, ex, "pool").TaskCounts, executor.TaskCounts{Submitted: 4, Started: 4, Succeeded: 4})
}

// TestPoolWithQueueSizeAndNonBlocking, TestSubpoolWithQueueSizeOverride,
// TestPoolWithQueueSizeZero (its TrySubmit): with its running tasks at the
// limit and its queue full, a group refuses at once, naming the limit.
func TestPondFullQueueRefuses(t *testing.T) {
	for _, c := range []struct {
		name        string
		conc, queue int
		opts        func(group string, conc, queue int) []policy.Option
		limit       executor.Limit
		used, max   int
	}{
		{"in-flight limit", 10, 10, func(g string, conc, queue int) []policy.Option {
			return []policy.Option{policy.WithGroupMaxInFlight(g, conc+queue)}
		}, executor.LimitGroupInFlight, 20, 20},
		{"queue threshold", 10, 10, func(g string, _, queue int) []policy.Option {
			return []policy.Option{policy.WithGroupQueueThreshold(g, queue)}
		}, executor.LimitGroupQueue, 10, 10},
		// A subpool's queue size under a pool's (WithQueueSize 10 there).
		{"subpool queue threshold", 1, 2, func(g string, _, queue int) []policy.Option {
			return []policy.Option{policy.WithDefaultQueueThreshold(10), policy.WithGroupQueueThreshold(g, queue)}
		}, executor.LimitGroupQueue, 2, 2},
		{"queue threshold 0", 1, 0, func(g string, _, queue int) []policy.Option {
			return []policy.Option{policy.WithGroupQueueThreshold(g, queue)}
		}, executor.LimitGroupQueue, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			ex := newExec(t, pondPool(10, append(c.opts("sub", c.conc, c.queue), policy.WithGroupMaxConcurrency("sub", c.conc))...))
			g := newGate()
			defer g.open()
			for i := range c.conc {
				submit(t, ex, executor.Task[string]{Group: "sub", Fn: g.fn(fmt.Sprint(i))})
			}
			g.waitStarted(t, c.conc)
			if gs := groupStats(t, ex, "sub"); gs.RunningTasks != c.conc || gs.Waiting != 0 || gs.Submitted != uint64(c.conc) {
				t.Fatalf("group stats %+v, want %d running", gs, c.conc)
			}
			const extra = 8
			var refused []error
			for i := range c.queue + extra {
				h, err := executor.Submit(ex, bg, executor.Task[string]{Group: "sub", Fn: g.fn(fmt.Sprint("q", i))})
				if err != nil {
					refused = append(refused, err)
					if r, ok := h.Result(); !ok || r.Status != executor.Rejected || r.Err != err {
						t.Errorf("refused handle %+v (complete %v)", r, ok)
					}
				}
			}
			if len(refused) != extra {
				t.Fatalf("%d refused, want %d", len(refused), extra)
			}
			var rej *executor.RejectedError
			if !errors.As(refused[0], &rej) || !errors.Is(refused[0], executor.ErrRejected) || rej.Limit != c.limit || rej.Used != c.used || rej.Max != c.max {
				t.Errorf("refusal %v, want by %s (%d of %d)", refused[0], c.limit, c.used, c.max)
			}
			gs := groupStats(t, ex, "sub")
			if gs.RunningTasks != c.conc || gs.Waiting != c.queue {
				t.Errorf("group stats %+v, want %d running, %d waiting", gs, c.conc, c.queue)
			}
			pondCounts(t, "group", gs.TaskCounts, executor.TaskCounts{Submitted: uint64(c.conc + c.queue + extra), Started: uint64(c.conc), Rejected: extra})
			g.open()
			pondShutdown(t, ex)
			pondCounts(t, "group", groupStats(t, ex, "sub").TaskCounts, executor.TaskCounts{
				Submitted: uint64(c.conc + c.queue + extra), Started: uint64(c.conc + c.queue), Succeeded: uint64(c.conc + c.queue), Rejected: extra,
			})
		})
	}
}

// TestPoolTrySubmit, TestPoolTrySubmitErr, TestResultPoolTrySubmit,
// TestResultPoolTrySubmitErr: a task starts, one waits, one is refused,
// and after the shutdown one is refused. pond does not count the last as
// submitted; the executor counts every valid Submit (TaskCounts).
func TestPondTrySubmit(t *testing.T) {
	sampleErr := errors.New("sample error")
	for _, secondErr := range []error{nil, sampleErr} {
		t.Run(fmt.Sprint("second fails ", secondErr != nil), func(t *testing.T) {
			ex := newExec(t, []policy.Option{policy.WithGroupMaxConcurrency("pool", 1), policy.WithGroupMaxInFlight("pool", 2)})
			completeFirst := make(chan struct{})
			first := submit(t, ex, executor.Task[int]{Group: "pool", Fn: func(context.Context) (int, error) {
				completeFirst <- struct{}{}
				return 42, nil
			}})
			second := submit(t, ex, executor.Task[int]{Group: "pool", Fn: func(context.Context) (int, error) { return 43, secondErr }})
			third, err := executor.Submit(ex, bg, executor.Task[int]{Group: "pool", Fn: func(context.Context) (int, error) { return 44, nil }})
			if !errors.Is(err, executor.ErrRejected) {
				t.Fatalf("third Submit = %v, want a refusal", err)
			}
			recv(t, completeFirst, "the first task ran")
			pondShutdown(t, ex)
			fourth, err := executor.Submit(ex, bg, executor.Task[int]{Group: "pool", Fn: pondNop})
			if !errors.Is(err, executor.ErrShutdown) {
				t.Fatalf("Submit after the shutdown = %v, want ErrShutdown", err)
			}
			if r := wait(t, fourth); r.Status != executor.Rejected || !errors.Is(r.Err, executor.ErrShutdown) {
				t.Errorf("fourth %+v", r)
			}
			if r := wait(t, first); r.Status != executor.Success || r.Value != 42 {
				t.Errorf("first %+v", r)
			}
			wantSecond := executor.Success
			if secondErr != nil {
				wantSecond = executor.Failed
			}
			if r := wait(t, second); r.Status != wantSecond || r.Err != secondErr || r.Value != 43 {
				t.Errorf("second %+v", r)
			}
			if r := wait(t, third); r.Status != executor.Rejected || r.Value != 0 || !errors.Is(r.Err, executor.ErrRejected) {
				t.Errorf("third %+v", r)
			}
			want := executor.TaskCounts{Submitted: 4, Started: 2, Succeeded: 2, Rejected: 2}
			if secondErr != nil {
				want.Succeeded, want.Failed = 1, 1
			}
			pondCounts(t, "executor", ex.Stats().TaskCounts, want)
		})
	}
}

// TestPoolResize, TestSubpoolResize: raising a limit starts the waiting
// tasks that now fit; lowering one lets the running finish and starts
// nothing until use is under it. A pool's Resize is SetGlobalMaxInFlight;
// a subpool's is SetGroupLimits. Beyond upstream, the pool is also resized
// down while its subpool waits for its own limit, not the pool's. pond's
// tasks are Submit's; they run by Go too, whose waiting tasks with
// context.Background are queued as their function alone, and whose finish
// may hand its permits on to the next (light.go): a lowered limit holds
// for that hand-off as well.
func TestPondResize(t *testing.T) {
	setGlobal := func(ex *executor.Executor, n int) error { return ex.SetGlobalMaxInFlight(n) }
	setGroup := func(ex *executor.Executor, n int) error {
		return ex.SetGroupLimits("g", policy.GroupLimits{MaxInFlight: policy.Unlimited, MaxConcurrency: n, QueueThreshold: policy.Unlimited, Share: 1})
	}
	for _, viaGo := range []bool{false, true} {
		for _, c := range []pondResizing{
			{"pool", pondPool(1), setGlobal, setGlobal},
			{"subpool", pondPool(10, policy.WithGroupMaxConcurrency("g", 1)), setGroup, setGroup},
			{"pool over a subpool", pondPool(10, policy.WithGroupMaxConcurrency("g", 1)), setGroup, setGlobal},
		} {
			t.Run(fmt.Sprint("Go ", viaGo, "/", c.name), func(t *testing.T) { pondResize(t, viaGo, c) })
		}
	}
}

// pondResizing is a case of TestPondResize: a policy whose limit on g's
// tasks is 1, and the limits raised to 3, then lowered to 2.
type pondResizing struct {
	name     string
	popts    []policy.Option
	up, down func(ex *executor.Executor, n int) error
}

func pondResize(t *testing.T, viaGo bool, c pondResizing) {
	ex := newExec(t, c.popts)
	resize := func(set func(*executor.Executor, int) error, n int) {
		t.Helper()
		if err := set(ex, n); err != nil {
			t.Fatal(err)
		}
	}
	check := func(running, waiting int) {
		t.Helper()
		if gs := groupStats(t, ex, "g"); gs.RunningTasks != running || gs.Waiting != waiting {
			t.Fatalf("group stats %+v, want %d running and %d waiting", gs, running, waiting)
		}
		if s := ex.Stats(); s.RunningTasks != running {
			t.Fatalf("executor runs %d, want %d", s.RunningTasks, running)
		}
	}
	started := make(chan int, 10)
	release := make([]chan struct{}, 10)
	for i := range release {
		release[i] = make(chan struct{})
		closeAtEnd(t, release[i])
		fn := func(context.Context) error {
			started <- i
			<-release[i]
			return nil
		}
		var err error
		if viaGo {
			err = ex.Go(bg, "g", fn)
		} else {
			_, err = executor.Submit(ex, bg, executor.Task[int]{Group: "g", Fn: func(ctx context.Context) (int, error) { return i, fn(ctx) }})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// next receives the starts of the tasks want, in any order: they start
	// in the queue's FIFO order, but their functions race to report it.
	next := func(want ...int) {
		t.Helper()
		got := make([]int, len(want))
		for k := range got {
			got[k] = recv(t, started, "a task started once there was room")
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("tasks %v started, want %v: in FIFO order, within the limits", got, want)
		}
	}
	next(0)
	check(1, 9)
	resize(c.up, 3)
	next(1, 2)
	check(3, 7)
	resize(c.down, 2)
	// The three running finish: the first finish starts nothing, each of
	// the other two starts one. Once both have started, the three have
	// given their permits back.
	for i := range 3 {
		close(release[i])
	}
	next(3, 4)
	check(2, 5)
	for i := 3; i < 10; i++ {
		close(release[i])
	}
	pondShutdown(t, ex)
	next(5, 6, 7, 8, 9)
	pondCounts(t, "group", groupStats(t, ex, "g").TaskCounts, executor.TaskCounts{Submitted: 10, Started: 10, Succeeded: 10})
}

// TestPoolSubmitWhileStopping: a task running while its executor shuts
// down sees every way in refused with ErrShutdown, finishes, and Shutdown
// returns nil.
func TestPondSubmitWhileStopping(t *testing.T) {
	ex := newExec(t, pondPool(10))
	started := make(chan struct{})
	var errs []error
	task := submit(t, ex, executor.Task[int]{Group: "pool", Fn: func(context.Context) (int, error) {
		close(started)
		// Until the shutdown is in place these are admitted in another
		// group, and run.
		for {
			_, err := executor.Submit(ex, bg, executor.Task[int]{Group: "other", Fn: pondNop})
			if err != nil {
				errs = append(errs, err)
				break
			}
			runtime.Gosched()
		}
		_, err := executor.Submit(ex, bg, executor.Task[int]{Group: "pool", Fn: func(context.Context) (int, error) { return 0, errors.New("sample error") }})
		errs = append(errs, err, ex.Go(bg, "pool", func(context.Context) error { return nil }))
		return 0, nil
	}})
	recv(t, started, "the task started")
	pondShutdown(t, ex)
	if r := wait(t, task); r.Status != executor.Success {
		t.Errorf("task %+v", r)
	}
	for i, err := range errs {
		if !errors.Is(err, executor.ErrShutdown) {
			t.Errorf("call %d from the task: %v, want ErrShutdown", i, err)
		}
	}
	if _, err := executor.Submit(ex, bg, executor.Task[int]{Group: "pool", Fn: pondNop}); !errors.Is(err, executor.ErrShutdown) {
		t.Errorf("Submit = %v, want ErrShutdown", err)
	}
}

// TestPoolSubmitWhileStoppingHasNoRace (by github.com/korotin upstream):
// submitters racing a Shutdown each see their task admitted and run, or
// refused with ErrShutdown, and the counts add up. Upstream's pool is
// unlimited; here also one of 4, so that admitted tasks wait, and Shutdown
// must run them all (by Submit, and by Go, whose waiting tasks may be
// queued through its group's lane, lane.go) before it returns.
func TestPondSubmitWhileStoppingHasNoRace(t *testing.T) {
	for _, viaGo := range []bool{false, true} {
		for _, limit := range []int{policy.Unlimited, 4} {
			name := fmt.Sprint("Go ", viaGo, "/limit ", limit)
			if limit == policy.Unlimited {
				name = fmt.Sprint("Go ", viaGo, "/unlimited")
			}
			t.Run(name, func(t *testing.T) { pondSubmitWhileStopping(t, viaGo, limit) })
		}
	}
}

func pondSubmitWhileStopping(t *testing.T, viaGo bool, limit int) {
	ex := newExec(t, pondPool(limit))
	const n = 1000
	var wg sync.WaitGroup
	start := make(chan struct{})
	var admitted, refused, executed atomic.Int64
	ranAtShutdown := make(chan int64, 1)
	problems := make(chan error, n+1) // not t.Errorf: a goroutine may outlive a test that failed
	wg.Go(func() {
		<-start
		if err := ex.Shutdown(guardCtx(t)); err != nil {
			problems <- fmt.Errorf("Shutdown: %w", err)
		}
		ranAtShutdown <- executed.Load()
	})
	fn := func(context.Context) error {
		runtime.Gosched()
		executed.Add(1)
		return nil
	}
	for range n {
		wg.Go(func() {
			<-start
			var err error
			if viaGo {
				err = ex.Go(bg, "pool", fn)
			} else {
				_, err = executor.Submit(ex, bg, executor.Task[int]{Group: "pool", Fn: func(ctx context.Context) (int, error) { return 1, fn(ctx) }})
			}
			switch {
			case err == nil:
				admitted.Add(1)
			case errors.Is(err, executor.ErrShutdown):
				refused.Add(1)
			default:
				problems <- fmt.Errorf("Submit = %w", err)
			}
		})
	}
	close(start)
	waitAll(t, &wg, "Shutdown and every submitter returned")
	close(problems)
	for err := range problems {
		t.Error(err)
	}
	a, r := admitted.Load(), refused.Load()
	if ran := <-ranAtShutdown; ran != a || executed.Load() != a {
		t.Errorf("%d tasks ran by Shutdown's return, %d in all; %d were admitted", ran, executed.Load(), a)
	}
	pondCounts(t, "executor", ex.Stats().TaskCounts, executor.TaskCounts{Submitted: n, Started: uint64(a), Succeeded: uint64(a), Rejected: uint64(r)})
}

// TestStopAndWaitWithGoexit, TestTaskInvokesGoexitAndPoolRecovers: a task
// that calls runtime.Goexit fails with ErrGoexit (pond reports
// ErrPoolStopped), gives its permit back so that the next task runs under
// a limit of 1, and Shutdown returns. pond's SubmitErr is Submit here; the
// same holds for Go (its outcome counted in Stats) and for Do, whose
// Goexit ends its caller's goroutine (Do's doc).
func TestPondGoexit(t *testing.T) {
	ways := map[string]func(t *testing.T, ex *executor.Executor){
		"Submit": func(t *testing.T, ex *executor.Executor) {
			exits := submit(t, ex, executor.Task[int]{Group: "pool", Fn: func(context.Context) (int, error) {
				runtime.Goexit()
				return 0, nil
			}})
			if r := wait(t, exits); r.Status != executor.Failed || !errors.Is(r.Err, executor.ErrGoexit) {
				t.Errorf("Goexit task %+v", r)
			}
		},
		"Go": func(t *testing.T, ex *executor.Executor) {
			if err := ex.Go(bg, "pool", func(context.Context) error { runtime.Goexit(); return nil }); err != nil {
				t.Fatal(err)
			}
		},
		"Do": func(t *testing.T, ex *executor.Executor) {
			returned, exited := make(chan bool, 1), make(chan struct{})
			go func() {
				defer close(exited)
				_ = ex.Do(bg, "pool", func(context.Context) error { runtime.Goexit(); return nil })
				returned <- true
			}()
			recv(t, exited, "the goroutine of the Do that called Goexit ended")
			select {
			case <-returned:
				t.Error("Do returned after its fn called runtime.Goexit")
			default:
			}
		},
	}
	for name, exit := range ways {
		t.Run(name, func(t *testing.T) {
			ex := newExec(t, pondPool(1))
			exit(t, ex)
			normal := submit(t, ex, executor.Task[int]{Group: "pool", Fn: pondNop})
			if r := wait(t, normal); r.Status != executor.Success {
				t.Errorf("next task %+v", r)
			}
			pondShutdown(t, ex)
			s := ex.Stats()
			if s.RunningTasks != 0 || s.Running != 0 {
				t.Errorf("stats %+v", s)
			}
			pondCounts(t, "executor", s.TaskCounts, executor.TaskCounts{Submitted: 2, Started: 2, Succeeded: 1, Failed: 1})
		})
	}
}

// TestSubpool, TestSubpoolWithDifferentLimits (the running half): each
// group runs at most its own limit, and all of them at most the global
// one, counted inside the tasks. pond measures elapsed time; here the tasks
// hold until every group is at its limit.
func TestPondSubpoolMaxConcurrency(t *testing.T) {
	limits := map[string]int{"sub": 5, "subsub": 1, "two": 2, "three": 3}
	popts := pondPool(10)
	for g, n := range limits {
		popts = append(popts, policy.WithGroupMaxConcurrency(g, n))
	}
	ex := newExec(t, popts)
	var global peak
	running := map[string]*peak{}
	g := newGate()
	defer g.open()
	for _, grp := range []string{"sub", "subsub", "two"} {
		r := &peak{}
		running[grp] = r
		for i := range 10 {
			submit(t, ex, executor.Task[string]{Group: grp, Fn: func(ctx context.Context) (string, error) {
				global.enter()
				r.enter()
				defer global.leave()
				defer r.leave()
				return g.fn(fmt.Sprint(grp, i))(ctx)
			}})
		}
	}
	g.waitStarted(t, 5+1+2)
	// The global limit has room for 2 of three's 3.
	running["three"] = &peak{}
	for i := range 10 {
		submit(t, ex, executor.Task[string]{Group: "three", Fn: func(ctx context.Context) (string, error) {
			global.enter()
			running["three"].enter()
			defer global.leave()
			defer running["three"].leave()
			return g.fn(fmt.Sprint("three", i))(ctx)
		}})
	}
	g.waitStarted(t, 2)
	g.noneStarted(t)
	for grp, want := range map[string]int{"sub": 5, "subsub": 1, "two": 2, "three": 2} {
		if gs := groupStats(t, ex, grp); gs.RunningTasks != want || gs.Waiting != 10-want {
			t.Errorf("group %s stats %+v, want %d running", grp, gs, want)
		}
	}
	if s := ex.Stats(); s.RunningTasks != 10 {
		t.Errorf("executor runs %d, want 10", s.RunningTasks)
	}
	g.open()
	if err := ex.ShutdownGroup(guardCtx(t), "subsub"); err != nil { // subsubpool.Stop().Wait()
		t.Fatal(err)
	}
	pondShutdown(t, ex)
	for grp, r := range running {
		if m := r.max.Load(); m > int64(limits[grp]) {
			t.Errorf("group %s ran %d at once, over its limit of %d", grp, m, limits[grp])
		}
	}
	if m := global.max.Load(); m != 10 {
		t.Errorf("%d ran at once, want the global limit of 10", m)
	}
}

// TestSubpoolStopAndWait, TestResultPoolSubpool, TestNewSubpool:
// ShutdownGroup returns once every task of the group has run.
func TestPondSubpoolStopAndWait(t *testing.T) {
	ex := newExec(t, pondPool(1000, policy.WithGroupMaxConcurrency("sub", 100)))
	const n = 10000
	var executed atomic.Int64
	var running peak
	for range n {
		err := ex.Go(bg, "sub", func(context.Context) error {
			running.enter()
			defer running.leave()
			executed.Add(1)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := ex.ShutdownGroup(guardCtx(t), "sub"); err != nil {
		t.Fatal(err)
	}
	if e := executed.Load(); e != n {
		t.Errorf("%d ran, want %d", e, n)
	}
	if m := running.max.Load(); m > 100 {
		t.Errorf("%d ran at once, over the group's limit of 100", m)
	}
}

// TestSubpoolMetrics: Stats counts every group; GroupStats one.
func TestPondSubpoolMetrics(t *testing.T) {
	ex := newExec(t, pondPool(10, policy.WithGroupMaxConcurrency("sub", 5)))
	sampleErr := errors.New("sample error")
	for i := range 20 {
		grp, fails := "pool", i%3 == 0
		if i%2 == 0 {
			grp, fails = "sub", i%4 == 0
		}
		err := ex.Go(bg, grp, func(context.Context) error {
			if fails {
				return sampleErr
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := ex.ShutdownGroup(guardCtx(t), "sub"); err != nil {
		t.Fatal(err)
	}
	pondShutdown(t, ex)
	s := ex.Stats()
	if s.Waiting != 0 {
		t.Errorf("stats %+v", s)
	}
	pondCounts(t, "executor", s.TaskCounts, executor.TaskCounts{Submitted: 20, Started: 20, Succeeded: 12, Failed: 8})
	gs := groupStats(t, ex, "sub")
	if gs.Waiting != 0 {
		t.Errorf("group stats %+v", gs)
	}
	pondCounts(t, "group", gs.TaskCounts, executor.TaskCounts{Submitted: 10, Started: 10, Succeeded: 5, Failed: 5})
}

// TestSubpoolStop: a group shut down refuses its tasks with
// ErrGroupShutdown (pond: ErrPoolStopped) while the others run; the
// executor's shutdown refuses them all.
func TestPondSubpoolStop(t *testing.T) {
	ex := newExec(t, pondPool(10, policy.WithGroupMaxConcurrency("sub", 5)))
	var executed atomic.Int64
	count := func(context.Context) (int, error) { executed.Add(1); return 0, nil }
	submit(t, ex, executor.Task[int]{Group: "sub", Fn: count})
	if err := ex.ShutdownGroup(guardCtx(t), "sub"); err != nil {
		t.Fatal(err)
	}
	wait(t, submit(t, ex, executor.Task[int]{Group: "pool", Fn: count}))
	if e := executed.Load(); e != 2 {
		t.Errorf("%d ran, want 2", e)
	}
	if _, err := executor.Submit(ex, bg, executor.Task[int]{Group: "sub", Fn: count}); !errors.Is(err, executor.ErrGroupShutdown) || !errors.Is(err, executor.ErrRejected) {
		t.Errorf("Submit to the stopped group = %v, want ErrGroupShutdown", err)
	}
	pondShutdown(t, ex)
	if _, err := executor.Submit(ex, bg, executor.Task[int]{Group: "pool", Fn: count}); !errors.Is(err, executor.ErrShutdown) {
		t.Errorf("Submit after the shutdown = %v, want ErrShutdown", err)
	}
}

// TestSubpoolStoppedAfterCancel: after Close every group refuses with
// ErrShutdown.
func TestPondSubpoolStoppedAfterCancel(t *testing.T) {
	ex := newExec(t, pondPool(10, policy.WithGroupMaxConcurrency("sub", 5)))
	if err := ex.Close(); err != nil {
		t.Fatal(err)
	}
	for _, grp := range []string{"pool", "sub"} {
		if _, err := executor.Submit(ex, bg, executor.Task[int]{Group: grp, Fn: pondNop}); !errors.Is(err, executor.ErrShutdown) {
			t.Errorf("Submit to %s = %v, want ErrShutdown", grp, err)
		}
	}
}

// TestSubpoolWithDifferentLimits: groups of 1, 2 and 3 and the pool's own
// tasks fill a global limit of 7; Close runs none of the waiting ones. Its
// running tasks here end with their context, cancelled by Close, and
// succeed, as pond's do once released.
func TestPondSubpoolWithDifferentLimits(t *testing.T) {
	ex := newExec(t, pondPool(7,
		policy.WithGroupMaxConcurrency("sub1", 1),
		policy.WithGroupMaxConcurrency("sub2", 2),
		policy.WithGroupMaxConcurrency("sub3", 3)))
	started := make(chan struct{}, 10)
	task := func(ctx context.Context) (int, error) {
		started <- struct{}{}
		<-ctx.Done()
		return 0, nil
	}
	groups := []struct {
		name    string
		running int
	}{{"sub1", 1}, {"sub2", 2}, {"sub3", 3}, {"pool", 1}}
	for _, grp := range groups {
		for range 10 {
			submit(t, ex, executor.Task[int]{Group: grp.name, Fn: task})
		}
		for range grp.running {
			recv(t, started, "a task of group "+grp.name+" started")
		}
	}
	for _, grp := range groups {
		if gs := groupStats(t, ex, grp.name); gs.RunningTasks != grp.running || gs.Succeeded != 0 {
			t.Errorf("group %s stats %+v, want %d running", grp.name, gs, grp.running)
		}
	}
	if s := ex.Stats(); s.RunningTasks != 7 {
		t.Errorf("executor runs %d, want 7", s.RunningTasks)
	}
	if err := closeWithin(t, ex, "Close returned, the running tasks cancelled"); err != nil {
		t.Fatal(err)
	}
	for _, grp := range groups {
		r := uint64(grp.running)
		pondCounts(t, "group "+grp.name, groupStats(t, ex, grp.name).TaskCounts,
			executor.TaskCounts{Submitted: 10, Started: r, Succeeded: r, Cancelled: 10 - r})
	}
}

// TestSubpoolWithOverlappingConcurrency: under a global limit of 1, a
// group's tasks and the pool's run one at a time, checked inside them.
func TestPondSubpoolWithOverlappingConcurrency(t *testing.T) {
	ex := newExec(t, pondPool(1, policy.WithGroupMaxConcurrency("sub", 1)))
	var v violations
	var executed atomic.Int64
	task := func(context.Context) (int, error) {
		executed.Add(1)
		if s := ex.Stats(); s.RunningTasks != 1 {
			v.add(fmt.Sprintf("%d running, want 1", s.RunningTasks))
		}
		if gs, _ := ex.GroupStats("sub"); gs.RunningTasks > 1 {
			v.add(fmt.Sprintf("group runs %d, over its limit of 1", gs.RunningTasks))
		}
		return 0, nil
	}
	for _, grp := range []string{"sub", "pool", "sub"} {
		submit(t, ex, executor.Task[int]{Group: grp, Fn: task})
	}
	if err := ex.ShutdownGroup(guardCtx(t), "sub"); err != nil {
		t.Fatal(err)
	}
	pondShutdown(t, ex)
	v.check(t)
	if e := executed.Load(); e != 3 {
		t.Errorf("%d ran, want 3", e)
	}
}

// TestResultTaskGroupWait, TestNewGroup, TestTaskGroupDone: ExecuteAll
// returns every result, in the order of the tasks, once all have run.
func TestPondGroupWait(t *testing.T) {
	ex := newExec(t, pondPool(10))
	var tasks []executor.Task[int]
	for i := range 5 {
		tasks = append(tasks, executor.Task[int]{Group: "pool", Fn: func(context.Context) (int, error) { return i, nil }})
	}
	rs := executor.ExecuteAll(ex, bg, tasks)
	if len(rs) != 5 {
		t.Fatalf("%d results", len(rs))
	}
	for i, r := range rs {
		if r.Status != executor.Success || r.Value != i {
			t.Errorf("result %d: %+v", i, r)
		}
	}
}

// TestTaskGroupWithNoTasks.
func TestPondGroupWithNoTasks(t *testing.T) {
	ex := newExec(t, pondPool(10))
	if rs := executor.ExecuteAll[int](ex, bg, nil); len(rs) != 0 {
		t.Errorf("results %+v, want none", rs)
	}
}

// TestResultTaskGroupWaitWithError, TestTaskGroupMetrics, adapted: pond's
// group Wait returns the first error and skips the tasks not started.
// ExecuteAll is not an errgroup: each task has its own result and an error
// stops nothing (its doc).
func TestPondGroupErrorStopsNothing(t *testing.T) {
	ex := newExec(t, pondPool(1))
	sampleErr := errors.New("sample error")
	var tasks []executor.Task[int]
	for i := range 10 {
		tasks = append(tasks, executor.Task[int]{Group: "pool", Fn: func(context.Context) (int, error) {
			if i == 3 {
				return 0, sampleErr
			}
			return i, nil
		}})
	}
	for i, r := range executor.ExecuteAll(ex, bg, tasks) {
		want, wantErr, wantVal := executor.Success, error(nil), i
		if i == 3 {
			want, wantErr, wantVal = executor.Failed, sampleErr, 0
		}
		if r.Status != want || r.Err != wantErr || r.Value != wantVal {
			t.Errorf("result %d: %+v", i, r)
		}
	}
	pondCounts(t, "executor", ex.Stats().TaskCounts, executor.TaskCounts{Submitted: 10, Started: 10, Succeeded: 9, Failed: 1})
}

// TestTaskGroupWithCustomContext, TestTaskGroupMetricsWithCancelledContext,
// TestResultTaskGroupWaitWithContextCanceledAndOngoingTasks,
// TestTaskGroupWaitWithContextCanceledAndOngoingTasks,
// TestResultPoolSubmitContextCanceled: tasks submitted with one context,
// which one of them cancels while running. The tasks waiting behind it
// complete Cancelled without running. pond reports context.Canceled for
// the task that cancelled too; here its outcome is what its Fn returns
// (it ignores its context, and succeeds), as for any running task whose
// context is cancelled (Handle.Cancel).
func TestPondGroupContextCancelledByATask(t *testing.T) {
	const n, canceller = 10, 4
	ex := newExec(t, pondPool(1))
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	ready := make(chan struct{})
	var executed atomic.Int64
	hs := make([]*executor.Handle[int], n)
	for i := range hs {
		var err error
		hs[i], err = executor.Submit(ex, ctx, executor.Task[int]{Group: "pool", Fn: func(context.Context) (int, error) {
			<-ready // every handle is in hs
			executed.Add(1)
			if i == canceller {
				cancel()
				for _, h := range hs[i+1:] { // cancelled while this one runs
					<-h.Done()
				}
			}
			return 111 * (i + 1), nil
		}})
		if err != nil {
			t.Fatal(err)
		}
	}
	close(ready)
	for i, h := range hs {
		r := wait(t, h)
		if i <= canceller && (r.Status != executor.Success || r.Value != 111*(i+1)) {
			t.Errorf("task %d: %+v, want its value", i, r)
		}
		if i > canceller && (r.Status != executor.Cancelled || r.Err != context.Canceled || r.Value != 0) {
			t.Errorf("task %d: %+v, want Cancelled", i, r)
		}
	}
	if e := executed.Load(); e != canceller+1 {
		t.Errorf("%d ran, want %d", e, canceller+1)
	}
	pondCounts(t, "executor", ex.Stats().TaskCounts, executor.TaskCounts{Submitted: n, Started: canceller + 1, Succeeded: canceller + 1, Cancelled: n - canceller - 1})
}

// TestTaskGroupWithCustomContext, as upstream has it: the task that
// cancels the tasks' context returns at once, so that its finish may start
// the next before the executor's watcher of that context has removed it.
// That task was waiting when its context ended: like a task cancelled
// through its handle (Submit's doc) it completes Cancelled and its Fn never
// runs, as for Do (docs/admission.md). Go's tasks are watched the same way.
func TestPondGroupCancelledContextRunsNoWaitingTask(t *testing.T) {
	for _, viaGo := range []bool{false, true} {
		t.Run(fmt.Sprint("Go ", viaGo), func(t *testing.T) {
			ex := newExec(t, pondPool(1))
			for round := range 50 {
				ctx, cancel := context.WithCancel(bg)
				ready := make(chan struct{})
				var executed atomic.Int64
				fns := []func(context.Context) error{
					func(context.Context) error { <-ready; executed.Add(1); return nil },
					func(context.Context) error { executed.Add(1); cancel(); return nil },
					func(context.Context) error { executed.Add(1); return nil },
				}
				var hs []*executor.Handle[int]
				for _, fn := range fns {
					var err error
					if viaGo {
						err = ex.Go(ctx, "pool", fn)
					} else {
						var h *executor.Handle[int]
						h, err = executor.Submit(ex, ctx, executor.Task[int]{Group: "pool", Fn: func(ctx context.Context) (int, error) { return 0, fn(ctx) }})
						hs = append(hs, h)
					}
					if err != nil {
						t.Fatal(err)
					}
				}
				close(ready)
				if err := ex.ShutdownGroup(guardCtx(t), "pool"); err != nil {
					t.Fatal(err)
				}
				if e := executed.Load(); e != 2 {
					t.Fatalf("round %d: %d ran, want 2: the third started after its context ended", round, e)
				}
				if len(hs) == 3 {
					if r := wait(t, hs[2]); r.Status != executor.Cancelled || r.Err != context.Canceled {
						t.Fatalf("round %d: third %+v, want Cancelled", round, r)
					}
				}
				ex.EvictGroup("pool") // for the next round
			}
			// The third never started: it holds its permits only to hand
			// them on.
			pondCounts(t, "executor", ex.Stats().TaskCounts, executor.TaskCounts{Submitted: 150, Started: 100, Succeeded: 100, Cancelled: 50})
		})
	}
}

// TestTaskGroupWithContextCanceled: a running task sees its submission's
// context cancelled, and ends Cancelled with its error.
func TestPondGroupRunningTaskSeesCancellation(t *testing.T) {
	ex := newExec(t, pondPool(100))
	ctx, cancel := context.WithCancel(bg)
	started := make(chan struct{})
	h, err := executor.Submit(ex, ctx, executor.Task[int]{Group: "pool", Fn: func(ctx context.Context) (int, error) {
		close(started)
		<-ctx.Done()
		return 0, ctx.Err()
	}})
	if err != nil {
		t.Fatal(err)
	}
	recv(t, started, "the task started")
	cancel()
	if r := wait(t, h); r.Status != executor.Cancelled || r.Err != context.Canceled {
		t.Errorf("result %+v, want Cancelled", r)
	}
}

// TestTaskGroupStop: a task that stops its group (ShutdownGroup, from
// inside, with a context that has ended, so that it does not wait for
// itself) leaves the tasks behind it unrun, Cancelled with
// ErrGroupShutdown (pond: ErrGroupStopped); its own context is cancelled
// the same way, and its outcome is what its Fn returns.
func TestPondGroupStop(t *testing.T) {
	ex := newExec(t, pondPool(1))
	ended, cancel := context.WithCancel(bg)
	cancel()
	var executed atomic.Int64
	var stopErr, cause error
	ready := make(chan struct{})
	defer close(ready)
	hs := []*executor.Handle[int]{
		submit(t, ex, executor.Task[int]{Group: "grp", Fn: func(context.Context) (int, error) {
			<-ready // the three are submitted
			executed.Add(1)
			return 0, nil
		}}),
		submit(t, ex, executor.Task[int]{Group: "grp", Fn: func(ctx context.Context) (int, error) {
			executed.Add(1)
			stopErr = ex.ShutdownGroup(ended, "grp")
			<-ctx.Done()
			cause = context.Cause(ctx)
			return 0, nil
		}}),
		submit(t, ex, executor.Task[int]{Group: "grp", Fn: func(context.Context) (int, error) { executed.Add(1); return 0, nil }}),
	}
	ready <- struct{}{}
	if r := wait(t, hs[2]); r.Status != executor.Cancelled || !errors.Is(r.Err, executor.ErrGroupShutdown) {
		t.Errorf("task behind the stop %+v, want Cancelled by ErrGroupShutdown", r)
	}
	if r := wait(t, hs[1]); r.Status != executor.Success {
		t.Errorf("stopping task %+v", r)
	}
	if stopErr != context.Canceled || !errors.Is(cause, executor.ErrGroupShutdown) {
		t.Errorf("ShutdownGroup = %v, task's cause %v", stopErr, cause)
	}
	if e := executed.Load(); e != 2 {
		t.Errorf("%d ran, want 2", e)
	}
	if _, err := executor.Submit(ex, bg, executor.Task[int]{Group: "grp", Fn: pondNop}); !errors.Is(err, executor.ErrGroupShutdown) {
		t.Errorf("Submit to the stopped group = %v", err)
	}
}

// TestTaskGroupWaitingTasks: 20 tasks in a pool of 10: 10 run, 10 wait.
func TestPondGroupWaitingTasks(t *testing.T) {
	ex := newExec(t, pondPool(10))
	g := newGate()
	defer g.open()
	hs := make([]*executor.Handle[string], 20)
	for i := range hs {
		hs[i] = submit(t, ex, executor.Task[string]{Group: "pool", Fn: g.fn(fmt.Sprint(i))})
	}
	g.waitStarted(t, 10)
	if s := ex.Stats(); s.RunningTasks != 10 || s.Waiting != 10 {
		t.Errorf("stats %+v, want 10 running and 10 waiting", s)
	}
	g.open()
	for i, h := range hs {
		if r := wait(t, h); r.Status != executor.Success || r.Value != fmt.Sprint(i) {
			t.Errorf("result %d: %+v", i, r)
		}
	}
}
