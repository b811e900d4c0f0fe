package executor_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// Tasks waiting for a group limiter's notify leave their queue every way a
// task can (a cancelled context, the queue timeout, a shutdown), from all
// three entry points, holding no cluster permit: each completes once, none
// runs but the one given a permit, the permits all come back, and a notify
// after Close starts nothing.
func TestClusterWaitersLeaveEveryWayHoldingNoPermit(t *testing.T) {
	clk := fakeClock()
	glob, grp := newMemLimiter(), newMemLimiter()
	glob.avail[""] = 10
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(4), policy.WithQueueTimeout(time.Minute)},
		executor.WithClock(clk), executor.WithGlobalLimiter(glob), executor.WithGroupLimiter(grp))
	var ran [5]atomic.Int32
	body := func(i int) func(context.Context) (int, error) {
		return func(context.Context) (int, error) { ran[i].Add(1); return i, nil }
	}
	hold := newGate()
	defer hold.open()

	// At 0: s0, whose context will be cancelled, and s1, to time out.
	ctx0, cancel0 := context.WithCancel(bg)
	defer cancel0()
	s0, err := executor.Submit(ex, ctx0, executor.Task[int]{Group: "a", Fn: body(0)})
	if err != nil {
		t.Fatal(err)
	}
	s1 := submit(t, ex, executor.Task[int]{Group: "a", Fn: body(1)})
	clk.Advance(30 * time.Second)
	// At 30 s: a Go task, to run on the permit given later, and a Do call,
	// to be cancelled by the shutdown.
	if err := ex.Go(bg, "a", func(ctx context.Context) error {
		ran[2].Add(1)
		hold.started <- "go"
		<-hold.release
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	doErr := make(chan error, 1)
	go func() {
		doErr <- ex.Do(bg, "a", func(context.Context) error { ran[3].Add(1); return nil })
	}()
	await(t, "four tasks waiting", func() bool { return groupStats(t, ex, "a").Waiting == 4 })
	if n := grp.outstanding(); n != 0 {
		t.Fatalf("%d group permits out with no permit given", n)
	}

	cancel0()
	if r := wait(t, s0); r.Status != executor.Cancelled {
		t.Fatalf("s0, cancelled while waiting for the limiter: %v %v", r.Status, r.Err)
	}
	clk.Advance(30 * time.Second)
	if r := wait(t, s1); r.Status != executor.Rejected || !errors.Is(r.Err, executor.ErrQueueTimeout) {
		t.Fatalf("s1, past its queue timeout while waiting for the limiter: %v %v", r.Status, r.Err)
	}

	// One permit: the Go task, now the head, takes it; the Do call waits
	// for the limiter again.
	grp.give("a", 1)
	hold.waitStarted(t, 1)
	await(t, "the Do call waiting alone", func() bool { s := groupStats(t, ex, "a"); return s.Waiting == 1 && s.RunningTasks == 1 })

	ctx, cancel := context.WithCancel(bg)
	cancel()
	if err := ex.Shutdown(ctx); err == nil {
		t.Fatal("Shutdown with an ended context and a task running: nil error")
	}
	if err := recv(t, doErr, "the Do call cut short by the shutdown"); err == nil {
		t.Fatal("the Do call waiting for the limiter at the shutdown returned nil")
	}
	hold.open()
	if err := closeWithin(t, ex, "Close after the shutdown"); err != nil {
		t.Fatal(err)
	}
	// A limiter refills after Close: its notify must start nothing.
	grp.give("a", 5)
	glob.give("", 5)

	for i, want := range []int32{0, 0, 1, 0} {
		if n := ran[i].Load(); n != want {
			t.Errorf("task %d ran %d times, want %d", i, n, want)
		}
	}
	if a, b := glob.outstanding(), grp.outstanding(); a != 0 || b != 0 {
		t.Errorf("permits out after Close: global %d, group %d", a, b)
	}
	if n := glob.doubles.Load() + grp.doubles.Load(); n != 0 {
		t.Errorf("%d permits released twice", n)
	}
	s := ex.Stats()
	if s.Submitted != 4 || s.Succeeded+s.Failed+s.Cancelled+s.Rejected != 4 || s.Started != 1 || s.Running != 0 || s.Waiting != 0 {
		t.Errorf("stats after Close: %+v; want 4 submitted, 4 outcomes, 1 started, nothing left", s)
	}
}

// A head waiting for its group limiter with more weight than the limiter
// has permits, displaced under DiscardOldest, leaves the next head to ask
// the limiter for its own weight at once: the limiter, which has what that
// head needs, has no reason to notify.
func TestClusterDisplacedHeavyHeadLetsNextHeadAskAfresh(t *testing.T) {
	grp := newMemLimiter()
	grp.avail["a"] = 1
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(4), policy.WithDefaultQueueThreshold(1),
		policy.WithRejectionPolicy(policy.DiscardOldest)}, executor.WithGroupLimiter(grp))
	heavy := submit(t, ex, executor.Task[string]{Group: "a", Weight: 2, Fn: func(context.Context) (string, error) { return "heavy", nil }})
	if s := groupStats(t, ex, "a"); s.Waiting != 1 {
		t.Fatalf("the heavy task, with 1 of its 2 cluster permits: %+v, want it waiting", s)
	}
	light := submit(t, ex, executor.Task[string]{Group: "a", Fn: func(context.Context) (string, error) { return "light", nil }})
	if r := wait(t, heavy); r.Status != executor.Rejected {
		t.Fatalf("the heavy head under DiscardOldest: %v %v, want Rejected", r.Status, r.Err)
	}
	if r := wait(t, light); r.Status != executor.Success || r.Value != "light" {
		t.Fatalf("the light task: %v %v", r.Status, r.Err)
	}
	if n := grp.outstanding(); n != 0 {
		t.Fatalf("%d group permits out", n)
	}
}

