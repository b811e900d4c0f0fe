package executor_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// goroutineID returns the calling goroutine's ID, from its stack header.
func goroutineID() uint64 {
	b := make([]byte, 64)
	b = b[:runtime.Stack(b, false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	id, _ := strconv.ParseUint(string(b[:bytes.IndexByte(b, ' ')]), 10, 64)
	return id
}

// doIn runs Do in a new goroutine and returns a channel that yields its
// error once it returns.
func doIn(ex *executor.Executor, ctx context.Context, group string, fn func(context.Context) error) <-chan error {
	done := make(chan error, 1)
	go func() { done <- ex.Do(ctx, group, fn) }()
	return done
}

func TestDoReturnsFnsError(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)})
	want := errors.New("boom")
	if err := ex.Do(bg, "g", func(context.Context) error { return want }); err != want {
		t.Fatalf("Do = %v, want %v", err, want)
	}
	if err := ex.Do(bg, "g", func(context.Context) error { return nil }); err != nil {
		t.Fatalf("Do = %v, want nil", err)
	}
	s := groupStats(t, ex, "g")
	if s.Submitted != 2 || s.Started != 2 || s.Failed != 1 || s.Succeeded != 1 || s.InFlight != 0 || s.Running != 0 {
		t.Errorf("stats %+v", s)
	}
}

// TestDoRunsInTheCallingGoroutine: an admitted fn runs in Do's caller, both
// when it starts at once and when it waited in its group's queue.
func TestDoRunsInTheCallingGoroutine(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)})
	check := func() error {
		caller := goroutineID()
		var ran uint64
		if err := ex.Do(bg, "g", func(context.Context) error { ran = goroutineID(); return nil }); err != nil {
			return err
		}
		if ran != caller {
			return fmt.Errorf("fn ran on goroutine %d, Do was called on %d", ran, caller)
		}
		return nil
	}
	if err := check(); err != nil {
		t.Fatal(err)
	}
	g := newGate()
	submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("blocker")})
	g.waitStarted(t, 1)
	done := make(chan error, 1)
	go func() { done <- check() }()
	await(t, "the Do queued", func() bool { return groupStats(t, ex, "g").Waiting == 1 })
	g.open()
	if err := recv(t, done, "the queued Do ran once its turn came"); err != nil {
		t.Fatal(err)
	}
}

// TestDoFIFOWithSubmitAndGo: Do, Submit and Go tasks of one group start in
// the order they were admitted.
func TestDoFIFOWithSubmitAndGo(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)})
	g := newGate()
	submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("blocker")})
	g.waitStarted(t, 1)
	var mu sync.Mutex
	var order []string
	record := func(name string) {
		mu.Lock()
		order = append(order, name)
		mu.Unlock()
	}
	var dos []<-chan error
	for i := range 9 {
		name := fmt.Sprint(i)
		switch i % 3 {
		case 0:
			submit(t, ex, executor.Task[int]{Group: "g", Fn: func(context.Context) (int, error) { record(name); return 0, nil }})
		case 1:
			if err := ex.Go(bg, "g", func(context.Context) error { record(name); return nil }); err != nil {
				t.Fatal(err)
			}
		case 2:
			dos = append(dos, doIn(ex, bg, "g", func(context.Context) error { record(name); return nil }))
			// Queued before the next one comes.
			await(t, "the Do queued", func() bool { return groupStats(t, ex, "g").Waiting == i+1 })
		}
	}
	g.open()
	for _, d := range dos {
		if err := recv(t, d, "a queued Do ran once its turn came"); err != nil {
			t.Fatal(err)
		}
	}
	ex.Shutdown(bg)
	if got := fmt.Sprint(order); got != "[0 1 2 3 4 5 6 7 8]" {
		t.Errorf("start order %s, want FIFO", got)
	}
}

