package executor_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// The lane (lane.go) admits a task that must wait without the executor's
// lock. These tests pin what it must not change: order, limits, reasons
// for refusal, cancellation, counts. Each first checks that the tasks it
// is about really went through the lane (they sat in the group's lane),
// so that none of them passes by taking the locked path instead.

// blockGroup starts a gate task in group and returns once it runs: with a
// concurrency limit of 1, the group's next tasks wait.
func blockGroup(t *testing.T, ex *executor.Executor, group string) *gate {
	t.Helper()
	g := newGate()
	t.Cleanup(g.open)
	submit(t, ex, executor.Task[string]{Group: group, ID: "blocker", Fn: g.fn("blocker")})
	g.waitStarted(t, 1)
	return g
}

func TestLaneKeepsOrderAndCounts(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithMaxConcurrencyPerGroup(1)})
	gt := blockGroup(t, ex, "g")
	var mu sync.Mutex
	var order []int
	const n = 200
	hs := make([]*executor.Handle[int], n)
	for i := range n {
		hs[i] = submit(t, ex, executor.Task[int]{Group: "g", Fn: func(context.Context) (int, error) {
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			return i, nil
		}})
	}
	// The first waits through the locked path and opens the lane; the
	// others go through it.
	if got := executor.LaneLen(ex, "g"); got != n-1 {
		t.Fatalf("lane holds %d tasks, want %d: the lane was not used", got, n-1)
	}
	s := groupStats(t, ex, "g") // counts what the lane admitted
	if s.Submitted != n+1 || s.Waiting != n || s.InFlight != n+1 {
		t.Fatalf("group stats %+v, want %d submitted, %d waiting, %d in flight", s, n+1, n, n+1)
	}
	if es := ex.Stats(); es.Submitted != n+1 || es.Waiting != n {
		t.Fatalf("executor stats %+v, want %d submitted, %d waiting", es, n+1, n)
	}
	gt.open()
	for i, h := range hs {
		if r := wait(t, h); r.Status != executor.Success || r.Value != i {
			t.Fatalf("task %d: %+v", i, r)
		}
	}
	for i, v := range order {
		if v != i {
			t.Fatalf("start %d was task %d, want FIFO: %v", i, v, order)
		}
	}
}

func TestLaneRespectsQueueThresholdAndInFlight(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    []policy.Option
		accept  int // tasks accepted behind the blocker
		limit   executor.Limit
		weights int // weight of each task
	}{
		{"queue threshold", []policy.Option{policy.WithQueueThresholdPerGroup(5)}, 5, executor.LimitGroupQueue, 1},
		// The two blockers hold 2 of the in-flight permits.
		{"in-flight", []policy.Option{policy.WithMaxInFlightPerGroup(7)}, 5, executor.LimitGroupInFlight, 1},
		{"in-flight, weighted", []policy.Option{policy.WithMaxInFlightPerGroup(9)}, 3, executor.LimitGroupInFlight, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := append([]policy.Option{policy.WithMaxConcurrencyPerGroup(2), policy.WithRejectionPolicy(policy.Abort)}, tc.opts...)
			ex := newExec(t, opts)
			gt := blockGroup(t, ex, "g")
			gt2 := newGate()
			defer gt2.open()
			submit(t, ex, executor.Task[string]{Group: "g", Fn: gt2.fn("blocker2")})
			gt2.waitStarted(t, 1)
			const in = 2 // the blockers' in-flight permits
			var hs []*executor.Handle[int]
			for i := range tc.accept + 3 {
				h, err := executor.Submit(ex, bg, executor.Task[int]{Group: "g", Weight: tc.weights, Fn: func(context.Context) (int, error) { return i, nil }})
				if i < tc.accept {
					if err != nil {
						t.Fatalf("task %d refused: %v", i, err)
					}
					hs = append(hs, h)
					// The first waits through the locked path; the
					// others go through the lane, until it has no room.
					if i == tc.accept-1 && executor.LaneLen(ex, "g") != tc.accept-1 {
						t.Fatalf("lane holds %d, want %d", executor.LaneLen(ex, "g"), tc.accept-1)
					}
					continue
				}
				var re *executor.RejectedError
				if !errors.As(err, &re) || re.Limit != tc.limit {
					t.Fatalf("task %d: %v, want a refusal at %v", i, err, tc.limit)
				}
			}
			s := groupStats(t, ex, "g")
			if s.Waiting != tc.accept || s.InFlight != in+tc.accept*tc.weights {
				t.Fatalf("stats %+v: want %d waiting, %d in flight", s, tc.accept, in+tc.accept*tc.weights)
			}
			gt.open()
			gt2.open()
			for _, h := range hs {
				if r := wait(t, h); r.Status != executor.Success {
					t.Fatalf("%+v", r)
				}
			}
		})
	}
}

