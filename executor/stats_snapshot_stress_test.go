package executor_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// TestStatsSnapshotsStayConsistent reads Stats and GroupStats over and
// over while tasks come in by every way (Submit, Go, Do, ExecuteAll), are
// cancelled, refused and displaced, and groups are evicted, reclaimed and
// shut down, and checks each snapshot: no count below zero, outcomes
// never more than the tasks submitted, the outcome counts and Submitted
// never lower than in the reader's previous snapshot, idle groups among
// the groups kept; and, once everything has ended, every task counted
// once and nothing running or waiting.
func TestStatsSnapshotsStayConsistent(t *testing.T) {
	seededRuns(t, "STATS_SNAPSHOT", 3, 1, func(t *testing.T, seed uint64) {
		var v violations
		pol := policy.DiscardOldest
		if seed%2 == 0 {
			pol = policy.Abort
		}
		popts := []policy.Option{
			policy.WithGlobalMaxInFlight(4),
			policy.WithDefaultMaxConcurrency(2),
			policy.WithDefaultMaxInFlight(6),
			policy.WithDefaultQueueThreshold(3),
			policy.WithRejectionPolicy(pol),
		}
		if seed%3 == 0 {
			// Backlogs without bound: Go's light tasks and the lane.
			popts = append(popts, policy.WithDefaultMaxInFlight(policy.Unlimited), policy.WithDefaultQueueThreshold(policy.Unlimited))
		}
		ex := newExec(t, popts, executor.WithMaxIdleGroups(1))
		const groups = 5
		var calls atomic.Int64 // valid calls made: each is one task
		bg := newBackground()
		for range 2 { // readers at once
			var prev executor.Stats
			bg.loop(func() {
				s := ex.Stats()
				checkSnapshot(s, prev, v.add)
				prev = s
				g := fmt.Sprint("g", rand.IntN(groups))
				if gs, ok := ex.GroupStats(g); ok {
					checkGroupSnapshot(gs, v.add)
				}
			})
		}
		bg.loop(func() { ex.EvictGroup(fmt.Sprint("g", rand.IntN(groups))) })
		var wg sync.WaitGroup
		for w := range 4 {
			r := rand.New(rand.NewPCG(seed, uint64(w)))
			wg.Go(func() {
				for range 150 {
					statsStressCall(ex, r, groups, &calls)
				}
			})
		}
		waitAll(t, &wg, "the submitters")
		bg.halt()
		if err := ex.Shutdown(guardCtx(t)); err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
		v.check(t)
		s := ex.Stats()
		n := uint64(calls.Load())
		outcomes := s.Succeeded + s.Failed + s.Cancelled + s.Rejected
		if s.Submitted != n || outcomes != n || s.Running != 0 || s.RunningTasks != 0 || s.Waiting != 0 || s.Started > n {
			t.Errorf("%d tasks; after the shutdown: %+v", n, s)
		}
	})
}

