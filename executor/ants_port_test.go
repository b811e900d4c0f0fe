package executor_test

// ants' pool tests, ported to the executor.
//
// Source: github.com/panjf2000/ants/v2 (MIT License, Copyright (c) 2018
// Andy Pan), commit 76ddb18c: ants_test.go and example_test.go. Each port
// is named TestAnts and a name of its own, and names in a comment the
// upstream tests it ports. The scripts of the cases are ported; no upstream
// code is, and the main module does not import ants (benchmarks/ does, as
// a peer and as WithSpawn's spawn).
//
// What was adapted, and why:
//   - An ants pool of capacity n is a group whose concurrency limit is n:
//     Running is the group's RunningTasks (GroupStats), Cap its
//     MaxConcurrency. A pool of capacity -1 is a group whose limits are
//     policy.Unlimited. A MultiPool of k pools is k groups, the caller
//     choosing the group where ants balances the load.
//   - A blocking Submit that waits for a free worker is a Do call, which
//     waits in its group's queue and runs in its caller once admitted;
//     Submit and Go queue the task and return at once instead. Either way
//     every task runs, within the limit.
//   - WithNonblocking is a group whose in-flight limit (its bulkhead,
//     running plus waiting) is its concurrency limit, or whose queue
//     threshold is 0, under Abort: a task refused for lack of room is
//     refused at once with a *RejectedError naming the limit, matching
//     ErrRejected (ants: ErrPoolOverload). WithMaxBlockingTasks(k) is a
//     queue threshold of k, or an in-flight limit k above the concurrency
//     limit.
//   - A pool with a func (PoolWithFunc, PoolWithFuncGeneric: one function,
//     invoked with an argument) is one Fn shape bound to each argument in a
//     Task[T]: its typed value comes back in the Result, as Invoke's
//     argument went in.
//   - WithPanicHandler is the listener, told of the task Failed with a
//     *PanicError; a pool without a handler is an executor without a
//     listener: the panic is recovered and counted Failed either way.
//   - Tune is SetGroupLimits (SetGlobalMaxInFlight for the global limit):
//     raising a limit starts the waiting tasks that now fit before it
//     returns, as Tune wakes the blocked submitters.
//   - ReleaseTimeout is Shutdown with a context that ends at the timeout: it
//     returns nil once the tasks are done, and the context's error (ants:
//     ErrTimeout) if it ends first, cancelling the tasks left. Release while
//     submitters are blocked is Close. Reboot has no equal for the executor,
//     whose shutdown is final; a group shut down (ShutdownGroup) is
//     rebooted by EvictGroup, which lifts the shutdown.
//   - ants' purge of idle workers is the executor's reclamation of idle
//     groups' state (WithMaxIdleGroups(0) reclaims a group as soon as it is
//     idle); WithDisablePurge is idle groups kept, as they are by default.
//     The executor's own idle workers are not observable through its API:
//     they exit at Close, which goleak.VerifyTestMain checks for every test.
//   - Upstream's sleeps (a task's 10 ms to 1 s of work, 1 s "long enough to
//     block", the cleaner's interval) become gates, counts taken inside the
//     tasks, and the executor's own counters, so that no outcome depends on
//     the machine's speed. The 100,000 tasks of TestAntsPoolWaitToGetWorker
//     are 10,000 here, under -race on a small machine.
//
// Left out, with no executor equivalent: TestNoPool (no pool at all); the
// PreMalloc variants' preallocation (a waiting task costs its handle, no
// worker: their scripts are the ports of the plain ones);
// TestInfinitePool's Tune of an unlimited pool, which ants ignores
// (SetGroupLimits does change an unlimited group's limits), and its
// ErrInvalidPreAllocSize; TestWithDisablePurgeAndWithExpirationPool's and
// TestRestCodeCoverage's expiry and logger options (idle groups are
// reclaimed by count, not age, and the executor logs nothing);
// TestMultiPool's load-balancing strategies and pool indexes (a task names
// its group), and its Reboot; the worker queue tests of
// worker_loop_queue_test.go and worker_stack_test.go (TestNewLoopQueue,
// TestLoopQueue, TestRotatedQueueSearch, TestRetrieveExpiry,
// TestNewWorkerStack, TestWorkerStack, TestSearch: ants' internal idle
// worker lists, ordered by expiry); pkg/sync's spin lock benchmarks; the
// benchmarks of ants_benchmark_test.go (benchmarks/ measures ants' pool
// beside the executor).

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// antsPool is the policy of an ants pool of capacity n, as group "pool":
// its concurrency limit n, admitting any number of tasks to wait, unless
// more says otherwise.
func antsPool(n int, more ...policy.Option) []policy.Option {
	return append([]policy.Option{
		policy.WithDefaultMaxConcurrency(n),
		policy.WithDefaultMaxInFlight(policy.Unlimited),
	}, more...)
}

// antsRunningTasks checks the tasks running and waiting in group.
func antsRunningTasks(t *testing.T, ex *executor.Executor, group string, running, waiting int) {
	t.Helper()
	if gs := groupStats(t, ex, group); gs.RunningTasks != running || gs.Waiting != waiting {
		t.Fatalf("group %s runs %d and has %d waiting, want %d and %d", group, gs.RunningTasks, gs.Waiting, running, waiting)
	}
}

// antsRefused checks that err is a refusal for lack of room at limit.
func antsRefused(t *testing.T, err error, limit executor.Limit) {
	t.Helper()
	var re *executor.RejectedError
	if !errors.Is(err, executor.ErrRejected) || !errors.As(err, &re) || re.Limit != limit {
		t.Fatalf("error %v, want a *RejectedError for the %s limit (ants: ErrPoolOverload)", err, limit)
	}
}