// A limiter that refuses a task it first asked to wait refuses it at
// dispatch, whichever way it came in: Do returns the refusal, Submit's
// handle completes Rejected with it, a Go task counts Rejected; the
// global permit taken before the group's refusal comes back; once the
// limiter grants again, the group serves.
func TestClusterRefusalAtDispatchEndsEveryEntryPoint(t *testing.T) {
	glob, grp := newMemLimiter(), newMemLimiter()
	glob.avail[""] = 10
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(4)},
		executor.WithGlobalLimiter(glob), executor.WithGroupLimiter(grp))
	var ran atomic.Int32
	h := submit(t, ex, executor.Task[int]{Group: "a", Fn: func(context.Context) (int, error) { ran.Add(1); return 0, nil }})
	if err := ex.Go(bg, "a", func(context.Context) error { ran.Add(1); return nil }); err != nil {
		t.Fatal(err)
	}
	doErr := make(chan error, 1)
	go func() { doErr <- ex.Do(bg, "a", func(context.Context) error { ran.Add(1); return nil }) }()
	await(t, "three tasks waiting", func() bool { return groupStats(t, ex, "a").Waiting == 3 })

	quota := errors.New("quota revoked")
	grp.mu.Lock()
	grp.refuse = quota
	grp.mu.Unlock()
	grp.notify("a")

	if r := wait(t, h); r.Status != executor.Rejected || !errors.Is(r.Err, executor.ErrRejected) || !errors.Is(r.Err, quota) {
		t.Fatalf("Submit refused at dispatch: %v %v", r.Status, r.Err)
	}
	if err := recv(t, doErr, "the Do call refused at dispatch"); !errors.Is(err, executor.ErrRejected) || !errors.Is(err, quota) {
		t.Fatalf("Do refused at dispatch: %v", err)
	}
	await(t, "the Go task refused", func() bool { return groupStats(t, ex, "a").Rejected == 3 })
	if n := ran.Load(); n != 0 {
		t.Fatalf("%d refused tasks ran", n)
	}
	if a, b := glob.outstanding(), grp.outstanding(); a != 0 || b != 0 {
		t.Fatalf("permits out after the refusals: global %d, group %d", a, b)
	}

	grp.mu.Lock()
	grp.refuse = nil
	grp.mu.Unlock()
	grp.give("a", 1)
	wantServes(t, ex, "a", "a limiter that refused at dispatch")
	if s := groupStats(t, ex, "a"); s.Submitted != 4 || s.Rejected != 3 || s.Succeeded != 1 || s.InFlight != 0 {
		t.Fatalf("group a: %+v", s)
	}
}
