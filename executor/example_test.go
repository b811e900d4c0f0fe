package executor_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

func ExampleSubmit() {
	p, err := policy.New(policy.WithGlobalMaxInFlight(8), policy.WithDefaultMaxConcurrency(2))
	if err != nil {
		panic(err)
	}
	ex, err := executor.New(p)
	if err != nil {
		panic(err)
	}
	defer ex.Close()

	ctx := context.Background()
	h, err := executor.Submit(ex, ctx, executor.Task[int]{
		Group: "tenant-a",
		ID:    "answer",
		Fn:    func(context.Context) (int, error) { return 6 * 7, nil },
	})
	if err != nil { // refused: errors.Is(err, executor.ErrRejected)
		panic(err)
	}
	res, _ := h.Wait(ctx)
	fmt.Println(res.Group, res.ID, res.Status, res.Value)
	// Output: tenant-a answer Success 42
}

// Do admits work and runs it in the calling goroutine, as a request handler
// wants: a tenant whose limit is full is refused at once, with the limit
// named, while the other tenants are served.
func ExampleExecutor_Do() {
	p, err := policy.New(policy.WithDefaultMaxInFlight(1)) // one request admitted per tenant
	if err != nil {
		panic(err)
	}
	ex, err := executor.New(p)
	if err != nil {
		panic(err)
	}
	defer ex.Close()

	ctx := context.Background()
	started, release, done := make(chan struct{}), make(chan struct{}), make(chan error)
	go func() {
		done <- ex.Do(ctx, "tenant-a", func(context.Context) error {
			close(started)
			<-release
			return nil
		})
	}()
	<-started // tenant-a's one place is taken until its request returns

	err = ex.Do(ctx, "tenant-a", func(context.Context) error { return nil })
	var rej *executor.RejectedError
	if errors.As(err, &rej) { // shed it: a 429
		fmt.Printf("tenant-a refused by the %s limit\n", rej.Limit)
	}
	err = ex.Do(ctx, "tenant-b", func(context.Context) error {
		return errors.New("report failed") // Do returns fn's error
	})
	fmt.Println("tenant-b:", err)

	close(release)
	fmt.Println("tenant-a:", <-done)
	// Output:
	// tenant-a refused by the group in-flight limit
	// tenant-b: report failed
	// tenant-a: <nil>
}

func ExampleExecutor_Go() {
	p, err := policy.New(policy.WithGlobalMaxInFlight(8), policy.WithDefaultMaxConcurrency(2))
	if err != nil {
		panic(err)
	}
	ex, err := executor.New(p)
	if err != nil {
		panic(err)
	}
	defer ex.Close()

	// Fire and forget: no handle; outcomes go to Stats and the listener.
	ctx := context.Background()
	for _, tenant := range []string{"a", "b", "a", "c"} {
		if err := ex.Go(ctx, tenant, func(context.Context) error { return nil }); err != nil {
			fmt.Println("refused:", err)
		}
	}
	if err := ex.Shutdown(ctx); err != nil { // waits for them all
		panic(err)
	}
	s := ex.Stats()
	fmt.Println(s.Submitted, s.Succeeded)
	// Output: 4 4
}

func ExampleExecuteAll() {
	p, _ := policy.New(policy.WithDefaultMaxConcurrency(2))
	ex, _ := executor.New(p)
	defer ex.Close()

	square := func(n int) func(context.Context) (int, error) {
		return func(context.Context) (int, error) {
			if n < 0 {
				return 0, fmt.Errorf("negative input %d", n)
			}
			return n * n, nil
		}
	}
	tasks := []executor.Task[int]{
		{Group: "tenant-a", ID: "a", Fn: square(3)},
		{Group: "tenant-b", ID: "b", Fn: square(-1)},
		{Group: "tenant-a", ID: "c", Fn: square(4)},
	}
	// Results come back in the order of tasks, whatever order they ran in.
	for _, r := range executor.ExecuteAll(ex, context.Background(), tasks) {
		fmt.Println(r.ID, r.Status, r.Value, r.Err)
	}
	// Output:
	// a Success 9 <nil>
	// b Failed 0 negative input -1
	// c Success 16 <nil>
}