// A task that can never start is refused with the reason, not queued by
// the lane: heavier than the group's concurrency limit, or than a global
// limit lowered while the lane was open.
func TestLaneRefusesTooHeavy(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithMaxConcurrencyPerGroup(3), policy.WithGlobalMaxInFlight(3)})
	gt := newGate()
	defer gt.open()
	for range 3 {
		submit(t, ex, executor.Task[string]{Group: "g", Fn: gt.fn("b")})
	}
	gt.waitStarted(t, 3)
	submit(t, ex, executor.Task[string]{Group: "g", Fn: gt.fn("w1")})
	submit(t, ex, executor.Task[string]{Group: "g", Fn: gt.fn("w2")})
	if !executor.LaneOpen(ex, "g") || executor.LaneLen(ex, "g") != 1 {
		t.Fatal("the lane is not in use")
	}
	_, err := executor.Submit(ex, bg, executor.Task[string]{Group: "g", Weight: 4, Fn: gt.fn("heavy")})
	var re *executor.RejectedError
	if !errors.Is(err, executor.ErrTooHeavy) || !errors.As(err, &re) || re.Limit != executor.LimitGlobalInFlight {
		t.Fatalf("weight 4: %v, want ErrTooHeavy at the global limit", err)
	}
	submit(t, ex, executor.Task[string]{Group: "g", Fn: gt.fn("w3")}) // reopens the lane
	if err := ex.SetGlobalMaxInFlight(2); err != nil {
		t.Fatal(err)
	}
	submit(t, ex, executor.Task[string]{Group: "g", Fn: gt.fn("w4")}) // reopens it under the new limit
	_, err = executor.Submit(ex, bg, executor.Task[string]{Group: "g", Weight: 3, Fn: gt.fn("heavy2")})
	if !errors.Is(err, executor.ErrTooHeavy) {
		t.Fatalf("weight 3 under a global limit of 2: %v, want ErrTooHeavy", err)
	}
}

// A task still in the lane can be cancelled, by its handle or its
// context: it completes Cancelled, never runs, and gives its place back.
func TestLaneCancelInLane(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithMaxConcurrencyPerGroup(1), policy.WithMaxInFlightPerGroup(4)})
	gt := blockGroup(t, ex, "g")
	ran := make(chan string, 8)
	fn := func(name string) func(context.Context) (string, error) {
		return func(context.Context) (string, error) { ran <- name; return name, nil }
	}
	first := submit(t, ex, executor.Task[string]{Group: "g", ID: "first", Fn: fn("first")})
	byHandle := submit(t, ex, executor.Task[string]{Group: "g", ID: "by-handle", Fn: fn("by-handle")})
	ctx, cancel := context.WithCancel(bg)
	byCtx, err := executor.Submit(ex, ctx, executor.Task[string]{Group: "g", ID: "by-ctx", Fn: fn("by-ctx")})
	if err != nil {
		t.Fatal(err)
	}
	if got := executor.LaneLen(ex, "g"); got != 2 {
		t.Fatalf("lane holds %d, want 2", got)
	}
	if !executor.WatchesParent(byCtx) {
		t.Fatal("a task admitted through the lane does not watch its cancellable context")
	}
	byHandle.Cancel()
	cancel()
	for _, h := range []*executor.Handle[string]{byHandle, byCtx} {
		if r := wait(t, h); r.Status != executor.Cancelled {
			t.Fatalf("%s: %+v, want Cancelled", h.ID(), r)
		}
	}
	// Their places are free again: two more fit the in-flight limit of 4,
	// the second through the lane, with a context that is never cancelled:
	// once it starts, nothing watches that context any more.
	last := submit(t, ex, executor.Task[string]{Group: "g", ID: "last", Fn: fn("last")})
	ctx2, cancel2 := context.WithCancel(bg)
	defer cancel2()
	last2, err := executor.Submit(ex, ctx2, executor.Task[string]{Group: "g", ID: "last2", Fn: fn("last2")})
	if err != nil || executor.LaneLen(ex, "g") != 1 || !executor.WatchesParent(last2) {
		t.Fatalf("last2: %v; in the lane: %v; watching: %v", err, executor.LaneLen(ex, "g") == 1, executor.WatchesParent(last2))
	}
	gt.open()
	for _, h := range []*executor.Handle[string]{first, last, last2} {
		if r := wait(t, h); r.Status != executor.Success {
			t.Fatalf("%s: %+v", h.ID(), r)
		}
	}
	if executor.WatchesParent(last2) {
		t.Error("a task that ran still watches Submit's context")
	}
	close(ran)
	var names []string
	for n := range ran {
		names = append(names, n)
	}
	if fmt.Sprint(names) != "[first last last2]" {
		t.Fatalf("ran %v, want [first last last2]", names)
	}
	if s := groupStats(t, ex, "g"); s.Cancelled != 2 || s.Succeeded != 4 || s.Submitted != 6 {
		t.Fatalf("stats %+v", s.Counts)
	}
}

