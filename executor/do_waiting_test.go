package executor_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// refusalSetups are the ways a refusal for lack of room can be decided:
// each rejection policy, and a rejection handler that swallows the refusal
// (returns nil) or runs the task in its caller.
var refusalSetups = []struct {
	name  string
	popts []policy.Option
	eopts []executor.Option
}{
	{"Abort", []policy.Option{policy.WithRejectionPolicy(policy.Abort)}, nil},
	{"Discard", []policy.Option{policy.WithRejectionPolicy(policy.Discard)}, nil},
	{"CallerRuns", []policy.Option{policy.WithRejectionPolicy(policy.CallerRuns)}, nil},
	{"DiscardOldest", []policy.Option{policy.WithRejectionPolicy(policy.DiscardOldest)}, nil},
	{"handler swallows", nil, []executor.Option{executor.WithRejectionHandler(func(*executor.Rejection) error { return nil })}},
	{"handler runs in caller", nil, []executor.Option{executor.WithRejectionHandler(func(r *executor.Rejection) error { r.RunInCaller(); return nil })}},
}

// TestDoRemovedWhileWaitingReturnsAnError: a Do that waited in its group's
// queue and is removed from it without running (a queue timeout, a
// shutdown past its deadline, Close) returns an error saying so, whatever
// the rejection policy or handler: its caller has no handle to look at,
// and a refusal after admission never runs fn in the caller.
func TestDoRemovedWhileWaitingReturnsAnError(t *testing.T) {
	removals := []struct {
		name   string
		remove func(ex *executor.Executor, clk *clock.Fake)
		want   []error
	}{
		{"queue timeout", func(_ *executor.Executor, clk *clock.Fake) { clk.Advance(time.Second) },
			[]error{executor.ErrRejected, executor.ErrQueueTimeout}},
		{"Shutdown past its deadline", func(ex *executor.Executor, _ *clock.Fake) { go ex.Shutdown(done()) },
			[]error{executor.ErrShutdown, context.Canceled}},
		{"Close", func(ex *executor.Executor, _ *clock.Fake) { go ex.Close() },
			[]error{executor.ErrShutdown, context.Canceled}},
	}
	for _, setup := range refusalSetups {
		for _, rm := range removals {
			t.Run(setup.name+"/"+rm.name, func(t *testing.T) {
				clk := fakeClock()
				popts := append([]policy.Option{policy.WithDefaultMaxConcurrency(1), policy.WithQueueTimeout(time.Second)}, setup.popts...)
				ex := newExec(t, popts, append([]executor.Option{executor.WithClock(clk)}, setup.eopts...)...)
				g := newGate()
				defer g.open()
				submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("blocker")})
				g.waitStarted(t, 1)
				var ran atomic.Bool
				waiting := doIn(ex, bg, "g", func(context.Context) error { ran.Store(true); return nil })
				await(t, "the Do queued", func() bool { return groupStats(t, ex, "g").Waiting == 1 })
				rm.remove(ex, clk)
				err := recv(t, waiting, "the Do returned once removed from its queue")
				if ran.Load() {
					t.Fatalf("fn ran; Do = %v", err)
				}
				for _, w := range rm.want {
					if !errors.Is(err, w) {
						t.Errorf("Do = %v, want an error matching %v", err, w)
					}
				}
				var re *executor.RejectedError
				if errors.Is(err, executor.ErrQueueTimeout) && (!errors.As(err, &re) || re.Limit != executor.LimitQueueTimeout || re.Group != "g") {
					t.Errorf("Do = %#v, want a *RejectedError of group g at its queue timeout", err)
				}
				if s := groupStats(t, ex, "g"); s.Waiting != 0 || s.InFlight != 1 || s.Started != 1 || s.CallerRuns != 0 {
					t.Errorf("stats after the removal %+v: want the blocker alone in flight, nothing run in a caller", s)
				}
			})
		}
	}
}

