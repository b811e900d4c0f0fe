package executor_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// A half-open breaker's probe that waits in its group's queue holds a probe
// slot; one that leaves the queue without running (its Do call's context
// cancelled, displaced under DiscardOldest, past its queue timeout) gives
// the slot back, so that the breaker is never left refusing every task
// with ErrTooManyRequests for probes that will never report. The group's
// stats show the breaker half-open all the while, and closed once enough
// probes succeed.
func TestBreakerProbeSlotComesBackFromEveryQueueExit(t *testing.T) {
	clk := fakeClock()
	ex := newExec(t, []policy.Option{policy.WithGlobalMaxInFlight(1), policy.WithDefaultQueueThreshold(1),
		policy.WithRejectionPolicy(policy.DiscardOldest), policy.WithQueueTimeout(time.Hour)},
		executor.WithClock(clk), executor.WithGroupBreaker(breaker.Settings{
			MaxRequests: 2, Timeout: time.Minute,
			ReadyToTrip: func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 1 },
		}))
	if r := wait(t, submit(t, ex, executor.Task[int]{Group: "a", Fn: failing})); r.Status != executor.Failed {
		t.Fatalf("the tripping task: %v %v", r.Status, r.Err)
	}
	// Group x holds the one global permit: a's probes wait in a's queue.
	hold := newGate()
	defer hold.open()
	hx := submit(t, ex, executor.Task[string]{Group: "x", Fn: hold.fn("x")})
	hold.waitStarted(t, 1)
	clk.Advance(time.Minute)
	wantBreaker := func(what string, want breaker.State) {
		t.Helper()
		if s := groupStats(t, ex, "a"); s.Breaker != want {
			t.Fatalf("%s: breaker %v, want %v", what, s.Breaker, want)
		}
	}
	admit := func(what string, fn func(context.Context) (int, error)) *executor.Handle[int] {
		t.Helper()
		h, err := executor.Submit(ex, bg, executor.Task[int]{Group: "a", Fn: fn})
		if err != nil {
			t.Fatalf("%s: %v, want the probe admitted (a slot lost?)", what, err)
		}
		return h
	}

	// A Do probe whose context is cancelled as it waits.
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	doErr := make(chan error, 1)
	go func() { doErr <- ex.Do(ctx, "a", func(context.Context) error { return nil }) }()
	await(t, "the Do probe waiting", func() bool { return groupStats(t, ex, "a").Waiting == 1 })
	wantBreaker("a probe waiting", breaker.StateHalfOpen)
	cancel()
	if err := recv(t, doErr, "the cancelled Do probe"); !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled Do probe: %v", err)
	}

	// Two probes in a row, the second displacing the first under
	// DiscardOldest, take both slots for a moment: admitted only if every
	// probe gone before gave its slot back.
	pair := func(what string, first func() error) *executor.Handle[int] {
		t.Helper()
		if err := first(); err != nil {
			t.Fatalf("%s, the first probe: %v, want it admitted (a slot lost?)", what, err)
		}
		return admit(what+", the second probe", unrun(t, what))
	}
	wantWaiting := func(what string) {
		t.Helper()
		if s := groupStats(t, ex, "a"); s.Waiting != 1 {
			t.Fatalf("%s: %+v, want 1 probe waiting", what, s)
		}
	}

	// Go probe displaced by a Submit probe, which then passes its queue
	// timeout.
	h := pair("after the cancelled Do", func() error {
		return ex.Go(bg, "a", func(context.Context) error { t.Error("a displaced Go probe ran"); return nil })
	})
	wantWaiting("a Go probe displaced")
	clk.Advance(time.Hour)
	if r := wait(t, h); r.Status != executor.Rejected || !errors.Is(r.Err, executor.ErrQueueTimeout) {
		t.Fatalf("the probe past its queue timeout: %v %v", r.Status, r.Err)
	}
	wantBreaker("every probe gone unrun", breaker.StateHalfOpen)

	// A Submit probe displaced by another, which passes its queue timeout.
	var first *executor.Handle[int]
	h = pair("after the displaced Go and the expired Submit", func() (err error) {
		first, err = executor.Submit(ex, bg, executor.Task[int]{Group: "a", Fn: unrun(t, "a displaced Submit probe")})
		return err
	})
	if r := wait(t, first); r.Status != executor.Rejected {
		t.Fatalf("the displaced Submit probe: %v %v", r.Status, r.Err)
	}
	clk.Advance(time.Hour)
	wait(t, h)

	// The last pair checks the displaced Submit's slot; its survivor runs
	// once x lets go of the global permit, then one more probe: two
	// successes close the breaker.
	var ok *executor.Handle[int]
	admitOK := func() (err error) {
		ok, err = executor.Submit(ex, bg, executor.Task[int]{Group: "a", Fn: succeeding})
		return err
	}
	if err := admitOK(); err != nil {
		t.Fatalf("after the displaced Submit: %v, want the probe admitted (a slot lost?)", err)
	}
	second := ok
	if err := admitOK(); err != nil {
		t.Fatalf("after the displaced Submit, the second probe: %v, want it admitted (a slot lost?)", err)
	}
	if r := wait(t, second); r.Status != executor.Rejected {
		t.Fatalf("the displaced probe: %v %v", r.Status, r.Err)
	}
	hold.open()
	if r := wait(t, hx); r.Status != executor.Success {
		t.Fatalf("x: %v %v", r.Status, r.Err)
	}
	if r := wait(t, ok); r.Status != executor.Success {
		t.Fatalf("the probe that ran: %v %v", r.Status, r.Err)
	}
	wantBreaker("one probe succeeded of two", breaker.StateHalfOpen)
	if r := wait(t, admit("the closing probe", succeeding)); r.Status != executor.Success {
		t.Fatalf("the closing probe: %v %v", r.Status, r.Err)
	}
	wantBreaker("two probes succeeded", breaker.StateClosed)
	s := groupStats(t, ex, "a")
	if s.Submitted != s.Succeeded+s.Failed+s.Cancelled+s.Rejected || s.Succeeded != 2 || s.InFlight != 0 {
		t.Fatalf("group a at the end: %+v", s)
	}
}

