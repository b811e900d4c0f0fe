package executor_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

func TestLimitResolution(t *testing.T) {
	ex := newExec(t, []policy.Option{
		policy.WithMaxConcurrencyPerGroup(2),
		policy.WithGroupMaxConcurrency("vip", 16),
		policy.WithConcurrencyResolver(func(g string) (int, bool) {
			if g == "vip" || g == "resolved" {
				return 8, true
			}
			return 0, false
		}),
	})
	for grp, want := range map[string]int{"vip": 16, "resolved": 8, "plain": 2} {
		wait(t, submit(t, ex, executor.Task[int]{Group: grp, Fn: func(context.Context) (int, error) { return 0, nil }}))
		if s := groupStats(t, ex, grp); s.MaxConcurrency != want {
			t.Errorf("%s: concurrency %d, want %d", grp, s.MaxConcurrency, want)
		}
	}
}

func TestResolverErrorRejectsTask(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithConcurrencyResolver(func(string) (int, bool) { return 0, true })})
	h, err := executor.Submit(ex, bg, executor.Task[int]{Group: "g", Fn: func(context.Context) (int, error) { return 0, nil }})
	if err == nil || wait(t, h).Status != executor.Rejected {
		t.Fatalf("err = %v", err)
	}
	if _, ok := ex.GroupStats("g"); ok {
		t.Error("state kept for a group whose limits did not resolve")
	}
}

func TestEvictIdleGroupResolvesLimitsAfresh(t *testing.T) {
	var limit, calls atomic.Int64
	limit.Store(1)
	ex := newExec(t, []policy.Option{policy.WithConcurrencyResolver(func(string) (int, bool) {
		calls.Add(1)
		return int(limit.Load()), true
	})})
	run := func() {
		wait(t, submit(t, ex, executor.Task[int]{Group: "g", Fn: func(context.Context) (int, error) { return 0, nil }}))
	}
	run()
	run()
	if calls.Load() != 1 {
		t.Fatalf("resolver called %d times, want once while the group lives", calls.Load())
	}
	limit.Store(3)
	if !ex.EvictGroup("g") {
		t.Fatal("idle group not evicted at once")
	}
	if _, ok := ex.GroupStats("g"); ok {
		t.Fatal("evicted group still has state")
	}
	run()
	if s := groupStats(t, ex, "g"); s.MaxConcurrency != 3 || calls.Load() != 2 {
		t.Errorf("after eviction: concurrency %d, resolver calls %d", s.MaxConcurrency, calls.Load())
	}
}

func TestEvictBusyGroupWhenIdle(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithMaxConcurrencyPerGroup(1)})
	g := newGate()
	running := submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("a")})
	g.waitStarted(t, 1)
	waiting := submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("b")})
	if ex.EvictGroup("g") {
		t.Fatal("busy group evicted at once")
	}
	if _, ok := ex.GroupStats("g"); !ok {
		t.Fatal("busy group lost its state")
	}
	g.open()
	wait(t, running)
	wait(t, waiting)
	if _, ok := ex.GroupStats("g"); ok {
		t.Error("group not evicted once idle")
	}
	if s := ex.Stats(); s.Running != 0 || s.Waiting != 0 || s.Groups != 0 {
		t.Errorf("stats %+v", s)
	}
}

func TestIdleGroupsAreReclaimed(t *testing.T) {
	ex := newExec(t, nil, executor.WithMaxIdleGroups(3))
	for i := range 100 {
		wait(t, submit(t, ex, executor.Task[int]{Group: fmt.Sprint("tenant-", i), Fn: func(context.Context) (int, error) { return 0, nil }}))
		if s := ex.Stats(); s.Groups > 3 || s.IdleGroups > 3 {
			t.Fatalf("after %d groups: %d kept, want at most 3", i+1, s.Groups)
		}
	}
	// The most recently idle survive.
	if _, ok := ex.GroupStats("tenant-99"); !ok {
		t.Error("most recent idle group reclaimed")
	}
	if _, ok := ex.GroupStats("tenant-0"); ok {
		t.Error("oldest idle group kept")
	}
}

func TestIdleReclamationZeroKeepsNoIdleGroup(t *testing.T) {
	ex := newExec(t, nil, executor.WithMaxIdleGroups(0))
	wait(t, submit(t, ex, executor.Task[int]{Group: "g", Fn: func(context.Context) (int, error) { return 0, nil }}))
	if s := ex.Stats(); s.Groups != 0 {
		t.Errorf("stats %+v", s)
	}
}

// TestRefusedTasksDoNotGrowTheGroupMap: keys that only ever see refusals
// (here, tasks too heavy to run) are reclaimed like idle groups.
func TestRefusedTasksDoNotGrowTheGroupMap(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithMaxConcurrencyPerGroup(1)}, executor.WithMaxIdleGroups(8))
	for i := range 1000 {
		executor.Submit(ex, bg, executor.Task[int]{Group: fmt.Sprint("k", i), Weight: 2, Fn: func(context.Context) (int, error) { return 0, nil }})
		executor.Submit(ex, bg, executor.Task[int]{Group: "same", Weight: 2, Fn: func(context.Context) (int, error) { return 0, nil }})
	}
	if s := ex.Stats(); s.Groups > 8 || s.Rejected != 2000 {
		t.Errorf("stats %+v: want at most 8 groups kept", s)
	}
}