// TestDoRefusedByASwallowingHandler: a rejection handler that returns nil
// without running the task does not make Do return nil: fn did not run, so
// Do returns the refusal, a *RejectedError matching ErrRejected. A handler
// that panics counts as returning the refusal.
func TestDoRefusedByASwallowingHandler(t *testing.T) {
	for name, h := range map[string]executor.RejectionHandler{
		"returns nil": func(*executor.Rejection) error { return nil },
		"panics":      func(*executor.Rejection) error { panic("handler") },
	} {
		t.Run(name, func(t *testing.T) {
			ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1)}, executor.WithRejectionHandler(h))
			g := newGate()
			defer g.open()
			submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("blocker")})
			g.waitStarted(t, 1)
			ran := false
			err := ex.Do(bg, "g", func(context.Context) error { ran = true; return nil })
			var re *executor.RejectedError
			if ran || !errors.Is(err, executor.ErrRejected) || !errors.As(err, &re) || re.Limit != executor.LimitGroupInFlight {
				t.Fatalf("ran %v, Do = %v; want not run and the group in-flight refusal", ran, err)
			}
			if s := groupStats(t, ex, "g"); s.Rejected != 1 || s.InFlight != 1 {
				t.Errorf("stats %+v", s)
			}
		})
	}
}

// TestDoDisplacedWhileWaiting: under DiscardOldest, a waiting Do that a
// newer task displaces returns a *RejectedError matching ErrRejected and
// ErrDisplaced without running, and a Do that comes to a full queue
// displaces the oldest waiting task, waits and runs.
func TestDoDisplacedWhileWaiting(t *testing.T) {
	ex := newExec(t, []policy.Option{
		policy.WithDefaultMaxConcurrency(1),
		policy.WithDefaultQueueThreshold(1),
		policy.WithRejectionPolicy(policy.DiscardOldest),
	})
	g := newGate()
	defer g.open()
	submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("blocker")})
	g.waitStarted(t, 1)

	var oldRan atomic.Bool
	old := doIn(ex, bg, "g", func(context.Context) error { oldRan.Store(true); return nil })
	await(t, "the Do queued", func() bool { return groupStats(t, ex, "g").Waiting == 1 })
	newer := submit(t, ex, executor.Task[string]{Group: "g", ID: "newer", Fn: func(context.Context) (string, error) { return "newer", nil }})
	err := recv(t, old, "the displaced Do returned")
	var re *executor.RejectedError
	if oldRan.Load() || !errors.Is(err, executor.ErrDisplaced) || !errors.Is(err, executor.ErrRejected) || !errors.As(err, &re) || re.Group != "g" {
		t.Fatalf("displaced Do: ran %v, err %v; want not run and a *RejectedError matching ErrDisplaced", oldRan.Load(), err)
	}

	// Now a Do comes to the full queue: the Submit task waiting makes room.
	var latestRan atomic.Bool
	latest := doIn(ex, bg, "g", func(context.Context) error { latestRan.Store(true); return nil })
	if r := wait(t, newer); r.Status != executor.Rejected || !errors.Is(r.Err, executor.ErrDisplaced) {
		t.Fatalf("the task the Do displaced: %v %v, want Rejected with ErrDisplaced", r.Status, r.Err)
	}
	await(t, "the displacing Do queued", func() bool { return groupStats(t, ex, "g").Waiting == 1 })
	g.open()
	if err := recv(t, latest, "the displacing Do ran once the blocker ended"); err != nil || !latestRan.Load() {
		t.Fatalf("the displacing Do: ran %v, err %v; want it run", latestRan.Load(), err)
	}
	if s := groupStats(t, ex, "g"); s.Rejected != 2 || s.Succeeded != 2 || s.InFlight != 0 {
		t.Errorf("stats %+v: want two displaced, the blocker and the last Do run", s)
	}
}

