package executor_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

func TestLimitResolution(t *testing.T) {
	// Each resolver answers for "vip" (which has per-group values that win)
	// and "resolved", not for "plain" (which gets the defaults).
	answer := func(n int) func(string) (int, bool) {
		return func(g string) (int, bool) { return n, g == "vip" || g == "resolved" }
	}
	ex := newExec(t, []policy.Option{
		policy.WithDefaultMaxInFlight(50),
		policy.WithDefaultMaxConcurrency(2),
		policy.WithDefaultQueueThreshold(20),
		policy.WithGroupMaxInFlight("vip", 500),
		policy.WithGroupMaxConcurrency("vip", 16),
		policy.WithGroupQueueThreshold("vip", 200),
		policy.WithMaxInFlightResolver(answer(100)),
		policy.WithMaxConcurrencyResolver(answer(8)),
		policy.WithQueueThresholdResolver(answer(0)),
	})
	for grp, want := range map[string]policy.GroupLimits{
		"vip":      {MaxInFlight: 500, MaxConcurrency: 16, QueueThreshold: 200},
		"resolved": {MaxInFlight: 100, MaxConcurrency: 8, QueueThreshold: 0},
		"plain":    {MaxInFlight: 50, MaxConcurrency: 2, QueueThreshold: 20},
	} {
		wait(t, submit(t, ex, executor.Task[int]{Group: grp, Fn: func(context.Context) (int, error) { return 0, nil }}))
		s := groupStats(t, ex, grp)
		if got := (policy.GroupLimits{MaxInFlight: s.MaxInFlight, MaxConcurrency: s.MaxConcurrency, QueueThreshold: s.QueueThreshold}); got != want {
			t.Errorf("%s: limits %+v, want %+v", grp, got, want)
		}
	}
}

// A resolver's invalid answer refuses the task (LimitResolver, naming the
// resolver and the value), whatever the rejection policy, and keeps no
// state for the group.
func TestResolverErrorRejectsTask(t *testing.T) {
	bad := func(n int) func(string) (int, bool) { return func(string) (int, bool) { return n, true } }
	for _, tc := range []struct {
		name string
		opt  policy.Option
	}{
		{"WithMaxInFlightResolver", policy.WithMaxInFlightResolver(bad(0))},
		{"WithMaxConcurrencyResolver", policy.WithMaxConcurrencyResolver(bad(0))},
		{"WithQueueThresholdResolver", policy.WithQueueThresholdResolver(bad(-1))},
		{"WithShareResolver", policy.WithShareResolver(bad(0))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ex := newExec(t, []policy.Option{tc.opt, policy.WithRejectionPolicy(policy.Discard)})
			h, err := executor.Submit(ex, bg, executor.Task[int]{Group: "g", Fn: func(context.Context) (int, error) { return 0, nil }})
			var rej *executor.RejectedError
			if !errors.As(err, &rej) || rej.Limit != executor.LimitResolver || !errors.Is(err, policy.ErrInvalidOption) ||
				!strings.Contains(err.Error(), tc.name) {
				t.Fatalf("err = %v, want a LimitResolver refusal naming %s", err, tc.name)
			}
			if r := wait(t, h); r.Status != executor.Rejected {
				t.Fatalf("result %+v", r)
			}
			if _, ok := ex.GroupStats("g"); ok {
				t.Error("state kept for a group whose limits did not resolve")
			}
		})
	}
}

// A resolver that panics panics the caller that needed the group, before
// anything of the task is counted or held: the executor goes on serving
// other groups, and the group is resolved again at its next task.
func TestResolverPanicHoldsNothing(t *testing.T) {
	var panics atomic.Bool
	panics.Store(true)
	ex := newExec(t, []policy.Option{policy.WithMaxConcurrencyResolver(func(g string) (int, bool) {
		if g == "bad" && panics.Load() {
			panic("resolver failed")
		}
		return 1, true
	})})
	fn := func(context.Context) error { return nil }
	for name, call := range map[string]func() error{
		"Go": func() error { return ex.Go(bg, "bad", fn) },
		"Do": func() error { return ex.Do(bg, "bad", fn) },
		"Submit": func() error {
			_, err := executor.Submit(ex, bg, executor.Task[int]{Group: "bad", Fn: func(context.Context) (int, error) { return 0, nil }})
			return err
		},
	} {
		func() {
			defer func() {
				if r := recover(); r != "resolver failed" {
					t.Errorf("%s: recovered %v, want the resolver's panic", name, r)
				}
			}()
			call()
		}()
	}
	if _, ok := ex.GroupStats("bad"); ok {
		t.Error("state kept for a group whose resolver panicked")
	}
	if s := ex.Stats(); s.Running != 0 || s.Waiting != 0 || s.Submitted != 0 || s.Groups != 0 {
		t.Errorf("after the panics: %+v; want nothing counted or held", s)
	}
	if err := ex.Do(bg, "good", fn); err != nil {
		t.Fatal(err)
	}
	panics.Store(false)
	if err := ex.Do(bg, "bad", fn); err != nil {
		t.Fatalf("once the resolver answers: %v", err)
	}
}