// unrun is the body of a task that must not run.
func unrun(t *testing.T, what string) func(context.Context) (int, error) {
	return func(context.Context) (int, error) { t.Errorf("%s ran", what); return 0, nil }
}

// A half-open breaker's probe whose context ended while it waited, unseen
// until it started (its watcher had not fired), does not run: a Do call
// returns the context's error, a Submit task completes Cancelled, and
// each gives its probe slot back, recording nothing.
func TestBreakerProbeEndedAtItsStartGivesItsSlotBack(t *testing.T) {
	clk := fakeClock()
	ex := newExec(t, []policy.Option{policy.WithGlobalMaxInFlight(1), policy.WithDefaultQueueThreshold(1),
		policy.WithRejectionPolicy(policy.DiscardOldest)},
		executor.WithClock(clk), executor.WithGroupBreaker(breaker.Settings{
			MaxRequests: 2, Timeout: time.Minute,
			ReadyToTrip: func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 1 },
		}))
	if r := wait(t, submit(t, ex, executor.Task[int]{Group: "a", Fn: failing})); r.Status != executor.Failed {
		t.Fatalf("the tripping task: %v %v", r.Status, r.Err)
	}
	clk.Advance(time.Minute)
	// holdGlobal runs a task of group x that holds the one global permit
	// until the returned function lets it go and waits for its end.
	holdGlobal := func() (letGo func()) {
		t.Helper()
		g := newGate()
		t.Cleanup(g.open)
		h := submit(t, ex, executor.Task[string]{Group: "x", Fn: g.fn("x")})
		g.waitStarted(t, 1)
		return func() {
			g.open()
			if r := wait(t, h); r.Status != executor.Success {
				t.Fatalf("x: %v %v", r.Status, r.Err)
			}
		}
	}

	letGo := holdGlobal()
	doCtx := &unseenEndCtx{Context: bg, done: make(chan struct{})}
	doErr := make(chan error, 1)
	go func() {
		doErr <- ex.Do(doCtx, "a", func(context.Context) error { t.Error("the Do probe ran"); return nil })
	}()
	await(t, "the Do probe waiting", func() bool { return groupStats(t, ex, "a").Waiting == 1 })
	doCtx.ended.Store(true)
	letGo()
	if err := recv(t, doErr, "the Do probe ended at its start"); !errors.Is(err, errCtxEnded) {
		t.Fatalf("the Do probe ended at its start: %v, want its context's error", err)
	}

	// A Submit probe starts before its watcher is armed (the hook runs
	// between its queueing and the arming), with its context ended: its
	// worker, asking the context, does not run it.
	letGo = holdGlobal()
	subCtx := &unseenEndCtx{Context: bg, done: make(chan struct{})}
	var once sync.Once
	executor.SetHookQueued(func() {
		once.Do(func() {
			subCtx.ended.Store(true)
			letGo()
			await(t, "the Submit probe started", func() bool { return groupStats(t, ex, "a").Waiting == 0 })
		})
	})
	defer executor.SetHookQueued(nil)
	h, err := executor.Submit(ex, subCtx, executor.Task[int]{Group: "a", Fn: unrun(t, "the Submit probe")})
	executor.SetHookQueued(nil)
	if err != nil {
		t.Fatalf("the Submit probe: %v, want it admitted (a slot lost?)", err)
	}
	if r := wait(t, h); r.Status != executor.Cancelled {
		t.Fatalf("the Submit probe ended at its start: %v %v, want Cancelled", r.Status, r.Err)
	}
	if s := groupStats(t, ex, "a"); s.Breaker != breaker.StateHalfOpen || s.Succeeded != 0 || s.Failed != 1 {
		t.Fatalf("after two probes that never ran: %+v, want the breaker half-open, nothing recorded", s)
	}

	// Both slots free: two probes in a row, the second displacing the
	// first, are admitted; the second runs, and one more closes the
	// breaker.
	letGo = holdGlobal()
	first, err := executor.Submit(ex, bg, executor.Task[int]{Group: "a", Fn: unrun(t, "the displaced probe")})
	if err != nil {
		t.Fatalf("the first of two probes: %v, want it admitted (a slot lost?)", err)
	}
	second, err := executor.Submit(ex, bg, executor.Task[int]{Group: "a", Fn: succeeding})
	if err != nil {
		t.Fatalf("the second of two probes: %v, want it admitted (a slot lost?)", err)
	}
	if r := wait(t, first); r.Status != executor.Rejected {
		t.Fatalf("the displaced probe: %v %v", r.Status, r.Err)
	}
	letGo()
	if r := wait(t, second); r.Status != executor.Success {
		t.Fatalf("the probe that ran: %v %v", r.Status, r.Err)
	}
	if r := wait(t, submit(t, ex, executor.Task[int]{Group: "a", Fn: succeeding})); r.Status != executor.Success {
		t.Fatalf("the closing probe: %v %v", r.Status, r.Err)
	}
	if s := groupStats(t, ex, "a"); s.Breaker != breaker.StateClosed {
		t.Fatalf("after two successful probes: breaker %v, want closed", s.Breaker)
	}
}

// unseenEndCtx is a context whose end, once ended is set, is told only to
// those who ask Err: Done stays open and a function given to its AfterFunc
// never runs, so that a task waiting on it learns of it only as it
// starts.
type unseenEndCtx struct {
	context.Context // Background: no deadline, no values
	done            chan struct{}
	ended           atomic.Bool
}

func (c *unseenEndCtx) Done() <-chan struct{} { return c.done }

func (c *unseenEndCtx) Err() error {
	if c.ended.Load() {
		return errCtxEnded
	}
	return nil
}

func (c *unseenEndCtx) AfterFunc(func()) func() bool { return func() bool { return true } }