// TestDoCancelledWaiterPassesItsTurnOn: a Do cancelled while it waits
// ahead of others leaves the queue at once: the counters show it gone, and
// when a permit frees the next waiter, behind it, gets it, in FIFO order
// with what came after.
func TestDoCancelledWaiterPassesItsTurnOn(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1), policy.WithDefaultMaxInFlight(3)})
	g := newGate()
	defer g.open()
	submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("blocker")})
	g.waitStarted(t, 1)
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	var order []string // appended by one task at a time: the group runs one
	first := doIn(ex, ctx, "g", func(context.Context) error { order = append(order, "cancelled"); return nil })
	await(t, "the first Do queued", func() bool { return groupStats(t, ex, "g").Waiting == 1 })
	second := doIn(ex, bg, "g", func(context.Context) error { order = append(order, "second"); return nil })
	await(t, "the second Do queued", func() bool { return groupStats(t, ex, "g").Waiting == 2 })
	cancel()
	select {
	case err := <-first:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Do = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second): // a hang guard, not a timing assertion
		t.Fatal("the cancelled Do still waits: it did not leave the queue")
	}
	if s := groupStats(t, ex, "g"); s.Waiting != 1 || s.InFlight != 2 || s.Cancelled != 1 || s.Running != 1 {
		t.Fatalf("after the cancel %+v: want one waiting, two in flight, one cancelled", s)
	}
	// The freed place in the in-flight limit (3) is taken by a newcomer,
	// which waits behind the second Do.
	third := submit(t, ex, executor.Task[string]{Group: "g", Fn: func(context.Context) (string, error) {
		order = append(order, "third")
		return "", nil
	}})
	g.open()
	if err := recv(t, second, "the second Do ran once the blocker ended"); err != nil {
		t.Fatalf("second Do = %v", err)
	}
	if r := wait(t, third); r.Status != executor.Success {
		t.Fatalf("third task: %v %v", r.Status, r.Err)
	}
	if got := fmt.Sprint(order); got != "[second third]" {
		t.Errorf("run order %s, want [second third]", got)
	}
	if s := groupStats(t, ex, "g"); s.Waiting != 0 || s.InFlight != 0 || s.Running != 0 || s.Started != 3 || s.Succeeded != 3 || s.Cancelled != 1 {
		t.Errorf("at the end %+v", s)
	}
}

// TestDoWeightedAtEveryLimit: a weighted Do counts its weight, not one
// permit, at each of the three limits: its group's in-flight limit refuses
// it when fewer permits are free, and its group's concurrency limit and the
// global limit keep it waiting until its weight is free; it then runs
// holding its weight at all three.
func TestDoWeightedAtEveryLimit(t *testing.T) {
	t.Run("group in-flight", func(t *testing.T) {
		ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(4), policy.WithDefaultMaxConcurrency(4)})
		g := newGate()
		defer g.open()
		submit(t, ex, executor.Task[string]{Group: "g", Weight: 2, Fn: g.fn("blocker")})
		g.waitStarted(t, 1)
		ran := false
		err := ex.DoWeighted(bg, "g", 3, func(context.Context) error { ran = true; return nil })
		var re *executor.RejectedError
		if ran || !errors.As(err, &re) || re.Limit != executor.LimitGroupInFlight || re.Weight != 3 {
			t.Fatalf("weight 3 with 2 of 4 in flight: ran %v, Do = %v; want a group in-flight refusal", ran, err)
		}
		if err := ex.DoWeighted(bg, "g", 2, func(context.Context) error {
			if s := groupStats(t, ex, "g"); s.InFlight != 4 || s.Running != 4 {
				return fmt.Errorf("inside a weight-2 Do: %+v, want 4 in flight and running", s)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	})
	waits := func(t *testing.T, ex *executor.Executor, blockerGroup string, served uint64) {
		t.Helper()
		g := newGate()
		defer g.open()
		submit(t, ex, executor.Task[string]{Group: blockerGroup, Weight: 2, Fn: g.fn("blocker")})
		g.waitStarted(t, 1)
		var ran atomic.Bool
		done := make(chan error, 1)
		go func() {
			done <- ex.DoWeighted(bg, "g", 3, func(context.Context) error {
				ran.Store(true)
				if s := groupStats(t, ex, "g"); s.Running != 3 || s.RunningTasks != 1 || s.InFlight != 3 {
					return fmt.Errorf("inside the weight-3 Do: %+v, want 3 running and in flight", s)
				}
				if s := ex.Stats(); s.Running != 3 {
					return fmt.Errorf("executor inside the weight-3 Do: running %d, want 3", s.Running)
				}
				return nil
			})
		}()
		await(t, "the weight-3 Do queued", func() bool {
			select {
			case err := <-done:
				t.Fatalf("weight 3 did not wait with only 2 permits free: ran %v, Do = %v", ran.Load(), err)
			default:
			}
			return groupStatsOr(ex, "g").Waiting == 1
		})
		// Queued, and nothing changes until the blocker ends: it waits.
		if ran.Load() {
			t.Fatal("weight 3 ran with only 2 permits free")
		}
		g.open()
		if err := recv(t, done, "the weight-3 Do ran once the blocker ended"); err != nil || !ran.Load() {
			t.Fatalf("weight 3 once the blocker ended: ran %v, Do = %v", ran.Load(), err)
		}
		if s := groupStats(t, ex, "g"); s.ServedPermits != served || s.Running != 0 {
			t.Errorf("after: %+v, want %d permits served", s, served)
		}
	}
	t.Run("group concurrency", func(t *testing.T) {
		waits(t, newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(4)}), "g", 2+3)
	})
	t.Run("global", func(t *testing.T) {
		waits(t, newExec(t, []policy.Option{policy.WithGlobalMaxInFlight(4), policy.WithDefaultMaxConcurrency(4)}), "other", 3)
	})
}