func TestEvictIdleGroupResolvesLimitsAfresh(t *testing.T) {
	var limit, calls atomic.Int64
	limit.Store(1)
	ex := newExec(t, []policy.Option{policy.WithMaxConcurrencyResolver(func(string) (int, bool) {
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
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)})
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
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)}, executor.WithMaxIdleGroups(8))
	for i := range 1000 {
		executor.Submit(ex, bg, executor.Task[int]{Group: fmt.Sprint("k", i), Weight: 2, Fn: func(context.Context) (int, error) { return 0, nil }})
		executor.Submit(ex, bg, executor.Task[int]{Group: "same", Weight: 2, Fn: func(context.Context) (int, error) { return 0, nil }})
	}
	if s := ex.Stats(); s.Groups > 8 || s.Rejected != 2000 {
		t.Errorf("stats %+v: want at most 8 groups kept", s)
	}
}

// Every resolver is called outside every executor lock: one that calls
// back into the executor, even to change limits (which takes the lock that
// guards the limits set at runtime), does not deadlock.
func TestResolversMayUseTheExecutor(t *testing.T) {
	var ex *executor.Executor
	calls := 0
	reentrant := func(n int) func(string) (int, bool) {
		return func(string) (int, bool) {
			calls++
			_ = ex.Stats()
			if err := ex.SetGroupLimits("side", policy.GroupLimits{MaxInFlight: 1, MaxConcurrency: 1, Share: 1}); err != nil {
				t.Errorf("SetGroupLimits from a resolver: %v", err)
			}
			return n, true
		}
	}
	ex = newExec(t, []policy.Option{
		policy.WithMaxInFlightResolver(reentrant(4)),
		policy.WithMaxConcurrencyResolver(reentrant(2)),
		policy.WithQueueThresholdResolver(reentrant(3)),
		policy.WithShareResolver(reentrant(5)),
	})
	done := make(chan executor.Result[int], 1)
	go func() {
		h, err := executor.Submit(ex, bg, executor.Task[int]{Group: "g", Fn: func(context.Context) (int, error) { return 1, nil }})
		if err != nil {
			t.Error(err)
		}
		r, _ := h.Wait(bg)
		done <- r
	}()
	select {
	case r := <-done:
		if r.Status != executor.Success {
			t.Fatalf("result %+v", r)
		}
	case <-time.After(10 * time.Second): // hang guard: a resolver called under a lock deadlocks
		t.Fatal("Submit did not return: a resolver was called under an executor lock")
	}
	s := groupStats(t, ex, "g")
	if calls != 4 || s.MaxInFlight != 4 || s.MaxConcurrency != 2 || s.QueueThreshold != 3 || s.Share != 5 {
		t.Errorf("%d resolver calls, limits %+v", calls, s)
	}
}

// TestIdleGroupsBoundAfterEvictions: the executor keeps at most
// WithMaxIdleGroups idle groups after evictions have taken it under half
// that many groups and new groups come and go: the idle list, in use
// before, is forgotten, and listed afresh once needed.
func TestIdleGroupsBoundAfterEvictions(t *testing.T) {
	const maxIdle = 4
	ex := newExec(t, nil, executor.WithMaxIdleGroups(maxIdle))
	use := func(key string) {
		t.Helper()
		wait(t, submit(t, ex, executor.Task[int]{Group: key, Fn: func(context.Context) (int, error) { return 0, nil }}))
	}
	check := func(when string) {
		t.Helper()
		if s := ex.Stats(); s.IdleGroups > maxIdle || s.Groups > maxIdle {
			t.Fatalf("%s: %d groups kept, %d idle; want at most %d", when, s.Groups, s.IdleGroups, maxIdle)
		}
	}
	// Five groups: the list comes into use, and one is reclaimed.
	first := []string{"a", "b", "c", "d", "e"}
	for _, k := range first {
		use(k)
	}
	check("after the first five groups")
	// Evict all but one: the executor keeps 1 group, under half of maxIdle.
	kept := 0
	for _, k := range first {
		if _, ok := ex.GroupStats(k); !ok {
			continue
		}
		if kept == 0 {
			kept++
			continue
		}
		ex.EvictGroup(k)
	}
	if s := ex.Stats(); s.Groups != 1 {
		t.Fatalf("after evictions: %d groups, want 1", s.Groups)
	}
	// A group going idle now, at 2 groups, needs no list.
	use("x")
	// Groups coming and going: the executor must still keep at most
	// maxIdle idle groups.
	for i := range 20 {
		use(fmt.Sprint("y", i))
		check(fmt.Sprint("after y", i))
	}
	if _, ok := ex.GroupStats("x"); ok {
		t.Errorf("group x, idle since before 20 others went idle, is still kept")
	}
}