// TestDoRefusesUnderEveryPolicy: when fn does not run, Do returns an error
// whatever the rejection policy; under CallerRuns fn runs in the caller,
// outside the limits.
func TestDoRefusesUnderEveryPolicy(t *testing.T) {
	for _, rp := range []policy.RejectionPolicy{policy.Abort, policy.Discard, policy.DiscardOldest, policy.CallerRuns} {
		t.Run(rp.String(), func(t *testing.T) {
			ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1), policy.WithRejectionPolicy(rp)})
			g := newGate()
			submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("blocker")})
			g.waitStarted(t, 1)
			ran := false
			caller := goroutineID()
			want := errors.New("fn's")
			err := ex.Do(bg, "g", func(context.Context) error {
				ran = goroutineID() == caller
				return want
			})
			g.open()
			if rp == policy.CallerRuns {
				if !ran || err != want {
					t.Fatalf("CallerRuns: ran in caller %v, err %v; want fn's error", ran, err)
				}
				if s := groupStats(t, ex, "g"); s.CallerRuns != 1 || s.Failed != 1 {
					t.Errorf("stats %+v", s)
				}
				return
			}
			var re *executor.RejectedError
			if ran || !errors.Is(err, executor.ErrRejected) || !errors.As(err, &re) || re.Limit != executor.LimitGroupInFlight {
				t.Fatalf("Do on a full group: ran %v, err %v; want not run and a group in-flight refusal", ran, err)
			}
			if s := groupStats(t, ex, "g"); s.Rejected != 1 {
				t.Errorf("stats %+v", s)
			}
		})
	}
}

// TestDoRejectionHandler: the handler's error is Do's, unless it runs fn.
func TestDoRejectionHandler(t *testing.T) {
	handlerErr := errors.New("shed")
	var runIt atomic.Bool
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1)}, executor.WithRejectionHandler(func(r *executor.Rejection) error {
		if runIt.Load() {
			r.RunInCaller()
		}
		return handlerErr
	}))
	g := newGate()
	defer g.open()
	submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("blocker")})
	g.waitStarted(t, 1)
	ran := 0
	fn := func(context.Context) error { ran++; return nil }
	if err := ex.Do(bg, "g", fn); err != handlerErr || ran != 0 {
		t.Fatalf("handler without RunInCaller: err %v, ran %d", err, ran)
	}
	runIt.Store(true)
	if err := ex.Do(bg, "g", fn); err != nil || ran != 1 {
		t.Fatalf("handler with RunInCaller: err %v, ran %d; want fn's nil error", err, ran)
	}
}

// TestDoForcedRefusals: the refusals that leave no choice.
func TestDoForcedRefusals(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(2), policy.WithRejectionPolicy(policy.CallerRuns)})
	never := func(context.Context) error { t.Error("fn ran"); return nil }
	if err := ex.DoWeighted(bg, "g", 3, never); !errors.Is(err, executor.ErrTooHeavy) {
		t.Errorf("too heavy: %v", err)
	}
	if err := ex.Do(bg, "", never); !errors.Is(err, executor.ErrInvalidTask) || !errors.Is(err, executor.ErrRejected) {
		t.Errorf("empty group: %v", err)
	}
	if err := ex.Do(bg, "g", nil); !errors.Is(err, executor.ErrInvalidTask) {
		t.Errorf("nil fn: %v", err)
	}
	if err := ex.DoWeighted(bg, "g", -1, never); !errors.Is(err, executor.ErrInvalidTask) {
		t.Errorf("negative weight: %v", err)
	}
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if err := ex.Do(ctx, "g", never); !errors.Is(err, context.Canceled) {
		t.Errorf("done context: %v", err)
	}
	go ex.ShutdownGroup(bg, "closed")
	await(t, "ShutdownGroup marked the group shut down", func() bool {
		s, ok := ex.GroupStats("closed")
		return ok && s.Shutdown
	})
	if err := ex.Do(bg, "closed", never); !errors.Is(err, executor.ErrGroupShutdown) {
		t.Errorf("shut-down group: %v", err)
	}
	ex.Shutdown(bg)
	if err := ex.Do(bg, "g", never); !errors.Is(err, executor.ErrShutdown) {
		t.Errorf("shut-down executor: %v", err)
	}
}