// Under the default Abort policy, a task that does not fit is refused at
// once: Submit returns a *RejectedError saying which limit refused it.
func ExampleRejectedError() {
	p, _ := policy.New(
		policy.WithDefaultMaxInFlight(1), // the bulkhead: one task admitted per group
		policy.WithRejectionPolicy(policy.Abort),
	)
	ex, _ := executor.New(p)
	defer ex.Close()

	ctx := context.Background()
	release := make(chan struct{})
	busy, _ := executor.Submit(ex, ctx, executor.Task[string]{
		Group: "tenant-a", ID: "first",
		Fn: func(context.Context) (string, error) { <-release; return "done", nil },
	})

	// "first" holds tenant-a's only place until it returns.
	h, err := executor.Submit(ex, ctx, executor.Task[string]{
		Group: "tenant-a", ID: "second",
		Fn: func(context.Context) (string, error) { return "never runs", nil },
	})
	fmt.Println(err)
	fmt.Println(errors.Is(err, executor.ErrRejected))
	var rej *executor.RejectedError
	if errors.As(err, &rej) {
		fmt.Printf("limit=%q used=%d max=%d\n", rej.Limit, rej.Used, rej.Max)
	}
	res, _ := h.Result() // a refused task's handle is already complete
	fmt.Println(res.Status)

	// Another group has its own bulkhead.
	other, err := executor.Submit(ex, ctx, executor.Task[string]{
		Group: "tenant-b", ID: "third",
		Fn: func(context.Context) (string, error) { return "served", nil },
	})
	fmt.Println(err)
	res, _ = other.Wait(ctx)
	fmt.Println(res.Status, res.Value)

	close(release)
	res, _ = busy.Wait(ctx)
	fmt.Println(res.Status, res.Value)
	// Output:
	// executor: task "second" of group "tenant-a" rejected by group in-flight (weight 1, used 1 of 1)
	// true
	// limit="group in-flight" used=1 max=1
	// Rejected
	// <nil>
	// Success served
	// Success done
}

func ExampleHandle_Cancel() {
	p, _ := policy.New() // defaults: one task of a group runs at a time
	ex, _ := executor.New(p)
	defer ex.Close()

	ctx := context.Background()
	started := make(chan struct{})
	running, _ := executor.Submit(ex, ctx, executor.Task[int]{
		Group: "tenant-a", ID: "running",
		Fn: func(ctx context.Context) (int, error) {
			close(started)
			<-ctx.Done() // a well-behaved task stops when cancelled
			return 0, ctx.Err()
		},
	})
	// The group's only slot is taken, so this one waits in the group's queue.
	waiting, _ := executor.Submit(ex, ctx, executor.Task[int]{
		Group: "tenant-a", ID: "waiting",
		Fn: func(context.Context) (int, error) { return 1, nil },
	})
	<-started

	// A waiting task is removed and never runs.
	waiting.Cancel()
	res, _ := waiting.Wait(ctx)
	fmt.Println(res.ID, res.Status, errors.Is(res.Err, context.Canceled))

	// A running task has its context cancelled; its outcome is what Fn returns.
	running.Cancel()
	res, _ = running.Wait(ctx)
	fmt.Println(res.ID, res.Status, errors.Is(res.Err, context.Canceled))
	// Output:
	// waiting Cancelled true
	// running Cancelled true
}

func ExampleExecutor_GroupStats() {
	p, _ := policy.New(policy.WithDefaultMaxConcurrency(4))
	ex, _ := executor.New(p)
	defer ex.Close()

	ok := func(context.Context) (int, error) { return 0, nil }
	fail := func(context.Context) (int, error) { return 0, errors.New("boom") }
	executor.ExecuteAll(ex, context.Background(), []executor.Task[int]{
		{Group: "tenant-a", Fn: ok},
		{Group: "tenant-a", Fn: ok},
		{Group: "tenant-a", Fn: fail},
	})

	// The group is idle now; its state and counters are kept (up to
	// WithMaxIdleGroups idle groups).
	gs, found := ex.GroupStats("tenant-a")
	fmt.Println(found, gs.MaxConcurrency, gs.MaxInFlight, gs.Waiting, gs.Running)
	fmt.Println(gs.Submitted, gs.Started, gs.Succeeded, gs.Failed, gs.Rejected)
	// Output:
	// true 4 1024 0 0
	// 3 3 2 1 0
}

func ExampleListenerFuncs() {
	l := executor.ListenerFuncs{
		Submitted: func(e executor.Event) { fmt.Println("submitted", e.Group, e.ID) },
		Started:   func(e executor.Event) { fmt.Println("started", e.ID) },
		Completed: func(e executor.Event) { fmt.Println("completed", e.ID, e.Status) },
		// Rejected is nil: those events are skipped.
	}
	p, _ := policy.New()
	ex, _ := executor.New(p, executor.WithListener(l))
	defer ex.Close()

	h, _ := executor.Submit(ex, context.Background(), executor.Task[int]{
		Group: "tenant-a", ID: "t1",
		Fn: func(context.Context) (int, error) { return 1, nil },
	})
	// A handle completes after its listener calls have returned.
	<-h.Done()
	// Output:
	// submitted tenant-a t1
	// started t1
	// completed t1 Success
}