// TestEvictedIdleGroupLeavesTheIdleList: a group on the idle list that is
// evicted, idle (dropped at once) or busy again (dropped as it goes idle),
// leaves the list. Left there, it would count toward the list's length
// until trimmed off, and a group going idle would have another idle group
// reclaimed in its place, fewer than WithMaxIdleGroups kept.
func TestEvictedIdleGroupLeavesTheIdleList(t *testing.T) {
	for _, busy := range []bool{false, true} {
		t.Run(fmt.Sprint("busy=", busy), func(t *testing.T) {
			ex := newExec(t, nil, executor.WithMaxIdleGroups(2))
			use := func(key string) {
				t.Helper()
				wait(t, submit(t, ex, executor.Task[int]{Group: key, Fn: func(context.Context) (int, error) { return 0, nil }}))
			}
			// Three groups: the list comes into use, and a or b is
			// reclaimed; the other and c are listed.
			use("a")
			use("b")
			use("c")
			kept := "a"
			if _, ok := ex.GroupStats(kept); !ok {
				kept = "b"
			}
			if s := ex.Stats(); s.Groups != 2 {
				t.Fatalf("after three groups: %d kept, want 2", s.Groups)
			}
			if busy {
				g := newGate()
				h := submit(t, ex, executor.Task[string]{Group: "c", Fn: g.fn("c")})
				g.waitStarted(t, 1)
				if ex.EvictGroup("c") {
					t.Fatal("busy group evicted at once")
				}
				g.open()
				wait(t, h)
				if _, ok := ex.GroupStats("c"); ok {
					t.Fatal("group c not evicted once idle")
				}
			} else if !ex.EvictGroup("c") {
				t.Fatal("idle group not evicted at once")
			}
			// One idle group is kept: d going idle makes two, within the
			// bound.
			use("d")
			if _, ok := ex.GroupStats(kept); !ok {
				t.Errorf("group %s reclaimed as d went idle, with 2 idle groups allowed", kept)
			}
			if s := ex.Stats(); s.Groups != 2 || s.IdleGroups != 2 {
				t.Errorf("after d: %d groups kept, %d idle; want 2 and 2", s.Groups, s.IdleGroups)
			}
		})
	}
}

// TestEvictedGroupIsUnlistedBeforeItsTaskCompletes: a busy group that was
// evicted leaves the idle list before the task whose finish drops it
// completes. A caller that has seen the task complete and sends another
// group idle finds the list without it, and no idle group is reclaimed in
// its place. The drop hook sends d idle at that moment: the evicted group
// has completed its task and left the index, and has not returned yet.
func TestEvictedGroupIsUnlistedBeforeItsTaskCompletes(t *testing.T) {
	ex := newExec(t, nil, executor.WithMaxIdleGroups(2))
	task := executor.Task[int]{Fn: func(context.Context) (int, error) { return 0, nil }}
	for _, key := range []string{"a", "b", "c"} {
		task.Group = key
		wait(t, submit(t, ex, task))
	}
	kept := "a"
	if _, ok := ex.GroupStats(kept); !ok {
		kept = "b"
	}
	g := newGate()
	h := submit(t, ex, executor.Task[string]{Group: "c", Fn: g.fn("c")})
	g.waitStarted(t, 1)
	if ex.EvictGroup("c") {
		t.Fatal("busy group evicted at once")
	}
	hooked := make(chan error, 1)
	executor.SetHookDropped(func(key string) {
		if key != "c" {
			return
		}
		task.Group = "d"
		hd, err := executor.Submit(ex, context.Background(), task)
		if err == nil {
			_, err = hd.Wait(context.Background())
		}
		hooked <- err
	})
	defer executor.SetHookDropped(nil)
	g.open()
	wait(t, h)
	select {
	case err := <-hooked:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("group c never dropped")
	}
	if _, ok := ex.GroupStats(kept); !ok {
		t.Errorf("group %s reclaimed as d went idle, with c evicted and 2 idle groups allowed", kept)
	}
	if s := ex.Stats(); s.Groups != 2 || s.IdleGroups != 2 {
		t.Errorf("after d: %d groups kept, %d idle; want 2 and 2", s.Groups, s.IdleGroups)
	}
}