// TestDoWeighted: a weighted Do takes its weight at every limit.
func TestDoWeighted(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithGlobalMaxInFlight(5), policy.WithDefaultMaxConcurrency(5)})
	err := ex.DoWeighted(bg, "g", 3, func(context.Context) error {
		if s := groupStats(t, ex, "g"); s.Running != 3 || s.RunningTasks != 1 {
			return fmt.Errorf("inside fn: %+v", s)
		}
		if s := ex.Stats(); s.Running != 3 {
			return fmt.Errorf("executor inside fn: %+v", s)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if s := groupStats(t, ex, "g"); s.Running != 0 || s.ServedPermits != 3 {
		t.Errorf("after: %+v", s)
	}
}

// TestDoCancelWhileWaitingFreesItsPlace: a Do whose context ends while it
// waits returns ctx's error at once, never runs, and gives its place in
// its group's in-flight limit back.
func TestDoCancelWhileWaitingFreesItsPlace(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(2), policy.WithDefaultMaxConcurrency(1)})
	g := newGate()
	defer g.open()
	submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("blocker")})
	g.waitStarted(t, 1)
	ctx, cancel := context.WithCancel(bg)
	done := doIn(ex, ctx, "g", func(context.Context) error { t.Error("cancelled Do ran"); return nil })
	await(t, "the Do queued", func() bool { return groupStats(t, ex, "g").Waiting == 1 })
	// The group is full: a third task is refused.
	if _, err := executor.Submit(ex, bg, executor.Task[int]{Group: "g", Fn: func(context.Context) (int, error) { return 0, nil }}); !errors.Is(err, executor.ErrRejected) {
		t.Fatalf("third task admitted into a full group: %v", err)
	}
	cancel()
	if err := recv(t, done, "the Do cancelled while waiting returned"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Do = %v, want context.Canceled", err)
	}
	if s := groupStats(t, ex, "g"); s.Waiting != 0 || s.InFlight != 1 || s.Cancelled != 1 {
		t.Fatalf("stats after the cancel %+v: the place is not free", s)
	}
	h := submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("after")})
	g.open()
	if r := wait(t, h); r.Status != executor.Success {
		t.Fatalf("task admitted in the freed place: %v", r.Status)
	}
}

// TestDoGrantedAfterCancelDoesNotRun is x/sync's TestWeightedAcquireCanceled
// for Do (golang/go#63615): a Do whose context ended before its turn came
// never runs fn, and the permit goes to the next in line.
func TestDoGrantedAfterCancelDoesNotRun(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)})
	for i := range 2000 {
		release := make(chan struct{})
		closeAtEnd(t, release)
		holding := make(chan struct{})
		go ex.Do(bg, "g", func(context.Context) error { close(holding); <-release; return nil })
		recv(t, holding, "the first Do ran")
		ctx, cancel := context.WithCancel(bg)
		var ran atomic.Bool
		done := doIn(ex, ctx, "g", func(context.Context) error { ran.Store(true); return nil })
		await(t, "the second Do queued", func() bool { return groupStats(t, ex, "g").Waiting == 1 })
		cancel()
		close(release) // the grant may land before Do sees its context end
		if err := recv(t, done, "the cancelled Do returned"); !errors.Is(err, context.Canceled) || ran.Load() {
			t.Fatalf("round %d: Do = %v, ran %v; want context.Canceled without running", i, err, ran.Load())
		}
		// The permit went on: the next Do runs.
		wantServes(t, ex, "g", fmt.Sprintf("in round %d, after a Do granted once its context ended", i))
	}
}

// endingCtx is a context whose Err answers context.Canceled once ended is
// set, and whose Done closes only when the test closes done: the moment in
// a cancellation between its two steps (context's cancelCtx sets its error,
// then closes Done), held open.
type endingCtx struct {
	context.Context
	ended atomic.Bool
	done  chan struct{}
}

func (c *endingCtx) Done() <-chan struct{} { return c.done }

func (c *endingCtx) Err() error {
	if c.ended.Load() {
		return context.Canceled
	}
	return nil
}