// TestDoColdGroupBesideAHotBacklog: with one global permit and a hot
// group's Do callers waiting for it, a cold group's Do waiting for it too
// gets it within its first turn (the bound of
// TestLightGroupBesideHeavyBacklog: the k-th within the first 2k+2
// starts), not after the hot group's backlog. TestDoHotGroupNeverDelaysACold
// is the case with global room free.
func TestDoColdGroupBesideAHotBacklog(t *testing.T) {
	const backlog = 50
	ex := newExec(t, []policy.Option{
		policy.WithGlobalMaxInFlight(1),
		policy.WithDefaultMaxConcurrency(4), // the hot group waits for global room, not for its own
		policy.WithDefaultMaxInFlight(policy.Unlimited),
	})
	holding, release := make(chan struct{}), make(chan struct{})
	closeAtEnd(t, release)
	holder := doIn(ex, bg, "hot", func(context.Context) error { close(holding); <-release; return nil })
	recv(t, holding, "the holder ran")
	var order []string // one Do runs at a time: the global limit is 1
	record := func(name string) func(context.Context) error {
		return func(context.Context) error { order = append(order, name); return nil }
	}
	var dos []<-chan error
	for range backlog {
		dos = append(dos, doIn(ex, bg, "hot", record("hot")))
	}
	await(t, "the hot backlog queued", func() bool { return groupStats(t, ex, "hot").Waiting == backlog })
	dos = append(dos, doIn(ex, bg, "cold", record("cold")))
	await(t, "the cold Do queued", func() bool { return groupStatsOr(ex, "cold").Waiting == 1 })
	close(release)
	if err := recv(t, holder, "the holder returned"); err != nil {
		t.Fatal(err)
	}
	for i, d := range dos {
		if err := recv(t, d, fmt.Sprintf("Do %d of the backlog and the cold one ran once the holder ended", i)); err != nil {
			t.Fatal(err)
		}
	}
	for i, name := range order {
		if name == "cold" {
			if i+1 > 4 {
				t.Errorf("the cold Do was start %d after the release, want within 4: %v", i+1, order[:i+1])
			}
			return
		}
	}
	t.Fatalf("the cold Do never ran: %v", order)
}