// Shutdown, ShutdownGroup, Close and SetGroupLimits close the lane: what it
// had admitted runs (or is counted), and nothing more goes in behind their
// back.
func TestLaneClosedByLifecycle(t *testing.T) {
	// laneWithTwo returns an executor whose group g has a blocker running,
	// a task waiting in its queue and one in its lane.
	laneWithTwo := func(t *testing.T) (*executor.Executor, *gate, []*executor.Handle[string]) {
		ex := newExec(t, []policy.Option{policy.WithMaxConcurrencyPerGroup(1)})
		gt := blockGroup(t, ex, "g")
		a := submit(t, ex, executor.Task[string]{Group: "g", Fn: gt.fn("a")})
		b := submit(t, ex, executor.Task[string]{Group: "g", Fn: gt.fn("b")})
		if executor.LaneLen(ex, "g") != 1 {
			t.Fatal("the lane is not in use")
		}
		return ex, gt, []*executor.Handle[string]{a, b}
	}
	for _, tc := range []struct {
		name    string
		shut    func(*executor.Executor) error
		refusal error
	}{
		{"ShutdownGroup", func(ex *executor.Executor) error { return ex.ShutdownGroup(bg, "g") }, executor.ErrGroupShutdown},
		{"Shutdown", func(ex *executor.Executor) error { return ex.Shutdown(bg) }, executor.ErrShutdown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ex, gt, hs := laneWithTwo(t)
			done := make(chan error)
			go func() { done <- tc.shut(ex) }()
			waitFor(t, func() bool { return !executor.LaneOpen(ex, "g") })
			if _, err := executor.Submit(ex, bg, executor.Task[string]{Group: "g", Fn: gt.fn("c")}); !errors.Is(err, tc.refusal) {
				t.Fatalf("Submit after %s: %v, want %v", tc.name, err, tc.refusal)
			}
			gt.open()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			for _, h := range hs {
				if r, ok := h.Result(); !ok || r.Status != executor.Success {
					t.Fatalf("after %s returned: %+v (complete: %v), want Success", tc.name, r, ok)
				}
			}
		})
	}
	t.Run("Close", func(t *testing.T) {
		ex, gt, hs := laneWithTwo(t)
		a, b := hs[0], hs[1]
		gt.open() // the blocker returns once Close cancels or releases it
		if err := ex.Close(); err != nil {
			t.Fatal(err)
		}
		c, err := executor.Submit(ex, bg, executor.Task[string]{Group: "g", Fn: gt.fn("c")})
		if !errors.Is(err, executor.ErrShutdown) {
			t.Fatalf("Submit after Close: %v, want ErrShutdown", err)
		}
		for _, h := range []*executor.Handle[string]{a, b, c} {
			if _, ok := h.Result(); !ok {
				t.Fatal("a handle not complete after Close returned")
			}
		}
	})
	t.Run("SetGroupLimits", func(t *testing.T) {
		ex := newExec(t, []policy.Option{policy.WithMaxConcurrencyPerGroup(1), policy.WithRejectionPolicy(policy.Abort)})
		gt := blockGroup(t, ex, "g")
		for range 3 {
			submit(t, ex, executor.Task[string]{Group: "g", Fn: gt.fn("w")})
		}
		if executor.LaneLen(ex, "g") != 2 {
			t.Fatal("the lane is not in use")
		}
		if err := ex.SetGroupLimits("g", policy.GroupLimits{MaxInFlight: 5, MaxConcurrency: 1, QueueThreshold: 4, Share: 1}); err != nil {
			t.Fatal(err)
		}
		// 4 in flight now: one more fits, then the limit refuses.
		submit(t, ex, executor.Task[string]{Group: "g", Fn: gt.fn("w")})
		_, err := executor.Submit(ex, bg, executor.Task[string]{Group: "g", Fn: gt.fn("w")})
		var re *executor.RejectedError
		if !errors.As(err, &re) || re.Limit != executor.LimitGroupInFlight {
			t.Fatalf("over the lowered limit: %v", err)
		}
	})
}