// antsShutdown shuts ex down, as ReleaseTimeout with a timeout far above
// any task's time.
func antsShutdown(t *testing.T, ex *executor.Executor) {
	t.Helper()
	if err := ex.Shutdown(guardCtx(t)); err != nil {
		t.Fatalf("Shutdown: %v: the tasks did not all finish", err)
	}
}

// antsHold is a task body that reports its start on started and holds its
// permit until release is closed.
func antsHold(started chan<- struct{}, release <-chan struct{}) func(context.Context) error {
	return func(context.Context) error {
		started <- struct{}{}
		<-release
		return nil
	}
}

// ported from ants' TestAntsPoolWaitToGetWorker, TestAntsPoolWaitToGetWorkerPreMalloc
// and TestAntsPool (its default pool is a new executor here): far more tasks
// than the pool's capacity all run, never more at once than the capacity,
// whether the capacity is a group's concurrency limit or the global one.
func TestAntsPoolWaitToGetWorker(t *testing.T) {
	const capacity, tasks = 1000, 10_000
	for _, c := range []struct {
		name  string
		popts []policy.Option
	}{
		{"group concurrency", antsPool(capacity)},
		{"global in-flight", []policy.Option{
			policy.WithGlobalMaxInFlight(capacity),
			policy.WithDefaultMaxConcurrency(policy.Unlimited),
			policy.WithDefaultMaxInFlight(policy.Unlimited),
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ex := newExec(t, c.popts)
			var running peak
			var wg sync.WaitGroup
			wg.Add(tasks)
			for range tasks {
				err := ex.Go(bg, "pool", func(context.Context) error {
					defer wg.Done()
					running.enter()
					defer running.leave()
					runtime.Gosched() // upstream's demoPoolFunc sleeps 100 ms
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			waitAll(t, &wg, "every task ran")
			if m := running.max.Load(); m > capacity {
				t.Errorf("%d tasks ran at once, over the capacity of %d", m, capacity)
			}
			antsShutdown(t, ex)
			gs := groupStats(t, ex, "pool")
			if gs.Succeeded != tasks || gs.Started != tasks || gs.Running != 0 {
				t.Errorf("group stats %+v, want %d started and succeeded, none running", gs, tasks)
			}
		})
	}
}

// ported from ants' TestAntsPoolWithFuncWaitToGetWorker,
// TestAntsPoolWithFuncGenericWaitToGetWorker, their PreMalloc variants,
// TestRebootNewPoolCalc's first half and the examples ExamplePool,
// ExamplePoolWithFunc and ExamplePoolWithFuncGeneric: one function invoked
// with 1000 arguments on a pool of 10, each argument reaching its own
// invocation (the sum of 0..999 is 499500) and each typed result coming
// back on its handle, or from its Do call.
func TestAntsPoolWithFuncWaitToGetWorker(t *testing.T) {
	const capacity, runTimes, want = 10, 1000, 499500
	ex := newExec(t, antsPool(capacity))
	var sum atomic.Int32
	var running peak
	incSum := func(i int32) executor.Task[int32] {
		return executor.Task[int32]{Group: "pool", Fn: func(context.Context) (int32, error) {
			running.enter()
			defer running.leave()
			sum.Add(i)
			return i, nil
		}}
	}
	t.Run("Submit", func(t *testing.T) {
		sum.Store(0)
		handles := make([]*executor.Handle[int32], runTimes)
		for i := range handles {
			handles[i] = submit(t, ex, incSum(int32(i)))
		}
		var results int32
		for i, h := range handles {
			r := wait(t, h)
			if r.Status != executor.Success || r.Value != int32(i) {
				t.Fatalf("invocation %d: %+v, want Success with its argument", i, r)
			}
			results += r.Value
		}
		if s := sum.Load(); s != want || results != want {
			t.Fatalf("sum %d inside, %d of the results, want %d", s, results, want)
		}
	})
	t.Run("Do", func(t *testing.T) {
		// Blocking callers, as many at once as the pool's capacity and more.
		sum.Store(0)
		var wg sync.WaitGroup
		errs := make(chan error, runTimes)
		for i := range runTimes {
			wg.Go(func() {
				errs <- ex.Do(bg, "pool", func(ctx context.Context) error {
					_, err := incSum(int32(i)).Fn(ctx)
					return err
				})
			})
		}
		waitAll(t, &wg, "every Do call returned")
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if s := sum.Load(); s != want {
			t.Fatalf("sum %d, want %d", s, want)
		}
	})
	if m := running.max.Load(); m > capacity {
		t.Errorf("%d invocations ran at once, over the capacity of %d", m, capacity)
	}
}

// ported from ants' TestAntsPoolGetWorkerFromCache,
// TestAntsPoolWithFuncGetWorkerFromCache, their Generic and PreMalloc
// variants: once a burst has run and its idle state has been reclaimed
// (ants: its workers expired and went back to the cache), the next task is
// still served, its group made afresh under the policy's limits.
func TestAntsPoolGetWorkerFromCache(t *testing.T) {
	const capacity, burst = 10_000, 1000
	ex := newExec(t, antsPool(capacity), executor.WithMaxIdleGroups(0))
	var wg sync.WaitGroup
	wg.Add(burst)
	for range burst {
		if err := ex.Go(bg, "pool", func(context.Context) error { wg.Done(); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	waitAll(t, &wg, "the burst ran")
	// A group idle is reclaimed once its last task has given its permits
	// back, which follows that task's return.
	await(t, "the idle group was reclaimed", func() bool { return ex.Stats().Groups == 0 })
	if s := ex.Stats(); s.Running != 0 || s.RunningTasks != 0 || s.Waiting != 0 {
		t.Fatalf("stats %+v after the burst, want nothing running or waiting", s)
	}
	h := submit(t, ex, executor.Task[int]{Group: "pool", Fn: func(context.Context) (int, error) { return 10, nil }})
	if r := wait(t, h); r.Status != executor.Success || r.Value != 10 {
		t.Fatalf("the task after the burst: %+v", r)
	}
	if s := ex.Stats(); s.Started != burst+1 || s.Succeeded != burst+1 {
		t.Errorf("stats %+v, want %d started and succeeded", s, burst+1)
	}
}

// antsFailures collects, as ants' panic handler does, the failures the
// listener is told of.
type antsFailures struct{ events chan executor.Event }

func (f *antsFailures) listener() executor.Listener {
	return executor.ListenerFuncs{Completed: func(e executor.Event) {
		if e.Status == executor.Failed {
			f.events <- e
		}
	}}
}

// ported from ants' TestPanicHandler and TestPanicHandlerPreMalloc: a
// task's panic is reported once to the handler (the listener, and the
// task's result), its permits are released, and the pool still serves. Its
// three pools are the three ways in: Submit, Go (ants: Submit, with no
// result) and Do, which recovers nothing: the panic goes on up its caller,
// the handler there, after the permits are back, and the listener hears of
// the task Failed. A capacity of 1 makes the next task's run the proof
// that the panicking one gave its permit back.
func TestAntsPanicHandler(t *testing.T) {
	failures := &antsFailures{events: make(chan executor.Event, 3)}
	ex := newExec(t, antsPool(1), executor.WithListener(failures.listener()))
	wantPanics := func(way string, recovered bool, n uint64) {
		t.Helper()
		e := recv(t, failures.events, way+": the panic was reported")
		var pe *executor.PanicError
		if recovered && (!errors.As(e.Err, &pe) || pe.Value != "Oops!") {
			t.Fatalf("%s: failure %v reported, want a *PanicError of Oops!", way, e.Err)
		}
		wantServes(t, ex, "pool", "a "+way+" task panicked")
		gs := groupStats(t, ex, "pool")
		if gs.Running != 0 || gs.Failed != n {
			t.Fatalf("%s: group stats %+v, want nothing running and %d failed", way, gs, n)
		}
	}

	h := submit(t, ex, executor.Task[int]{Group: "pool", Fn: func(context.Context) (int, error) { panic("Oops!") }})
	var pe *executor.PanicError
	if r := wait(t, h); r.Status != executor.Failed || !errors.As(r.Err, &pe) || pe.Value != "Oops!" {
		t.Fatalf("result %+v, want Failed with a *PanicError of Oops!", r)
	}
	wantPanics("Submit", true, 1)

	if err := ex.Go(bg, "pool", func(context.Context) error { panic("Oops!") }); err != nil {
		t.Fatal(err)
	}
	wantPanics("Go", true, 2)

	recovered := func() (v any) {
		defer func() { v = recover() }()
		_ = ex.Do(bg, "pool", func(context.Context) error { panic("Oops!") })
		return nil
	}()
	if recovered != "Oops!" {
		t.Fatalf("Do's caller recovered %v, want the panic Oops!", recovered)
	}
	wantPanics("Do", false, 3)
	select {
	case e := <-failures.events:
		t.Fatalf("a fourth failure %+v was reported", e)
	default:
	}
}

// ported from ants' TestPoolPanicWithoutHandler and
// TestPoolPanicWithoutHandlerPreMalloc: without a handler (a listener) a
// task's panic crashes nothing: it is recovered, counted Failed, and the
// pool goes on serving.
func TestAntsPoolPanicWithoutHandler(t *testing.T) {
	ex := newExec(t, antsPool(10))
	if err := ex.Go(bg, "pool", func(context.Context) error { panic("Oops!") }); err != nil {
		t.Fatal(err)
	}
	h := submit(t, ex, executor.Task[string]{Group: "pool", Fn: func(context.Context) (string, error) { panic("Oops!") }})
	if r := wait(t, h); r.Status != executor.Failed {
		t.Fatalf("result %+v, want Failed", r)
	}
	await(t, "both panics were counted", func() bool { return groupStats(t, ex, "pool").Failed == 2 })
	wantServes(t, ex, "pool", "two tasks panicked")
	if s := ex.Stats(); s.Running != 0 || s.Failed != 2 || s.Succeeded != 1 {
		t.Errorf("stats %+v, want nothing running, 2 failed and 1 succeeded", s)
	}
}

// ported from ants' TestPurgePool and TestPurgePreMallocPool: a pool full of
// held tasks runs exactly its capacity; once they are done nothing runs,
// and the idle group's state is purged (reclaimed) when no idle group is
// kept. Each upstream pool kind is a way in.
func TestAntsPurgePool(t *testing.T) {
	const size = 500
	for _, viaGo := range []bool{false, true} {
		t.Run(fmt.Sprint("Go ", viaGo), func(t *testing.T) {
			ex := newExec(t, antsPool(size), executor.WithMaxIdleGroups(0))
			started := make(chan struct{}, size)
			release := make(chan struct{})
			closeAtEnd(t, release)
			var done sync.WaitGroup
			done.Add(size)
			for range size {
				fn := antsHold(started, release)
				var err error
				if viaGo {
					err = ex.Go(bg, "pool", func(ctx context.Context) error { defer done.Done(); return fn(ctx) })
				} else {
					var h *executor.Handle[int]
					h, err = executor.Submit(ex, bg, executor.Task[int]{Group: "pool", Fn: func(ctx context.Context) (int, error) { return 0, fn(ctx) }})
					if err == nil {
						go func() { <-h.Done(); done.Done() }()
					}
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			for range size {
				recv(t, started, "the pool filled up")
			}
			antsRunningTasks(t, ex, "pool", size, 0)
			if gs := groupStats(t, ex, "pool"); gs.Running != size || gs.MaxConcurrency-gs.Running != 0 {
				t.Fatalf("group stats %+v, want the pool full", gs)
			}
			close(release)
			waitAll(t, &done, "every task finished")
			await(t, "the idle group was purged", func() bool { return ex.Stats().Groups == 0 })
			if s := ex.Stats(); s.Running != 0 || s.RunningTasks != 0 || s.Succeeded != size {
				t.Fatalf("stats %+v, want the pool empty, %d succeeded", s, size)
			}
		})
	}
}

// ported from ants' TestWithDisablePurgePool, TestWithDisablePurgePoolFunc,
// TestWithDisablePurgeAndWithExpirationPool and
// TestWithDisablePurgeAndWithExpirationPoolFunc: with idle state kept (the
// default, WithMaxIdleGroups), groups whose tasks have all finished keep
// their state, limits and counters, none of it purged, until the shutdown,
// which still waits for nothing and returns nil.
func TestAntsWithDisablePurgePool(t *testing.T) {
	const numWorker = 10
	ex := newExec(t, antsPool(1))
	started := make(chan struct{}, numWorker)
	sig := make(chan struct{})
	closeAtEnd(t, sig)
	var done sync.WaitGroup
	done.Add(numWorker)
	for i := range numWorker {
		fn := antsHold(started, sig)
		if err := ex.Go(bg, fmt.Sprint("g", i), func(ctx context.Context) error { defer done.Done(); return fn(ctx) }); err != nil {
			t.Fatal(err)
		}
	}
	for range numWorker {
		recv(t, started, "every group's task started")
	}
	if s := ex.Stats(); s.RunningTasks != numWorker || s.Groups != numWorker || s.IdleGroups != 0 {
		t.Fatalf("stats %+v, want %d running in as many busy groups", s, numWorker)
	}
	close(sig)
	waitAll(t, &done, "every task finished")
	await(t, "every group went idle", func() bool { return ex.Stats().IdleGroups == numWorker })
	for i := range numWorker {
		gs := groupStats(t, ex, fmt.Sprint("g", i))
		if gs.Running != 0 || gs.Succeeded != 1 || gs.MaxConcurrency != 1 {
			t.Fatalf("idle group %+v, want its state kept: 1 succeeded, its limit 1", gs)
		}
	}
	antsShutdown(t, ex)
	if s := ex.Stats(); s.Groups != numWorker || s.Running != 0 {
		t.Errorf("stats %+v after the shutdown, want the %d groups' state kept, nothing running", s, numWorker)
	}
}

// ported from ants' TestNonblockingSubmit, TestNonblockingSubmitWithFunc and
// TestNonblockingSubmitWithFuncGeneric: a nonblocking pool full of running
// tasks refuses the next one at once (ants: ErrPoolOverload); the refused
// task never runs; once a running task has finished, a task is admitted
// again. Nonblocking is a bulkhead the size of the pool, or a queue
// threshold of 0, under Abort; each way in is refused alike.
func TestAntsNonblockingSubmit(t *testing.T) {
	const poolSize = 10
	for _, c := range []struct {
		name  string
		popts []policy.Option
		limit executor.Limit
	}{
		{"bulkhead", antsPool(poolSize, policy.WithDefaultMaxInFlight(poolSize)), executor.LimitGroupInFlight},
		{"queue threshold 0", antsPool(poolSize, policy.WithDefaultQueueThreshold(0)), executor.LimitGroupQueue},
	} {
		t.Run(c.name, func(t *testing.T) {
			ex := newExec(t, append(c.popts, policy.WithRejectionPolicy(policy.Abort)))
			started := make(chan struct{}, poolSize)
			release := make(chan struct{})
			closeAtEnd(t, release)
			for range poolSize - 1 {
				if err := ex.Go(bg, "pool", antsHold(started, release)); err != nil {
					t.Fatalf("a submit to a pool not full: %v", err)
				}
			}
			// f, the last to fit, is the one finished early.
			ch := make(chan struct{})
			f := submit(t, ex, executor.Task[int]{Group: "pool", Fn: func(context.Context) (int, error) {
				started <- struct{}{}
				<-ch
				return 0, nil
			}})
			for range poolSize {
				recv(t, started, "the pool filled up")
			}
			var ran atomic.Int32
			refused := func(context.Context) (int, error) { ran.Add(1); return 0, nil }
			antsRefused(t, ex.Go(bg, "pool", func(ctx context.Context) error { _, err := refused(ctx); return err }), c.limit)
			_, err := executor.Submit(ex, bg, executor.Task[int]{Group: "pool", Fn: refused})
			antsRefused(t, err, c.limit)
			antsRefused(t, ex.Do(bg, "pool", func(ctx context.Context) error { _, err := refused(ctx); return err }), c.limit)
			antsRunningTasks(t, ex, "pool", poolSize, 0)

			close(ch)
			if r := wait(t, f); r.Status != executor.Success {
				t.Fatalf("f: %+v", r)
			}
			// f's permits are back before its handle completes: the next
			// task fits at once.
			if r := wait(t, submit(t, ex, executor.Task[int]{Group: "pool", Fn: succeeding})); r.Status != executor.Success {
				t.Fatalf("the task after f: %+v", r)
			}
			if n := ran.Load(); n != 0 {
				t.Errorf("%d refused tasks ran", n)
			}
			if gs := groupStats(t, ex, "pool"); gs.Rejected != 3 {
				t.Errorf("group stats %+v, want 3 rejected", gs)
			}
			close(release)
		})
	}
}

// ported from ants' TestMaxBlockingSubmit, TestMaxBlockingSubmitWithFunc and
// TestMaxBlockingSubmitWithFuncGeneric: on a full pool that lets one
// submitter block (WithMaxBlockingTasks(1)), a blocking submit waits, the
// next one is refused at once (ants: ErrPoolOverload), and the one waiting
// runs, without error, once a running task finishes. The blocking submit is
// a Do call; the pool lets one wait by a queue threshold of 1, or by an
// in-flight limit one above its capacity. Upstream's 1 s sleep "to block"
// is the group's count of waiting tasks.
func TestAntsMaxBlockingSubmit(t *testing.T) {
	const poolSize = 10
	for _, c := range []struct {
		name  string
		popts []policy.Option
		limit executor.Limit
	}{
		{"queue threshold 1", antsPool(poolSize, policy.WithDefaultQueueThreshold(1)), executor.LimitGroupQueue},
		{"bulkhead of capacity+1", antsPool(poolSize, policy.WithDefaultMaxInFlight(poolSize+1)), executor.LimitGroupInFlight},
	} {
		t.Run(c.name, func(t *testing.T) {
			ex := newExec(t, c.popts)
			started := make(chan struct{}, poolSize)
			release := make(chan struct{})
			closeAtEnd(t, release)
			for range poolSize - 1 {
				if err := ex.Go(bg, "pool", antsHold(started, release)); err != nil {
					t.Fatalf("a submit to a pool not full: %v", err)
				}
			}
			ch := make(chan struct{})
			closeAtEnd(t, ch)
			if err := ex.Go(bg, "pool", antsHold(started, ch)); err != nil {
				t.Fatal(err)
			}
			for range poolSize {
				recv(t, started, "the pool filled up")
			}
			var blockedRan atomic.Bool
			blocked := make(chan error, 1)
			go func() {
				blocked <- ex.Do(bg, "pool", func(context.Context) error { blockedRan.Store(true); return nil })
			}()
			await(t, "the blocking submit waited", func() bool { return groupStats(t, ex, "pool").Waiting == 1 })
			antsRefused(t, ex.Go(bg, "pool", func(context.Context) error { return nil }), c.limit)
			antsRefused(t, ex.Do(bg, "pool", func(context.Context) error { return nil }), c.limit)
			antsRunningTasks(t, ex, "pool", poolSize, 1)

			close(ch)
			if err := recv(t, blocked, "the blocking submit returned once a task finished"); err != nil || !blockedRan.Load() {
				t.Fatalf("the blocking submit: %v (ran %v), want its work run without error", err, blockedRan.Load())
			}
			close(release)
			antsShutdown(t, ex)
		})
	}
}

// antsSum1000 sums 0..999 as 1000 tasks of group on ex, as ants'
// TestRebootNewPoolCalc does, and returns the sum.
func antsSum1000(t *testing.T, ex *executor.Executor, group string) int32 {
	t.Helper()
	var sum atomic.Int32
	var wg sync.WaitGroup
	wg.Add(1000)
	for i := range int32(1000) {
		if err := ex.Go(bg, group, func(context.Context) error { defer wg.Done(); sum.Add(i); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	waitAll(t, &wg, "the 1000 tasks ran")
	return sum.Load()
}

// ported from ants' TestRebootNewPool, TestRebootDefaultPool,
// TestRebootNewPoolCalc and TestRebootNewPoolWithPreAllocCalc: a pool
// released with a timeout refuses new tasks (ants: ErrPoolClosed), and once
// rebooted serves them again. A pool is a group: ShutdownGroup releases it,
// its tasks are then refused with ErrGroupShutdown, and EvictGroup reboots
// it. The executor's own Shutdown is final: there is no reboot, and every
// way in is refused with ErrShutdown after it.
func TestAntsRebootNewPool(t *testing.T) {
	ex := newExec(t, antsPool(10))
	if s := antsSum1000(t, ex, "pool"); s != 499500 {
		t.Fatalf("sum %d, want 499500", s)
	}
	if err := ex.ShutdownGroup(guardCtx(t), "pool"); err != nil {
		t.Fatalf("ShutdownGroup: %v", err)
	}
	err := ex.Go(bg, "pool", func(context.Context) error { t.Error("a task of a released pool ran"); return nil })
	if !errors.Is(err, executor.ErrGroupShutdown) || !errors.Is(err, executor.ErrRejected) {
		t.Fatalf("Go on a released pool: %v, want ErrGroupShutdown", err)
	}
	if !groupStats(t, ex, "pool").Shutdown {
		t.Fatal("the released pool's stats do not say it is shut down")
	}
	ex.EvictGroup("pool") // reboot
	if s := antsSum1000(t, ex, "pool"); s != 499500 {
		t.Fatalf("sum %d after the reboot, want 499500", s)
	}

	antsShutdown(t, ex)
	for way, err := range map[string]error{
		"Go": ex.Go(bg, "pool", func(context.Context) error { return nil }),
		"Do": ex.Do(bg, "pool", func(context.Context) error { return nil }),
		"Submit": func() error {
			_, err := executor.Submit(ex, bg, executor.Task[int]{Group: "pool", Fn: succeeding})
			return err
		}(),
	} {
		if !errors.Is(err, executor.ErrShutdown) || !errors.Is(err, executor.ErrRejected) {
			t.Errorf("%s after Shutdown: %v, want ErrShutdown", way, err)
		}
	}
	ex.EvictGroup("pool")
	if err := ex.Go(bg, "pool", func(context.Context) error { return nil }); !errors.Is(err, executor.ErrShutdown) {
		t.Errorf("Go on an evicted group of a shut-down executor: %v, want ErrShutdown", err)
	}
}

// ported from ants' TestInfinitePool, TestInfinitePoolWithFunc and
// TestInfinitePoolWithFuncGeneric: a pool without a limit runs a task and
// the task that task submits at once, side by side, and says it has no
// bound (ants: Free and Cap are -1).
func TestAntsInfinitePool(t *testing.T) {
	ex := newExec(t, []policy.Option{
		policy.WithDefaultMaxConcurrency(policy.Unlimited),
		policy.WithDefaultMaxInFlight(policy.Unlimited),
	})
	c := make(chan struct{})
	closeAtEnd(t, c)
	innerStarted := make(chan struct{})
	together := make(chan executor.GroupStats, 1)
	outer := submit(t, ex, executor.Task[int]{Group: "pool", Fn: func(context.Context) (int, error) {
		inner, err := executor.Submit(ex, bg, executor.Task[int]{Group: "pool", Fn: func(context.Context) (int, error) {
			close(innerStarted)
			<-c
			return 2, nil
		}})
		if err != nil {
			return 0, err
		}
		// Both run at once: the inner task starts while the outer one
		// holds its permit.
		<-innerStarted
		gs, _ := ex.GroupStats("pool")
		together <- gs
		c <- struct{}{}
		r, err := inner.Wait(context.Background())
		return r.Value, err
	}})
	if r := wait(t, outer); r.Status != executor.Success || r.Value != 2 {
		t.Fatalf("outer task: %+v, want Success with the inner task's 2", r)
	}
	if gs := <-together; gs.RunningTasks != 2 || gs.Waiting != 0 {
		t.Fatalf("group stats %+v while both ran, want 2 running, none waiting", gs)
	}
	gs := groupStats(t, ex, "pool")
	if gs.MaxConcurrency != policy.Unlimited || gs.MaxInFlight != policy.Unlimited || ex.Stats().GlobalMaxInFlight != policy.Unlimited {
		t.Errorf("group stats %+v, global limit %d, want every limit Unlimited", gs, ex.Stats().GlobalMaxInFlight)
	}
	if gs.Succeeded != 2 || gs.Running != 0 {
		t.Errorf("group stats %+v, want 2 succeeded, nothing running", gs)
	}
}

// ported from ants' TestReleaseWhenRunningPool, TestReleaseWhenRunningPoolWithFunc
// and TestReleaseWhenRunningPoolWithFuncGeneric: two goroutines each submit
// 30 tasks, blocking, to a pool of one, and the pool is released while
// they are blocked: every submitter returns, none hangs. The blocking
// submits are Do calls and the release is Close: the running task's context
// is cancelled, the waiting calls and those made after return ErrShutdown.
// Upstream's 1 s tasks and 3 s sleep are a task that runs until it is
// cancelled and the group's count of waiting calls.
func TestAntsReleaseWhenRunningPool(t *testing.T) {
	ex := newExec(t, antsPool(1))
	started := make(chan struct{}, 60)
	var ran, refused atomic.Int32
	var wg sync.WaitGroup
	for _, base := range []int{0, 100} {
		wg.Go(func() {
			for range 30 {
				err := ex.Do(bg, "pool", func(ctx context.Context) error {
					ran.Add(1)
					started <- struct{}{}
					<-ctx.Done()
					if !errors.Is(context.Cause(ctx), executor.ErrShutdown) {
						t.Errorf("task %d cancelled by %v, want ErrShutdown", base, context.Cause(ctx))
					}
					return ctx.Err()
				})
				switch {
				case errors.Is(err, executor.ErrShutdown):
					refused.Add(1)
				case errors.Is(err, context.Canceled): // the task that ran
				default:
					t.Errorf("a submitter's Do: %v, want ErrShutdown or its task's cancellation", err)
				}
			}
		})
	}
	recv(t, started, "a task started")
	await(t, "the other submitter blocked", func() bool { return groupStats(t, ex, "pool").Waiting == 1 })
	if err := closeWithin(t, ex, "Close while submitters are blocked"); err != nil {
		t.Fatalf("Close: %v", err)
	}
	waitAll(t, &wg, "every submitter returned after the release")
	if r, f := ran.Load(), refused.Load(); r < 1 || r+f != 60 {
		t.Errorf("%d tasks ran and %d were refused, want at least one run and 60 in all", r, f)
	}
	if s := ex.Stats(); s.Running != 0 || s.Waiting != 0 {
		t.Errorf("stats %+v after the release, want nothing running or waiting", s)
	}
}

// ported from ants' TestRestCodeCoverage, its invalid options and its Tune
// up and down under load: an invalid option is refused (ants:
// ErrInvalidPoolExpiry; here policy.ErrInvalidOption, and an invalid
// runtime limit), a task without a function is refused as invalid (ants:
// ErrLackPoolFunc; here ErrInvalidTask), and a pool tuned to its own
// capacity, then to a tenth of it, while its tasks run, runs every task
// within the limit in force.
func TestAntsRestCodeCoverage(t *testing.T) {
	for _, opt := range []policy.Option{
		policy.WithQueueTimeout(-1),
		policy.WithDefaultMaxConcurrency(-1),
		policy.WithDefaultMaxConcurrency(0),
		policy.WithGlobalMaxInFlight(-1),
	} {
		if _, err := policy.New(opt); !errors.Is(err, policy.ErrInvalidOption) {
			t.Errorf("policy.New with an invalid option: %v, want ErrInvalidOption", err)
		}
	}

	const testSize, tasks = 100, 2000
	ex := newExec(t, antsPool(testSize))
	if err := ex.Go(bg, "pool", nil); !errors.Is(err, executor.ErrInvalidTask) {
		t.Errorf("Go with a nil function: %v, want ErrInvalidTask", err)
	}
	if _, err := executor.Submit(ex, bg, executor.Task[int]{Group: "pool"}); !errors.Is(err, executor.ErrInvalidTask) {
		t.Errorf("Submit with a nil Fn: %v, want ErrInvalidTask", err)
	}
	if err := ex.SetGroupLimits("pool", policy.GroupLimits{MaxInFlight: policy.Unlimited, MaxConcurrency: 0, QueueThreshold: policy.Unlimited, Share: 1}); err == nil {
		t.Error("SetGroupLimits with a concurrency limit of 0 took it")
	}
	if err := ex.SetGlobalMaxInFlight(0); err == nil {
		t.Error("SetGlobalMaxInFlight(0) took it")
	}

	// The tasks hold their permits until the tune down, so that it is made
	// while the pool is full and tasks wait.
	started := make(chan struct{}, tasks)
	release := make(chan struct{})
	closeAtEnd(t, release)
	var running peak
	var overLimit atomic.Int64 // tasks that ran over the tuned-down limit, after the tune
	var tuned atomic.Bool
	var wg sync.WaitGroup
	wg.Add(tasks)
	for range tasks {
		err := ex.Go(bg, "pool", func(context.Context) error {
			defer wg.Done()
			running.enter()
			defer running.leave()
			if tuned.Load() && running.now.Load() > testSize/10 {
				overLimit.Add(1)
			}
			started <- struct{}{}
			<-release
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for range testSize {
		recv(t, started, "the pool filled up")
	}
	tune := func(n int) {
		t.Helper()
		if err := ex.SetGroupLimits("pool", policy.GroupLimits{MaxInFlight: policy.Unlimited, MaxConcurrency: n, QueueThreshold: policy.Unlimited, Share: 1}); err != nil {
			t.Fatal(err)
		}
	}
	tune(testSize)
	antsRunningTasks(t, ex, "pool", testSize, tasks-testSize)
	tune(testSize / 10)
	tuned.Store(true)
	if gs := groupStats(t, ex, "pool"); gs.MaxConcurrency != testSize/10 || gs.RunningTasks != testSize {
		t.Fatalf("group stats %+v after the tune down, want the limit %d and the %d running left running", gs, testSize/10, testSize)
	}
	close(release)
	waitAll(t, &wg, "every task ran")
	// A task started after the tune down starts only once fewer than the
	// new limit run; those running before it may still be finishing.
	if n := overLimit.Load(); n != 0 {
		t.Errorf("%d tasks saw more running than the tuned-down limit of %d", n, testSize/10)
	}
	antsShutdown(t, ex)
	if gs := groupStats(t, ex, "pool"); gs.Succeeded != tasks {
		t.Errorf("group stats %+v, want %d succeeded", gs, tasks)
	}
}

// ported from ants' TestPoolTuneScaleUp: a full pool of 2, tuned to 3,
// runs a third task at once; with 5 submitters blocked, tuned to 8, it
// runs them all, started before the tune returns. Each upstream pool kind
// (Pool, PoolWithFunc, PoolWithFuncGeneric) tunes the group's concurrency
// limit; the same script runs on the global limit.
func TestAntsPoolTuneScaleUp(t *testing.T) {
	setGroup := func(ex *executor.Executor, n int) error {
		return ex.SetGroupLimits("pool", policy.GroupLimits{MaxInFlight: policy.Unlimited, MaxConcurrency: n, QueueThreshold: policy.Unlimited, Share: 1})
	}
	for _, c := range []struct {
		name  string
		popts []policy.Option
		tune  func(ex *executor.Executor, n int) error
		count func(t *testing.T, ex *executor.Executor) (running, waiting int)
	}{
		{"group concurrency", antsPool(2), setGroup, func(t *testing.T, ex *executor.Executor) (int, int) {
			gs := groupStats(t, ex, "pool")
			return gs.RunningTasks, gs.Waiting
		}},
		{"global in-flight", []policy.Option{
			policy.WithGlobalMaxInFlight(2),
			policy.WithDefaultMaxConcurrency(policy.Unlimited),
			policy.WithDefaultMaxInFlight(policy.Unlimited),
		}, func(ex *executor.Executor, n int) error { return ex.SetGlobalMaxInFlight(n) }, func(_ *testing.T, ex *executor.Executor) (int, int) {
			s := ex.Stats()
			return s.RunningTasks, s.Waiting
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ex := newExec(t, c.popts)
			started := make(chan struct{}, 8)
			release := make(chan struct{})
			closeAtEnd(t, release)
			want := func(running, waiting int) {
				t.Helper()
				if r, w := c.count(t, ex); r != running || w != waiting {
					t.Fatalf("%d running and %d waiting, want %d and %d", r, w, running, waiting)
				}
			}
			tune := func(n int) {
				t.Helper()
				if err := c.tune(ex, n); err != nil {
					t.Fatal(err)
				}
			}
			goHold := func() {
				t.Helper()
				if err := ex.Go(bg, "pool", antsHold(started, release)); err != nil {
					t.Fatal(err)
				}
			}
			for range 2 {
				goHold()
			}
			for range 2 {
				recv(t, started, "the pool filled up")
			}
			want(2, 0)
			tune(3)
			goHold()
			recv(t, started, "a third task started once the pool was tuned to 3")
			want(3, 0)
			for range 5 {
				goHold()
			}
			want(3, 5)
			tune(8)
			want(8, 0) // started before the tune returned
			for range 5 {
				recv(t, started, "the blocked tasks started once the pool was tuned to 8")
			}
			close(release)
			antsShutdown(t, ex)
			if s := ex.Stats(); s.Succeeded != 8 {
				t.Errorf("stats %+v, want 8 succeeded", s)
			}
		})
	}
}

// ported from ants' TestReleaseTimeout and TestDefaultPoolReleaseTimeout:
// releasing a pool whose 5 tasks are running, with a timeout they finish
// within, returns nil once they are done. Shutdown is that release, its
// context ending at the timeout; the tasks finish once Shutdown has begun
// to wait for them, instead of after upstream's 1 s. Past the timeout
// (ants: ErrTimeout), Shutdown returns its context's error and cancels the
// tasks left, running and waiting, without waiting for them; a second
// Shutdown waits for them.
func TestAntsReleaseTimeout(t *testing.T) {
	t.Run("in time", func(t *testing.T) {
		ex := newExec(t, antsPool(10))
		started := make(chan struct{}, 5)
		release := make(chan struct{})
		closeAtEnd(t, release)
		handles := make([]*executor.Handle[int], 5)
		for i := range handles {
			handles[i] = submit(t, ex, executor.Task[int]{Group: "pool", Fn: func(ctx context.Context) (int, error) {
				return i, antsHold(started, release)(ctx)
			}})
		}
		for range 5 {
			recv(t, started, "the 5 tasks started")
		}
		if gs := groupStats(t, ex, "pool"); gs.RunningTasks == 0 {
			t.Fatal("no task running")
		}
		ctx := newWaitingCtx()
		released := make(chan error, 1)
		go func() { released <- ex.Shutdown(ctx) }()
		recv(t, ctx.asked, "Shutdown waited for the tasks")
		close(release)
		if err := recv(t, released, "Shutdown returned once the tasks were done"); err != nil {
			t.Fatalf("Shutdown: %v, want nil", err)
		}
		for i, h := range handles {
			if r, ok := h.Result(); !ok || r.Status != executor.Success || r.Value != i {
				t.Errorf("task %d: %+v (completed %v), want Success before Shutdown returned", i, r, ok)
			}
		}
	})
	t.Run("timed out", func(t *testing.T) {
		ex := newExec(t, antsPool(5))
		started := make(chan struct{}, 5)
		// The running tasks see their cancellation, then go on until lag
		// closes: a release that timed out waits for nothing, a second one
		// waits for them.
		lag := make(chan struct{})
		closeAtEnd(t, lag)
		handles := make([]*executor.Handle[int], 6) // the sixth waits
		for i := range handles {
			handles[i] = submit(t, ex, executor.Task[int]{Group: "pool", Fn: func(ctx context.Context) (int, error) {
				started <- struct{}{}
				<-ctx.Done()
				<-lag
				return 0, context.Cause(ctx)
			}})
		}
		for range 5 {
			recv(t, started, "the 5 tasks started")
		}
		// A timeout already past: no sleep decides the outcome.
		ctx, cancel := context.WithDeadline(bg, time.Unix(0, 0))
		defer cancel()
		if err := ex.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Shutdown past its timeout: %v, want context.DeadlineExceeded", err)
		}
		if r := wait(t, handles[5]); r.Status != executor.Cancelled || !errors.Is(r.Err, executor.ErrShutdown) {
			t.Errorf("the waiting task: %+v, want Cancelled by the shutdown", r)
		}
		// ants' second ReleaseTimeout returns ErrPoolClosed; a second
		// Shutdown waits for the tasks the first one cancelled.
		wctx := newWaitingCtx()
		again := make(chan error, 1)
		go func() { again <- ex.Shutdown(wctx) }()
		recv(t, wctx.asked, "the second Shutdown waited for the tasks")
		for i, h := range handles[:5] {
			if isDone(h) {
				t.Fatalf("task %d completed before it returned", i)
			}
		}
		close(lag)
		if err := recv(t, again, "the second Shutdown returned once the tasks were done"); err != nil {
			t.Fatalf("second Shutdown: %v, want nil", err)
		}
		for i, h := range handles[:5] {
			r, ok := h.Result()
			if !ok || r.Status == executor.Success || !errors.Is(r.Err, executor.ErrShutdown) {
				t.Errorf("task %d: %+v (completed %v), want it ended by the shutdown's cancellation before Shutdown returned", i, r, ok)
			}
		}
	})
}

// ported from ants' TestMultiPool, TestMultiPoolWithFunc and
// TestMultiPoolWithFuncGeneric: 10 pools of 5 run 50 long tasks, 5 in each,
// none waiting and no room left; released with a timeout once the tasks
// may end, they return nil, and the next release and submit find them
// closed (ants: ErrPoolClosed). The pools are groups, each task naming its
// own (ants balances the load), and the release is the executor's
// Shutdown, whose second call, with nothing left to wait for, returns nil.
func TestAntsMultiPool(t *testing.T) {
	const pools, size = 10, 5
	ex := newExec(t, antsPool(size))
	started := make(chan struct{}, pools*size)
	release := make(chan struct{})
	closeAtEnd(t, release)
	for i := range pools * size {
		if err := ex.Go(bg, fmt.Sprint("pool", i%pools), antsHold(started, release)); err != nil {
			t.Fatal(err)
		}
	}
	for range pools * size {
		recv(t, started, "the 50 tasks started")
	}
	if s := ex.Stats(); s.RunningTasks != pools*size || s.Waiting != 0 || s.Groups != pools {
		t.Fatalf("stats %+v, want %d running in %d groups, none waiting", s, pools*size, pools)
	}
	for i := range pools {
		gs := groupStats(t, ex, fmt.Sprint("pool", i))
		if gs.RunningTasks != size || gs.Waiting != 0 || gs.MaxConcurrency-gs.Running != 0 {
			t.Fatalf("group stats %+v, want %d running, none waiting, no room left", gs, size)
		}
	}
	close(release)
	antsShutdown(t, ex)
	antsShutdown(t, ex)
	if err := ex.Go(bg, "pool0", func(context.Context) error { return nil }); !errors.Is(err, executor.ErrShutdown) {
		t.Errorf("Go after the release: %v, want ErrShutdown", err)
	}
	if s := ex.Stats(); s.Running != 0 || s.Succeeded != pools*size {
		t.Errorf("stats %+v, want nothing running, %d succeeded", s, pools*size)
	}
}