// TestDoStartedAfterItsContextEndedIsNotStarted: a Do granted its turn
// after its context ended does not run fn (TestDoGrantedAfterCancelDoesNotRun),
// and is counted Cancelled, not Started, as a Submit or Go task started
// after its context ended is: Started and ServedPermits count the work
// that ran.
func TestDoStartedAfterItsContextEndedIsNotStarted(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)})
	release, holding := make(chan struct{}), make(chan struct{})
	closeAtEnd(t, release)
	blocker := doIn(ex, bg, "g", func(context.Context) error { close(holding); <-release; return nil })
	recv(t, holding, "the blocker ran")
	ctx := &endingCtx{Context: bg, done: make(chan struct{})}
	defer close(ctx.done)
	var ran atomic.Bool
	done := doIn(ex, ctx, "g", func(context.Context) error { ran.Store(true); return nil })
	await(t, "the Do queued", func() bool { return groupStats(t, ex, "g").Waiting == 1 })
	ctx.ended.Store(true) // Done stays open: the grant wakes the Do first
	close(release)
	if err := recv(t, blocker, "the blocker returned"); err != nil {
		t.Fatalf("blocker: %v", err)
	}
	if err := recv(t, done, "the Do granted after its context ended returned"); !errors.Is(err, context.Canceled) || ran.Load() {
		t.Fatalf("Do = %v, ran %v; want context.Canceled without running", err, ran.Load())
	}
	s := groupStats(t, ex, "g")
	if s.Started != 1 || s.ServedPermits != 1 || s.Succeeded != 1 || s.Cancelled != 1 || s.InFlight != 0 {
		t.Fatalf("Started %d, ServedPermits %d, Succeeded %d, Cancelled %d, InFlight %d; want 1, 1, 1, 1, 0 (the blocker ran, the Do did not)",
			s.Started, s.ServedPermits, s.Succeeded, s.Cancelled, s.InFlight)
	}
}

// TestDoQueueTimeout: a Do that waits longer than the queue timeout returns
// ErrQueueTimeout and never runs.
func TestDoQueueTimeout(t *testing.T) {
	clk := fakeClock()
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1), policy.WithQueueTimeout(time.Second)}, executor.WithClock(clk))
	g := newGate()
	defer g.open()
	submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("blocker")})
	g.waitStarted(t, 1)
	done := doIn(ex, bg, "g", func(context.Context) error { t.Error("timed-out Do ran"); return nil })
	await(t, "the Do queued", func() bool { return groupStats(t, ex, "g").Waiting == 1 })
	clk.Advance(time.Second)
	err := recv(t, done, "the Do returned once its queue timeout passed")
	var re *executor.RejectedError
	if !errors.Is(err, executor.ErrQueueTimeout) || !errors.As(err, &re) || re.Limit != executor.LimitQueueTimeout {
		t.Fatalf("Do = %v, want a queue timeout", err)
	}
}

// TestDoPanicReleasesThenGoesOn: a panic in fn reaches Do's caller with
// its value and its stack, after fn's permits are back and the task is
// counted Failed.
func TestDoPanicReleasesThenGoesOn(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)})
	var stack string
	func() {
		defer func() {
			r := recover()
			if r != "oops" {
				t.Fatalf("recovered %v, want oops", r)
			}
			stack = string(debugStack())
			if s := groupStats(t, ex, "g"); s.Running != 0 || s.InFlight != 0 || s.Failed != 1 {
				t.Errorf("while the panic unwinds: %+v; want the permit back and the task Failed", s)
			}
		}()
		ex.Do(bg, "g", func(context.Context) error { return panicker() })
	}()
	if !bytes.Contains([]byte(stack), []byte("panicker")) {
		t.Errorf("the panic lost its origin: stack\n%s", stack)
	}
	if err := ex.Do(bg, "g", func(context.Context) error { return nil }); err != nil {
		t.Fatalf("Do after a panic = %v", err)
	}
}

//go:noinline
func panicker() error { panic("oops") }

// debugStack is runtime/debug.Stack, inlined here to keep the imports short.
func debugStack() []byte {
	buf := make([]byte, 1<<16)
	return buf[:runtime.Stack(buf, false)]
}

// TestDoGoexitReleases: runtime.Goexit in fn ends the caller's goroutine
// and releases fn's permits.
func TestDoGoexitReleases(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		ex.Do(bg, "g", func(context.Context) error { runtime.Goexit(); return nil })
		t.Error("Do returned after runtime.Goexit")
	}()
	<-exited
	if s := groupStats(t, ex, "g"); s.Running != 0 || s.Failed != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// TestDoContext: fn's context carries the caller's values, ends with the