// waitFor polls cond until it holds (a hang guard, not a timing assertion).
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(time.Millisecond)
	}
}

// Lanes stay closed where a Submit must decide more under the lock, and
// open by default.
func TestLanesEnabledByConfiguration(t *testing.T) {
	for _, tc := range []struct {
		name  string
		popts []policy.Option
		eopts []executor.Option
		want  bool
	}{
		{"default", nil, nil, true},
		{"queue timeout", []policy.Option{policy.WithQueueTimeout(time.Second)}, nil, false},
		{"global queue threshold", []policy.Option{policy.WithGlobalQueueThreshold(100)}, nil, false},
		{"group breaker", nil, []executor.Option{executor.WithGroupBreaker(breaker.Settings{})}, false},
		{"cluster limiter", nil, []executor.Option{executor.WithGroupLimiter(newMemLimiter())}, false},
		{"group queue threshold", []policy.Option{policy.WithQueueThresholdPerGroup(5)}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ex := newExec(t, tc.popts, tc.eopts...)
			if got := executor.LanesEnabled(ex); got != tc.want {
				t.Fatalf("lanes enabled: %v, want %v", got, tc.want)
			}
		})
	}
}

// Submit tries the group whose lane opened last before its index of
// groups (ex.hint). The hint must follow that group and be dropped with
// it: a group recreated under the same key is another one, whose tasks
// and counts are its own.
func TestLaneHintFollowsTheGroup(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithMaxConcurrencyPerGroup(1)})
	if key, _ := executor.Hint(ex); key != "" {
		t.Fatalf("hint %q before any lane opened", key)
	}
	round := func(group string, n int) {
		t.Helper()
		gt := blockGroup(t, ex, group)
		hs := make([]*executor.Handle[int], n)
		for i := range n {
			hs[i] = submit(t, ex, executor.Task[int]{Group: group, Fn: func(context.Context) (int, error) { return i, nil }})
		}
		if got := executor.LaneLen(ex, group); got != n-1 {
			t.Fatalf("%s: lane holds %d tasks, want %d", group, got, n-1)
		}
		if key, current := executor.Hint(ex); key != group || !current {
			t.Fatalf("hint %q (current %v) once %s's lane opened", key, current, group)
		}
		gt.open()
		for i, h := range hs {
			if r := wait(t, h); r.Status != executor.Success || r.Value != i {
				t.Fatalf("%s task %d: %+v", group, i, r)
			}
		}
	}
	round("a", 3)
	round("b", 3)
	// Behind a waiting task of a, while the hint is b: the index finds a.
	gt := blockGroup(t, ex, "a")
	h1 := submit(t, ex, executor.Task[int]{Group: "a", Fn: func(context.Context) (int, error) { return 1, nil }})
	if key, _ := executor.Hint(ex); key != "a" {
		t.Fatalf("hint %q, want a", key)
	}
	round("b", 2)
	h2 := submit(t, ex, executor.Task[int]{Group: "a", Fn: func(context.Context) (int, error) { return 2, nil }})
	if got := executor.LaneLen(ex, "a"); got != 1 {
		t.Fatalf("a's lane holds %d tasks, want 1", got)
	}
	gt.open()
	for i, h := range []*executor.Handle[int]{h1, h2} {
		if r := wait(t, h); r.Status != executor.Success || r.Value != i+1 {
			t.Fatalf("a task %d: %+v", i+1, r)
		}
	}

	// The hinted group dropped: the hint goes with it.
	round("c", 2)
	executor.WaitIdle(ex)
	if !ex.EvictGroup("c") {
		t.Fatal("idle group c not dropped at once")
	}
	if key, _ := executor.Hint(ex); key != "" {
		t.Fatalf("hint %q after its group was dropped", key)
	}
	// c again is a new group: its lane, its counts.
	round("c", 2)
	if s := groupStats(t, ex, "c"); s.Submitted != 3 || s.Succeeded != 3 {
		t.Fatalf("recreated group c: %+v, want its own 3 submitted, 3 succeeded", s)
	}
	if msg := ex.CheckInvariants(); msg != "" {
		t.Fatal(msg)
	}
}
