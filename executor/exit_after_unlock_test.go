package executor_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// A section that removes a waiting task (a Cancel, a Do call's context
// ending, a group's cancel, a displacing Do) unlocks its group, and that
// unlock may dispatch global room: a dispatch that finds another group's
// head past its queue timeout completes it there, telling the listener,
// whose call may exit the goroutine (runtime.Goexit). The removed task
// must complete all the same, and a displacing Do call must not leave its
// own task queued with no caller to run it.

// exitTimeoutScene is an executor whose queue timeouts are found by a
// dispatch alone (its clock arms no timer: AfterFunc panics), with:
// group "a" running a task of the gate (one of three global permits),
// group "c" running a task until its context ends (another), group "b"
// holding the dispatcher's turn for its head of weight 2, which does not
// fit the permit left and is past its queue timeout, and what c adds:
// group "c" waiting for global room behind it. The listener exits the goroutine
// that tells it of a queue timeout while exit is set.
type exitTimeoutScene struct {
	ex   *executor.Executor
	gate *gate
	exit atomic.Bool
	// completed counts the listener's OnCompleted calls for groups a and c
	completed atomic.Int64
	b         *executor.Handle[int]
	c         *executor.Handle[int] // group c's running task
}

// newExitTimeoutScene makes the scene; c queues group "c"'s task. The
// executor is closed when the test ends only if the test passed: a
// failure may leave a drain that never ends.
func newExitTimeoutScene(t *testing.T, c func(ex *executor.Executor)) *exitTimeoutScene {
	t.Helper()
	s := &exitTimeoutScene{}
	clk := &panickyClock{Fake: fakeClock()}
	clk.arm.Store(true)
	p, err := policy.New(policy.WithGlobalMaxInFlight(3), policy.WithDefaultMaxConcurrency(4), policy.WithQueueTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	s.ex, err = executor.New(p, executor.WithClock(clk), executor.WithListener(executor.ListenerFuncs{
		Completed: func(e executor.Event) {
			if e.Group == "a" || e.Group == "c" {
				s.completed.Add(1)
			}
		},
		Rejected: func(e executor.Event) {
			if s.exit.Load() && errors.Is(e.Err, executor.ErrQueueTimeout) {
				runtime.Goexit()
			}
		},
	}))
	if err != nil {
		t.Fatal(err)
	}
	s.gate = exitGate(t, s.ex)
	submit(t, s.ex, executor.Task[string]{Group: "a", Fn: s.gate.fn("a")})
	s.gate.waitStarted(t, 1)
	ran := make(chan struct{})
	s.c = submit(t, s.ex, executor.Task[int]{Group: "c", Fn: func(ctx context.Context) (int, error) {
		close(ran)
		select {
		case <-ctx.Done():
		case <-s.gate.release:
		}
		return 0, ctx.Err()
	}})
	recv(t, ran, "c's task started")
	s.b = submit(t, s.ex, executor.Task[int]{Group: "b", Weight: 2, Fn: func(context.Context) (int, error) { return 0, nil }})
	c(s.ex)
	clk.Advance(2 * time.Second) // b's head is past its timeout; no timer fires
	return s
}

// exitGate returns a gate for ex's tasks that the end of the test opens;
// ex is closed then only if the test passed: a failure may leave a drain
// that never ends.
func exitGate(t *testing.T, ex *executor.Executor) *gate {
	g := newGate()
	t.Cleanup(func() {
		g.open()
		if !t.Failed() {
			ex.Close()
		}
	})
	return g
}

// exiting runs f on a goroutine of its own with the listener's exit set,
// and waits for that goroutine to end: what says what f waits for.
func (s *exitTimeoutScene) exiting(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	s.exit.Store(true)
	go func() {
		defer close(done)
		f()
	}()
	recv(t, done, what)
	s.exit.Store(false)
}

// finish checks that b timed out, lets a's task finish, and waits for
// every group to drain, then checks the books.
func (s *exitTimeoutScene) finish(t *testing.T) {
	t.Helper()
	if r := wait(t, s.b); !errors.Is(r.Err, executor.ErrQueueTimeout) {
		t.Fatalf("b's head = %+v, want a queue timeout", r)
	}
	s.gate.open()
	wantDrained(t, s.ex, "a", "b", "c")
	wantInvariants(t, s.ex)
	st := s.ex.Stats()
	if st.Running != 0 || st.Waiting != 0 || st.Succeeded+st.Failed+st.Cancelled+st.Rejected != st.Submitted {
		t.Errorf("stats at quiescence: %+v", st)
	}
}

// wantDrained fails t unless each group drains: a hang guard, not a
// timing assertion.
func wantDrained(t *testing.T, ex *executor.Executor, groups ...string) {
	t.Helper()
	for _, g := range groups {
		select {
		case <-ex.Drained(g):
		case <-time.After(10 * time.Second):
			t.Fatalf("group %s never drains: stats %+v", g, groupStatsOr(ex, g))
		}
	}
}

func groupStatsOr(ex *executor.Executor, g string) executor.GroupStats {
	s, _ := ex.GroupStats(g)
	return s
}

func TestCancelCompletesWhenListenerExitsInItsDispatch(t *testing.T) {
	var c *executor.Handle[int]
	s := newExitTimeoutScene(t, func(ex *executor.Executor) {
		c = submit(t, ex, executor.Task[int]{Group: "c", Fn: func(context.Context) (int, error) { return 0, nil }})
	})
	s.exiting(t, "Cancel returned", func() { c.Cancel() })
	if r := wait(t, c); r.Status != executor.Cancelled {
		t.Fatalf("cancelled task = %+v, want Cancelled", r)
	}
	s.finish(t)
}

// waitAskedCtx is a context whose Done, asked once its Do call waits in
// group "c", says so by closing asked.
type waitAskedCtx struct {
	context.Context
	ex    *executor.Executor
	once  sync.Once
	asked chan struct{}
}

func (c *waitAskedCtx) Done() <-chan struct{} {
	if c.ex != nil && groupStatsOr(c.ex, "c").Waiting == 1 {
		c.once.Do(func() { close(c.asked) })
	}
	return c.Context.Done()
}

func TestDoCancelCompletesWhenListenerExitsInItsDispatch(t *testing.T) {
	inner, cancel := context.WithCancel(bg)
	defer cancel()
	ctx := &waitAskedCtx{Context: inner, asked: make(chan struct{})}
	called := make(chan struct{})
	s := newExitTimeoutScene(t, func(ex *executor.Executor) {
		ctx.ex = ex
		go func() {
			defer close(called)
			ex.Do(ctx, "c", func(context.Context) error { return nil })
		}()
		recv(t, ctx.asked, "the Do call waited") // its admission's unlock done
	})
	// The Do call leaves its queue on its own goroutine.
	s.exiting(t, "the cancelled Do call returned", func() {
		cancel()
		<-called
	})
	s.finish(t)
	if st := groupStatsOr(s.ex, "c"); st.Cancelled != 1 {
		t.Errorf("group c: %+v, want its Do call Cancelled", st)
	}
}

func TestGroupCancelCompletesWhenListenerExitsInItsDispatch(t *testing.T) {
	var c *executor.Handle[int]
	s := newExitTimeoutScene(t, func(ex *executor.Executor) {
		c = submit(t, ex, executor.Task[int]{Group: "c", Fn: func(context.Context) (int, error) { return 0, nil }})
	})
	ended, stop := context.WithCancel(bg)
	stop()
	s.exiting(t, "ShutdownGroup returned", func() { s.ex.ShutdownGroup(ended, "c") })
	if r := wait(t, c); r.Status != executor.Cancelled || !errors.Is(r.Err, executor.ErrGroupShutdown) {
		t.Fatalf("waiting task of the group shut down = %+v, want Cancelled", r)
	}
	// The group's running task has its context cancelled, the gate shut.
	if r := wait(t, s.c); r.Status != executor.Cancelled || !errors.Is(r.Err, context.Canceled) {
		t.Fatalf("running task of the group shut down = %+v, want Cancelled", r)
	}
	s.finish(t)
}

// TestDisplacingDoLeavesNoTaskWhenListenerExits: a Do call that displaces
// a waiting task under DiscardOldest completes it, telling the listener,
// after queueing its own. A listener call that exits the goroutine ends
// the call there: its task must leave the queue (Failed, as when its
// context exits the goroutine as it waits), not start later with no
// caller to run it, holding its permits for ever.
func TestDisplacingDoLeavesNoTaskWhenListenerExits(t *testing.T) {
	var exit atomic.Bool
	p, err := policy.New(policy.WithDefaultMaxConcurrency(1), policy.WithDefaultQueueThreshold(1),
		policy.WithRejectionPolicy(policy.DiscardOldest))
	if err != nil {
		t.Fatal(err)
	}
	ex, err := executor.New(p, executor.WithListener(executor.ListenerFuncs{
		Rejected: func(e executor.Event) {
			if exit.Load() && errors.Is(e.Err, executor.ErrDisplaced) {
				runtime.Goexit()
			}
		},
	}))
	if err != nil {
		t.Fatal(err)
	}
	g := exitGate(t, ex)
	submit(t, ex, executor.Task[string]{Group: "a", Fn: g.fn("a")})
	g.waitStarted(t, 1)
	old := submit(t, ex, executor.Task[int]{Group: "a", Fn: func(context.Context) (int, error) { return 0, nil }})
	var ran atomic.Bool
	done := make(chan struct{})
	exit.Store(true)
	go func() {
		defer close(done)
		ex.Do(bg, "a", func(context.Context) error { ran.Store(true); return nil })
	}()
	recv(t, done, "the displacing Do call returned")
	exit.Store(false)
	if r := wait(t, old); !errors.Is(r.Err, executor.ErrDisplaced) {
		t.Fatalf("displaced task = %+v", r)
	}
	g.open()
	wantDrained(t, ex, "a")
	if ran.Load() {
		t.Error("the Do call's fn ran after its caller exited")
	}
	wantInvariants(t, ex)
	st := groupStats(t, ex, "a")
	if st.Running != 0 || st.InFlight != 0 || st.Succeeded != 1 || st.Rejected != 1 || st.Failed != 1 || st.Submitted != 3 {
		t.Errorf("stats at quiescence: %+v", st)
	}
}

// laterExitCtx is a cancellable context that never ends, whose own
// AfterFunc method exits the goroutine once proceed is closed: a Submit
// whose task waits arms a watcher on it.
type laterExitCtx struct {
	context.Context // Background: no deadline, no values, no error
	done            chan struct{}
	proceed, armed  chan struct{}
}

func (c *laterExitCtx) Done() <-chan struct{} { return c.done }

func (c *laterExitCtx) AfterFunc(func()) func() bool {
	close(c.armed)
	<-c.proceed
	runtime.Goexit()
	return nil
}

// TestSubmitWatchExitCompletesWhenListenerExitsInItsDispatch: a waiting
// task whose Submit context exits the goroutine as its watcher is armed
// leaves its queue (unwatchable), completing Failed.
func TestSubmitWatchExitCompletesWhenListenerExitsInItsDispatch(t *testing.T) {
	ctx := &laterExitCtx{Context: bg, done: make(chan struct{}), proceed: make(chan struct{}), armed: make(chan struct{})}
	called := make(chan struct{})
	s := newExitTimeoutScene(t, func(ex *executor.Executor) {
		go func() {
			defer close(called)
			executor.Submit(ex, ctx, executor.Task[int]{Group: "c", Fn: func(context.Context) (int, error) { return 0, nil }})
		}()
		recv(t, ctx.armed, "the task waited, its watcher armed") // its admission's unlock done
	})
	s.exiting(t, "the Submit whose context exits returned", func() {
		close(ctx.proceed)
		<-called
	})
	s.finish(t)
	if st := groupStatsOr(s.ex, "c"); st.Failed != 1 {
		t.Errorf("group c: %+v, want its waiting task Failed", st)
	}
}

// queuedExitCtx is a context that never ends, whose Done, asked once
// its Do call waits in group "c", exits the goroutine when proceed is
// closed.
type queuedExitCtx struct {
	context.Context // Background: no deadline, no values, no error
	ex              atomic.Pointer[executor.Executor]
	done            chan struct{}
	proceed, asked  chan struct{}
}

func (c *queuedExitCtx) Done() <-chan struct{} {
	if ex := c.ex.Load(); ex != nil && groupStatsOr(ex, "c").Waiting == 1 {
		close(c.asked)
		<-c.proceed
		runtime.Goexit()
	}
	return c.done
}

// TestDoContextExitCompletesWhenListenerExitsInItsDispatch: a Do call
// whose context exits the goroutine as the call waits leaves its queue
// (abandonDo), completing Failed.
func TestDoContextExitCompletesWhenListenerExitsInItsDispatch(t *testing.T) {
	ctx := &queuedExitCtx{Context: bg, done: make(chan struct{}), proceed: make(chan struct{}), asked: make(chan struct{})}
	called := make(chan struct{})
	s := newExitTimeoutScene(t, func(ex *executor.Executor) {
		ctx.ex.Store(ex)
		go func() {
			defer close(called)
			ex.Do(ctx, "c", func(context.Context) error { return nil })
		}()
		recv(t, ctx.asked, "the Do call waited")
	})
	s.exiting(t, "the Do call whose context exits returned", func() {
		close(ctx.proceed)
		<-called
	})
	s.finish(t)
	if st := groupStatsOr(s.ex, "c"); st.Failed != 1 {
		t.Errorf("group c: %+v, want its Do call Failed", st)
	}
}

// TestFinishCompletesWhenListenerExitsInItsDispatch: a worker's finish
// gives its permits back through the dispatcher, which completes another
// group's head found past its queue timeout, telling the listener. A
// listener call that exits the worker there must leave the finished task
// completed, told to the listener, and the task it started for the worker
// run on another.
func TestFinishCompletesWhenListenerExitsInItsDispatch(t *testing.T) {
	s := newExitTimeoutScene(t, func(*executor.Executor) {})
	s.exit.Store(true)
	s.gate.open() // a's and c's tasks finish on their workers, which dispatch
	wantDrained(t, s.ex, "a", "c")
	s.exit.Store(false)
	if r := wait(t, s.b); !errors.Is(r.Err, executor.ErrQueueTimeout) {
		t.Fatalf("b's head = %+v, want a queue timeout", r)
	}
	if r := wait(t, s.c); r.Status != executor.Success {
		t.Fatalf("c's task = %+v, want a success", r)
	}
	if n := s.completed.Load(); n != 2 {
		t.Errorf("the listener was told of %d completions in groups a and c, want 2", n)
	}
	wantInvariants(t, s.ex)
}

// TestFinishRunsNextWhenListenerExitsInItsSettle: a worker whose finish
// starts its group's head for itself to run next completes the finished
// task after telling the listener, and the group's last unsettled task
// unlocks it again (settled). That unlock resyncs a group that a
// dispatch left out of date meanwhile (its head past its queue timeout
// removed, its next head too heavy for the room left), and its dispatch
// completes that head, past its timeout too, telling the listener. A
// listener call that exits the worker there must leave the started task
// run, on a worker of its own, not counted running for ever.
func TestFinishRunsNextWhenListenerExitsInItsSettle(t *testing.T) {
	var exit atomic.Bool
	told, proceed := make(chan struct{}), make(chan struct{})
	clk := &panickyClock{Fake: fakeClock()}
	clk.arm.Store(true) // no timer: a dispatch alone finds a queue timeout
	p, err := policy.New(policy.WithGlobalMaxInFlight(2), policy.WithDefaultMaxConcurrency(1),
		policy.WithQueueTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ex, err := executor.New(p, executor.WithClock(clk), executor.WithListener(executor.ListenerFuncs{
		Completed: func(e executor.Event) {
			if e.ID == "first" {
				close(told)
				<-proceed
			}
		},
		Rejected: func(e executor.Event) {
			if exit.Load() && errors.Is(e.Err, executor.ErrQueueTimeout) {
				runtime.Goexit()
			}
		},
	}))
	if err != nil {
		t.Fatal(err)
	}
	g := exitGate(t, ex)
	// first runs; next waits for the group's concurrency limit, not for
	// global room: first's finish starts it for its worker.
	submit(t, ex, executor.Task[string]{Group: "x", ID: "first", Fn: g.fn("first")})
	g.waitStarted(t, 1)
	next := submit(t, ex, executor.Task[int]{Group: "x", ID: "next", Fn: func(context.Context) (int, error) { return 1, nil }})
	g.open()
	recv(t, told, "first's completion was told") // next runs for first's worker once the listener returns
	// Room for heavy heads: the group's limit raised, next (1 permit) runs,
	// one permit is left. h1, too heavy for it, takes the dispatcher's turn.
	l := policy.GroupLimits{MaxInFlight: policy.Unlimited, MaxConcurrency: 3, QueueThreshold: policy.Unlimited, Share: 1}
	if err := ex.SetGroupLimits("x", l); err != nil {
		t.Fatal(err)
	}
	h1 := submit(t, ex, executor.Task[int]{Group: "x", ID: "h1", Weight: 2, Fn: func(context.Context) (int, error) { return 0, nil }})
	clk.Advance(600 * time.Millisecond)
	h2 := submit(t, ex, executor.Task[int]{Group: "x", ID: "h2", Weight: 2, Fn: func(context.Context) (int, error) { return 0, nil }})
	clk.Advance(600 * time.Millisecond)
	// A dispatch (the limits set again) removes h1, past its timeout, and
	// stops at h2, which keeps the turn: the group is left to resync.
	if err := ex.SetGroupLimits("x", l); err != nil {
		t.Fatal(err)
	}
	if r := wait(t, h1); !errors.Is(r.Err, executor.ErrQueueTimeout) {
		t.Fatalf("h1 = %+v, want a queue timeout", r)
	}
	clk.Advance(time.Second) // h2 is past its timeout too; no timer fires
	exit.Store(true)
	close(proceed)
	if r := wait(t, h2); !errors.Is(r.Err, executor.ErrQueueTimeout) {
		t.Fatalf("h2 = %+v, want a queue timeout", r)
	}
	if r := wait(t, next); r.Status != executor.Success {
		t.Fatalf("next = %+v, want a success", r)
	}
	exit.Store(false)
	wantDrained(t, ex, "x")
	wantInvariants(t, ex)
	if st := groupStats(t, ex, "x"); st.Running != 0 || st.Succeeded != 2 || st.Rejected != 2 || st.Submitted != 4 {
		t.Errorf("stats at quiescence: %+v", st)
	}
}