// caller's context, and is cancelled by Close.
func TestDoContext(t *testing.T) {
	ex := newExec(t, nil)
	type key struct{}
	parent, cancel := context.WithCancelCause(context.WithValue(bg, key{}, "v"))
	cause := errors.New("client gone")
	err := ex.Do(parent, "g", func(ctx context.Context) error {
		if ctx.Value(key{}) != "v" {
			return errors.New("value lost")
		}
		if ctx.Err() != nil {
			return errors.New("done too early")
		}
		done := ctx.Done()
		cancel(cause)
		<-done
		if !errors.Is(ctx.Err(), context.Canceled) || context.Cause(ctx) != cause {
			return fmt.Errorf("after the parent's cancel: err %v, cause %v", ctx.Err(), context.Cause(ctx))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	running, giveUp := make(chan struct{}), make(chan struct{})
	closeAtEnd(t, giveUp) // fn returns, and Close, if Close does not cancel it
	done := doIn(ex, bg, "h", func(ctx context.Context) error {
		close(running)
		select {
		case <-ctx.Done():
		case <-giveUp:
		}
		return ctx.Err()
	})
	recv(t, running, "the Do's fn started")
	closed := make(chan struct{})
	go func() { ex.Close(); close(closed) }()
	if err := recv(t, done, "Close cancelled a running Do's context"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Do under Close = %v, want its context cancelled", err)
	}
	recv(t, closed, "Close returned once the Do had")
}

// TestDoBackgroundContextOutlivesItsTask: a Do call with
// context.Background reuses its task once it returns, so fn's context is
// its group's, not the task: kept after the call, it still answers for
// its own group while the task runs calls of another.
func TestDoBackgroundContextOutlivesItsTask(t *testing.T) {
	ex := newExec(t, nil)
	kept := map[string]context.Context{}
	for _, g := range []string{"a", "b", "a", "b"} {
		if err := ex.Do(bg, g, func(ctx context.Context) error { kept[g] = ctx; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	// A's stop: a shutdown whose context ends while a's task runs.
	running := make(chan struct{})
	blocked := doIn(ex, bg, "a", func(ctx context.Context) error {
		close(running)
		<-ctx.Done()
		return nil
	})
	recv(t, running, "a's Do ran")
	ended, cancel := context.WithCancel(bg)
	cancel()
	if err := ex.ShutdownGroup(ended, "a"); !errors.Is(err, context.Canceled) {
		t.Fatalf("ShutdownGroup = %v, want its context's error", err)
	}
	if err := recv(t, blocked, "a's Do returned once ShutdownGroup cancelled it"); err != nil {
		t.Fatal(err)
	}
	if err := kept["a"].Err(); !errors.Is(err, context.Canceled) {
		t.Errorf("a's context after a's shutdown: %v, want cancelled", err)
	}
	if err := kept["b"].Err(); err != nil {
		t.Errorf("b's context after a's shutdown: %v, want nil", err)
	}
	select {
	case <-kept["a"].Done():
	default:
		t.Error("a's context: Done not closed")
	}
}

// TestDoShutdownWaits: Shutdown returns only once a running Do's fn has.
// fn is released only once Shutdown waits (it asks its context's Done), or
// has returned: a Shutdown that does not wait for fn returns before fn
// does, whatever the machine's speed.
func TestDoShutdownWaits(t *testing.T) {
	ex := newExec(t, nil)
	running, release := make(chan struct{}), make(chan struct{})
	closeAtEnd(t, release)
	var returned atomic.Bool
	done := doIn(ex, bg, "g", func(context.Context) error {
		close(running)
		<-release
		returned.Store(true)
		return nil
	})
	recv(t, running, "the Do's fn started")
	type shutdown struct {
		err        error
		fnReturned bool // when Shutdown returned
	}
	shut := make(chan shutdown, 1)
	ctx := newWaitingCtx()
	go func() {
		err := ex.Shutdown(ctx)
		shut <- shutdown{err, returned.Load()}
	}()
	select {
	case r := <-shut:
		t.Fatalf("Shutdown returned %v while Do's fn ran, without waiting", r.err)
	case <-ctx.asked:
	}
	close(release)
	if r := recv(t, shut, "Shutdown returned once fn had"); r.err != nil || !r.fnReturned {
		t.Fatalf("Shutdown = %v, fn had returned: %v", r.err, r.fnReturned)
	}
	if err := recv(t, done, "the Do returned"); err != nil {
		t.Fatal(err)
	}
}

// TestDoHotGroupNeverDelaysACold: with a hot group's Do callers filling its
// concurrency limit and queue, a cold group's Do starts at once: decided
// inside Do, so the check needs no clock.
func TestDoHotGroupNeverDelaysACold(t *testing.T) {
	ex := newExec(t, []policy.Option{
		policy.WithGlobalMaxInFlight(4),
		policy.WithDefaultMaxConcurrency(2),
		policy.WithDefaultMaxInFlight(policy.Unlimited),
	})
	g := newGate()
	defer g.open() // a failed test's hot calls return, for Close
	var hot []<-chan error
	for range 200 {
		hot = append(hot, doIn(ex, bg, "hot", func(context.Context) error { <-g.release; return nil }))
	}
	await(t, "the hot group's calls filled its limit and queue", func() bool {
		s, ok := ex.GroupStats("hot")
		return ok && s.RunningTasks == 2 && s.Waiting == 198
	})
	for i := range 100 {
		// Called in a goroutine of its own: a cold call delayed behind
		// the hot group would wait for ever, the hot calls holding on.
		err := recv(t, doIn(ex, bg, "cold", func(context.Context) error {
			if s, _ := ex.GroupStats("hot"); s.RunningTasks != 2 {
				return fmt.Errorf("hot group moved: %+v", s)
			}
			return nil
		}), fmt.Sprintf("cold Do %d ran beside the full hot group", i))
		if err != nil {
			t.Fatalf("cold Do %d: %v", i, err)
		}
	}
	g.open()
	for i, d := range hot {
		if err := recv(t, d, fmt.Sprintf("hot Do %d returned once released", i)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDoRefusalAllocations: Do and Go refuse a full group without
// allocating once the group has refused the same way before, whichever
// limit refuses (the group's in-flight limit, before its queue is looked
// at, or its queue threshold), and an admitted Do allocates only fn's
// context, and nothing with context.Background (its task is reused).
func TestDoRefusalAllocations(t *testing.T) {
	fn := func(context.Context) error { return nil }
	var ex *executor.Executor
	for limit, opt := range map[string]policy.Option{
		"in-flight":       policy.WithDefaultMaxInFlight(1),
		"queue threshold": policy.WithDefaultQueueThreshold(0),
	} {
		ex = newExec(t, []policy.Option{opt, policy.WithDefaultMaxConcurrency(1)})
		g := newGate()
		defer g.open()
		submit(t, ex, executor.Task[string]{Group: "full", Fn: g.fn("blocker")})
		g.waitStarted(t, 1)
		for name, call := range map[string]func() error{
			"Do": func() error { return ex.Do(bg, "full", fn) },
			"Go": func() error { return ex.Go(bg, "full", fn) },
		} {
			call()
			if n := testing.AllocsPerRun(100, func() {
				if err := call(); !errors.Is(err, executor.ErrRejected) {
					t.Fatalf("%s: %v", name, err)
				}
			}); n > 0 {
				t.Errorf("%s refused at the %s with %v allocations, want 0", name, limit, n)
			}
		}
	}
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	ex.Do(ctx, "free", fn)
	if n := testing.AllocsPerRun(100, func() { ex.Do(ctx, "free", fn) }); n != 1 && !raceEnabled {
		t.Errorf("an admitted Do allocated %v times, want 1", n)
	}
	// That one allocation is fn's context, not the task: a task is 128 B.
	if b := allocatedBytes(1000, func() { ex.Do(ctx, "free", fn) }); b > 48 && !raceEnabled {
		t.Errorf("an admitted Do allocated %v B, want its context only (32 B)", b)
	}
	// The race detector's sync.Pool drops some of what it is given.
	if n := testing.AllocsPerRun(100, func() { ex.Do(bg, "free", fn) }); n > 0 && !raceEnabled {
		t.Errorf("an admitted Do with context.Background allocated %v times, want 0", n)
	}
}

// allocatedBytes returns the bytes f allocates a run, on average over runs.
func allocatedBytes(runs int, f func()) float64 {
	var before, after runtime.MemStats
	f()
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range runs {
		f()
	}
	runtime.ReadMemStats(&after)
	return float64(after.TotalAlloc-before.TotalAlloc) / float64(runs)
}