// statsStressCall makes one call of a random kind for a random group,
// counting the tasks it submits in calls.
func statsStressCall(ex *executor.Executor, r *rand.Rand, groups int, calls *atomic.Int64) {
	group := fmt.Sprint("g", r.IntN(groups))
	work := func(ctx context.Context) error {
		for range rand.IntN(3) { // the global source: the task runs on another goroutine
			runtime.Gosched()
		}
		if rand.IntN(4) == 0 {
			return errors.New("failed")
		}
		return nil
	}
	ctx := context.Background()
	var cancel context.CancelFunc = func() {}
	if r.IntN(3) == 0 {
		ctx, cancel = context.WithCancel(ctx)
	}
	defer cancel()
	switch r.IntN(7) {
	case 6: // a burst into one group: a backlog of light tasks, and the lane, where limits allow
		for i := range 100 {
			calls.Add(1)
			if i%2 == 0 {
				_ = ex.Go(context.Background(), group, work)
			} else {
				_, _ = executor.Submit(ex, context.Background(), executor.Task[int]{Group: group, Fn: func(ctx context.Context) (int, error) { return 0, work(ctx) }})
			}
		}
	case 0:
		calls.Add(1)
		_ = ex.Go(ctx, group, work)
	case 1:
		calls.Add(1)
		_ = ex.Do(ctx, group, work)
	case 2:
		tasks := make([]executor.Task[int], 1+r.IntN(4))
		for i := range tasks {
			tasks[i] = executor.Task[int]{Group: fmt.Sprint("g", r.IntN(groups)), Weight: 1 + r.IntN(2), Fn: func(ctx context.Context) (int, error) { return 0, work(ctx) }}
		}
		calls.Add(int64(len(tasks)))
		if r.IntN(2) == 0 {
			cancel() // some tasks are cancelled waiting, some never admitted
		}
		_ = executor.ExecuteAll(ex, ctx, tasks)
	case 3:
		calls.Add(1)
		_ = ex.ShutdownGroup(ctx, group) // refused from now on, until evicted
		_ = ex.Go(ctx, group, work)
		ex.EvictGroup(group)
	default:
		calls.Add(1)
		h, _ := executor.Submit(ex, ctx, executor.Task[int]{Group: group, Weight: 1 + r.IntN(2), Fn: func(ctx context.Context) (int, error) { return 0, work(ctx) }})
		if r.IntN(3) == 0 {
			h.Cancel()
		}
		if r.IntN(2) == 0 {
			cancel()
		}
	}
}

// checkSnapshot reports what a Stats snapshot s, read after prev by the
// same goroutine, gets wrong.
func checkSnapshot(s, prev executor.Stats, violate func(string)) {
	outcomes := s.Succeeded + s.Failed + s.Cancelled + s.Rejected
	switch {
	case s.Running < 0 || s.RunningTasks < 0 || s.Waiting < 0 || s.Groups < 0 || s.IdleGroups < 0:
		violate(fmt.Sprintf("a count below zero: %+v", s))
	case s.RunningTasks > s.Running:
		violate(fmt.Sprintf("more tasks running than permits: %+v", s))
	case s.IdleGroups > s.Groups:
		violate(fmt.Sprintf("more idle groups than groups: %+v", s))
	case outcomes > s.Submitted || s.Started > s.Submitted:
		violate(fmt.Sprintf("more outcomes (%d) or starts than tasks submitted: %+v", outcomes, s.TaskCounts))
	case s.Submitted < prev.Submitted || s.Succeeded < prev.Succeeded || s.Failed < prev.Failed ||
		s.Cancelled < prev.Cancelled || s.Rejected < prev.Rejected || s.CallerRuns < prev.CallerRuns:
		violate(fmt.Sprintf("a cumulative count went down: %+v then %+v", prev.TaskCounts, s.TaskCounts))
	}
}

// checkGroupSnapshot reports what a GroupStats snapshot gets wrong.
func checkGroupSnapshot(gs executor.GroupStats, violate func(string)) {
	outcomes := gs.Succeeded + gs.Failed + gs.Cancelled + gs.Rejected
	switch {
	case gs.Running < 0 || gs.RunningTasks < 0 || gs.Waiting < 0 || gs.InFlight < 0:
		violate(fmt.Sprintf("a count below zero: %+v", gs))
	case gs.RunningTasks > gs.Running || gs.Running > gs.InFlight || gs.Waiting > gs.InFlight:
		violate(fmt.Sprintf("running or waiting beyond in flight: %+v", gs))
	case gs.InFlight > gs.MaxInFlight && gs.MaxInFlight >= 6:
		violate(fmt.Sprintf("in flight beyond the group's limit: %+v", gs))
	case outcomes+uint64(gs.RunningTasks+gs.Waiting) > gs.Submitted:
		violate(fmt.Sprintf("outcomes %d and %d tasks in flight, more than submitted: %+v", outcomes, gs.RunningTasks+gs.Waiting, gs))
	}
}