func ExampleListeners() {
	// A metrics collector (metrics/prom, metrics/otel) and a log of one's
	// own: WithListener takes one Listener, Listeners makes one of both.
	metrics := executor.ListenerFuncs{Completed: func(e executor.Event) { fmt.Println("metrics:", e.Group, e.Status) }}
	logs := executor.ListenerFuncs{Completed: func(e executor.Event) { fmt.Println("log:", e.Group, e.ID, e.Err) }}
	p, _ := policy.New()
	ex, err := executor.New(p, executor.WithListener(executor.Listeners(metrics, logs)))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ex.Close()

	h, _ := executor.Submit(ex, context.Background(), executor.Task[int]{
		Group: "tenant-a", ID: "t1",
		Fn: func(context.Context) (int, error) { return 0, errors.New("boom") },
	})
	<-h.Done()

	// A second WithListener would replace the first: New refuses it.
	_, err = executor.New(p, executor.WithListener(metrics), executor.WithListener(logs))
	fmt.Println(err != nil)
	// Output:
	// metrics: tenant-a Failed
	// log: tenant-a t1 boom
	// true
}

func ExampleGroupFromContext() {
	p, _ := policy.New()
	ex, _ := executor.New(p)
	defer ex.Close()

	// A request handler run by Do (as httpadmit.Handler runs one) learns
	// the group its work was admitted under from its context, rather than
	// derive the tenant from the request again.
	handle := func(ctx context.Context) error {
		group, ok := executor.GroupFromContext(ctx)
		fmt.Println("serving", group, ok)
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := ex.Do(ctx, "tenant-a", handle); err != nil {
		fmt.Println(err)
	}
	h, _ := executor.Submit(ex, ctx, executor.Task[int]{
		Group: "tenant-b",
		Fn:    func(ctx context.Context) (int, error) { return 0, handle(ctx) },
	})
	<-h.Done()

	// A context the executor did not make answers no group.
	_, ok := executor.GroupFromContext(ctx)
	fmt.Println(ok)
	// Output:
	// serving tenant-a true
	// serving tenant-b true
	// false
}

func ExampleExecutor_SetGroupLimits() {
	p, _ := policy.New(policy.WithDefaultMaxConcurrency(1))
	ex, _ := executor.New(p)
	defer ex.Close()
	ctx := context.Background()

	// tenant-a runs one task at a time: the second waits.
	release := make(chan struct{})
	task := executor.Task[int]{Group: "tenant-a", Fn: func(context.Context) (int, error) { <-release; return 0, nil }}
	h1, _ := executor.Submit(ex, ctx, task)
	h2, _ := executor.Submit(ex, ctx, task)
	gs, _ := ex.GroupStats("tenant-a")
	fmt.Println("running", gs.RunningTasks, "waiting", gs.Waiting)

	// Raise its concurrency at runtime, keeping its other limits: the
	// waiting task starts before SetGroupLimits returns. (Lowering a limit
	// would let running tasks finish and start nothing until under it.)
	l := policy.GroupLimits{MaxInFlight: gs.MaxInFlight, MaxConcurrency: 4, QueueThreshold: gs.QueueThreshold, Share: gs.Share}
	if err := ex.SetGroupLimits("tenant-a", l); err != nil {
		panic(err)
	}
	gs, _ = ex.GroupStats("tenant-a")
	fmt.Println("running", gs.RunningTasks, "waiting", gs.Waiting, "limit", gs.MaxConcurrency)
	close(release)
	h1.Wait(ctx)
	h2.Wait(ctx)

	// Every field is a value: a zero limit is refused, naming the field,
	// and nothing changes.
	err := ex.SetGroupLimits("tenant-a", policy.GroupLimits{MaxInFlight: 8})
	fmt.Println(errors.Is(err, policy.ErrInvalidOption), err)

	// ResetGroupLimits returns the group to the policy's limits.
	if err := ex.ResetGroupLimits("tenant-a"); err != nil {
		panic(err)
	}
	gs, _ = ex.GroupStats("tenant-a")
	fmt.Println("limit", gs.MaxConcurrency)
	// Output:
	// running 1 waiting 1
	// running 2 waiting 0 limit 4
	// true executor: SetGroupLimits("tenant-a"): policy: GroupLimits.MaxConcurrency(0): a limit must be >= 1 (policy.Unlimited for none)
	// limit 1
}

// DoWeighted admits work that counts for more than one permit, such as an
// export that takes 4 of a tenant's 8 running permits. Work heavier than a
// limit it must pass could never run: it is refused at once with
// ErrTooHeavy, whatever the rejection policy.
func ExampleExecutor_DoWeighted() {
	p, err := policy.New(
		policy.WithDefaultMaxConcurrency(8),
		policy.WithGroupMaxConcurrency("free-tier", 2), // one tenant's own limit
	)
	if err != nil {
		panic(err)
	}
	ex, err := executor.New(p)
	if err != nil {
		panic(err)
	}
	defer ex.Close()

	ctx := context.Background()
	err = ex.DoWeighted(ctx, "acme", 4, func(context.Context) error {
		gs, _ := ex.GroupStats("acme")
		fmt.Println("acme running", gs.Running, "of", gs.MaxConcurrency, "permits")
		return nil
	})
	fmt.Println(err)

	err = ex.DoWeighted(ctx, "free-tier", 4, func(context.Context) error { return nil })
	var rej *executor.RejectedError
	if errors.As(err, &rej) && errors.Is(err, executor.ErrTooHeavy) {
		fmt.Printf("too heavy for the %s limit of %d: a 413, not a retry\n", rej.Limit, rej.Max)
	}
	// Output:
	// acme running 4 of 8 permits
	// <nil>
	// too heavy for the group concurrency limit of 2: a 413, not a retry
}

// A rejection handler decides, refusal by refusal, instead of the policy:
// here a refused checkout runs at once in its caller, outside every limit,
// while other work is shed.
func ExampleWithRejectionHandler() {
	p, _ := policy.New(policy.WithDefaultMaxInFlight(1)) // one task admitted per group
	ex, err := executor.New(p, executor.WithRejectionHandler(func(r *executor.Rejection) error {
		if r.Group == "checkout" {
			r.RunInCaller() // completes the handle with the task's outcome
			return nil
		}
		return r.Err // Submit returns it; the handle completes Rejected
	}))
	if err != nil {
		panic(err)
	}
	defer ex.Close()

	ctx := context.Background()
	release := make(chan struct{})
	block := func(context.Context) (string, error) { <-release; return "", nil }
	for _, g := range []string{"checkout", "reports"} { // fill both groups
		if _, err := executor.Submit(ex, ctx, executor.Task[string]{Group: g, Fn: block}); err != nil {
			panic(err)
		}
	}

	for _, g := range []string{"checkout", "reports"} {
		h, err := executor.Submit(ex, ctx, executor.Task[string]{
			Group: g,
			Fn:    func(context.Context) (string, error) { return "ran", nil },
		})
		res, _ := h.Result() // complete either way: run in the caller, or refused
		fmt.Printf("%s: refused %t, %s %q\n", g, errors.Is(err, executor.ErrRejected), res.Status, res.Value)
	}
	close(release)
	fmt.Println(ex.Stats().CallerRuns)
	// Output:
	// checkout: refused false, Success "ran"
	// reports: refused true, Rejected ""
	// 1
}

// A task that cannot start within the queue timeout never runs: it
// completes Rejected with ErrQueueTimeout (for Do, the error Do returns),
// and its place in the queue is freed. The clock is a fake, moved by hand.
func ExampleSubmit_queueTimeout() {
	p, err := policy.New(policy.WithQueueTimeout(2 * time.Second)) // concurrency 1 by default
	if err != nil {
		panic(err)
	}
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ex, err := executor.New(p, executor.WithClock(clk))
	if err != nil {
		panic(err)
	}
	defer ex.Close()

	ctx := context.Background()
	release := make(chan struct{})
	busy, _ := executor.Submit(ex, ctx, executor.Task[string]{
		Group: "tenant-a",
		Fn:    func(context.Context) (string, error) { <-release; return "done", nil },
	})
	late, _ := executor.Submit(ex, ctx, executor.Task[string]{
		Group: "tenant-a",
		Fn:    func(context.Context) (string, error) { return "never runs", nil },
	})

	clk.Advance(2 * time.Second) // the busy task still holds the group's one slot
	res, _ := late.Wait(ctx)
	fmt.Println(res.Status, errors.Is(res.Err, executor.ErrQueueTimeout), res.Queued)

	close(release)
	res, _ = busy.Wait(ctx)
	fmt.Println(res.Status, res.Value)
	// Output:
	// Rejected true 2s
	// Success done
}
