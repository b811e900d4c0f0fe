package executor_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// Light tasks (go.go): a Go call with context.Background that finds its
// group's lane open leaves only its function there. These tests pin what
// that must not change: order with the group's other tasks, limits, counts,
// and the outcome of tasks that never start. Each first checks that its
// tasks really came in light (LightAdmitted, or the lane's length while
// nothing moves), so that none passes by the job path instead.

// runOrder records the order in which its tasks run.
type runOrder struct {
	mu    sync.Mutex
	order []int
}

func (r *runOrder) goFn(i int) func(context.Context) error {
	return func(context.Context) error {
		r.mu.Lock()
		r.order = append(r.order, i)
		r.mu.Unlock()
		return nil
	}
}

func (r *runOrder) taskFn(i int) func(context.Context) (int, error) {
	return func(ctx context.Context) (int, error) { return i, r.goFn(i)(ctx) }
}

func (r *runOrder) check(t *testing.T, want []int) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.order) != len(want) {
		t.Fatalf("%d tasks ran, want %d: %v", len(r.order), len(want), r.order)
	}
	for i := range want {
		if r.order[i] != want[i] {
			t.Fatalf("start %d was task %d, want %d: %v", i, r.order[i], want[i], r.order)
		}
	}
}

// seq returns from, from+1, ..., to-1.
func seq(from, to int) []int {
	var s []int
	for i := from; i < to; i++ {
		s = append(s, i)
	}
	return s
}

func TestLightTasksKeepOrderWithOtherTasks(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithMaxConcurrencyPerGroup(1)})
	gt := blockGroup(t, ex, "g")
	var rec runOrder
	i := 0
	goN := func(n int) {
		for range n {
			if err := ex.Go(bg, "g", rec.goFn(i)); err != nil {
				t.Fatalf("Go %d: %v", i, err)
			}
			i++
		}
	}
	// The first waits through the locked path and opens the lane; the
	// others leave their functions in it.
	goN(50)
	if got := executor.LaneLen(ex, "g"); got != 49 {
		t.Fatalf("lane holds %d, want 49: the light path was not used", got)
	}
	// A task with a handle, then one whose context can be cancelled, each
	// behind light tasks still in the lane, then more light tasks.
	h := submit(t, ex, executor.Task[int]{Group: "g", Fn: rec.taskFn(i)})
	i++
	goN(30)
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	if err := ex.Go(ctx, "g", rec.goFn(i)); err != nil {
		t.Fatal(err)
	}
	i++
	goN(30)
	// Statistics move the lane to the queue: the light tasks wait there
	// as functions, and count as any other.
	if s := groupStats(t, ex, "g"); s.Waiting != i || s.Submitted != uint64(i+1) || s.InFlight != i+1 {
		t.Fatalf("group stats %+v, want %d waiting, %d submitted, %d in flight", s, i, i+1, i+1)
	}
	// A task with a handle finds the lane empty and open: it comes in
	// there, behind the light tasks in the queue, and light tasks behind it.
	h2 := submit(t, ex, executor.Task[int]{Group: "g", Fn: rec.taskFn(i)})
	i++
	goN(20)
	if got := executor.LaneLen(ex, "g"); got != 21 {
		t.Fatalf("lane holds %d, want 21", got)
	}
	// Moved to the queue behind the light tasks there.
	if s := groupStats(t, ex, "g"); s.Waiting != i {
		t.Fatalf("group stats %+v, want %d waiting", s, i)
	}
	light := executor.LightAdmitted(ex)
	if light < 100 {
		t.Fatalf("%d light tasks admitted, want most of the %d Go calls", light, i-2)
	}
	gt.open()
	if r := wait(t, h); r.Status != executor.Success || r.Value != 50 {
		t.Fatalf("%+v", r)
	}
	if r := wait(t, h2); r.Status != executor.Success || r.Value != 112 {
		t.Fatalf("%+v", r)
	}
	waitIdle(t, ex)
	rec.check(t, seq(0, i))
	if s := ex.Stats(); s.Succeeded != uint64(i+1) || s.Submitted != uint64(i+1) {
		t.Fatalf("stats %+v, want %d succeeded", s, i+1)
	}
}

func TestLightTasksRespectLimits(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opt    policy.Option
		accept int
		limit  executor.Limit
	}{
		{"queue threshold", policy.WithQueueThresholdPerGroup(5), 5, executor.LimitGroupQueue},
		{"in-flight", policy.WithMaxInFlightPerGroup(6), 5, executor.LimitGroupInFlight}, // the blocker holds 1
	} {
		t.Run(tc.name, func(t *testing.T) {
			ex := newExec(t, []policy.Option{policy.WithMaxConcurrencyPerGroup(1), policy.WithRejectionPolicy(policy.Abort), tc.opt})
			gt := blockGroup(t, ex, "g")
			var rec runOrder
			for i := range tc.accept + 3 {
				err := ex.Go(bg, "g", rec.goFn(i))
				if i < tc.accept {
					if err != nil {
						t.Fatalf("task %d refused: %v", i, err)
					}
					// The first waits through the locked path; the
					// others come in light, until the lane has no room.
					if got := executor.LaneLen(ex, "g"); i == tc.accept-1 && got != tc.accept-1 {
						t.Fatalf("lane holds %d, want %d", got, tc.accept-1)
					}
					continue
				}
				var re *executor.RejectedError
				if !errors.As(err, &re) || re.Limit != tc.limit {
					t.Fatalf("task %d: %v, want a refusal at %v", i, err, tc.limit)
				}
			}
			gt.open()
			waitIdle(t, ex)
			rec.check(t, seq(0, tc.accept))
			if s := ex.Stats(); s.Succeeded != uint64(tc.accept+1) || s.Rejected != 3 {
				t.Fatalf("stats %+v, want %d succeeded, 3 rejected", s.Counts, tc.accept+1)
			}
		})
	}
}

// DiscardOldest displaces the oldest waiting tasks, light ones included,
// and counts them Rejected; they never run.
func TestLightTasksDisplaced(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithMaxConcurrencyPerGroup(1), policy.WithQueueThresholdPerGroup(3),
		policy.WithRejectionPolicy(policy.DiscardOldest)})
	gt := blockGroup(t, ex, "g")
	var rec runOrder
	for i := range 3 {
		if err := ex.Go(bg, "g", rec.goFn(i)); err != nil {
			t.Fatal(err)
		}
	}
	if got := executor.LaneLen(ex, "g"); got != 2 {
		t.Fatalf("lane holds %d, want 2", got)
	}
	for i := 3; i < 5; i++ { // each displaces the oldest
		if err := ex.Go(bg, "g", rec.goFn(i)); err != nil {
			t.Fatal(err)
		}
	}
	gt.open()
	waitIdle(t, ex)
	rec.check(t, []int{2, 3, 4})
	if s := ex.Stats(); s.Succeeded != 4 || s.Rejected != 2 {
		t.Fatalf("stats %+v, want 4 succeeded, 2 rejected", s.Counts)
	}
}

// Close cancels waiting light tasks, in the lane or in the queue: they
// count Cancelled and never run.
func TestCloseCancelsLightTasks(t *testing.T) {
	p, err := policy.New(policy.WithMaxConcurrencyPerGroup(1))
	if err != nil {
		t.Fatal(err)
	}
	ex, err := executor.New(p)
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	blocker := func(ctx context.Context) error { close(started); <-ctx.Done(); return ctx.Err() }
	if err := ex.Go(bg, "g", blocker); err != nil {
		t.Fatal(err)
	}
	<-started
	var rec runOrder
	for i := range 100 {
		if i == 60 {
			ex.Stats() // the first 60 move to the queue, the rest stay in the lane
		}
		if err := ex.Go(bg, "g", rec.goFn(i)); err != nil {
			t.Fatal(err)
		}
	}
	if light := executor.LightAdmitted(ex); light != 59 {
		t.Fatalf("%d light tasks moved to the queue, want 59", light)
	}
	if got := executor.LaneLen(ex, "g"); got != 40 {
		t.Fatalf("lane holds %d, want 40", got)
	}
	ex.Close()
	rec.check(t, nil)
	s := ex.Stats()
	if s.Cancelled != 101 || s.Submitted != 101 || s.Waiting != 0 || s.Running != 0 {
		t.Fatalf("stats %+v, want 101 cancelled, nothing left", s)
	}
	if msg := ex.CheckInvariants(); msg != "" {
		t.Fatal(msg)
	}
}

// waitIdle shuts ex down and waits until every admitted task has ended.
func waitIdle(t *testing.T, ex *executor.Executor) {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg, 10*time.Second) // a hang guard
	defer cancel()
	if err := ex.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

// A finish that hands its permits to the light task at its group's head
// (handOffLocked) must start exactly what the general path (release, then
// start what fits) would. With a global limit of 1 one task runs at a time,
// so the start order is fully determined by the dispatch rules (FIFO within
// a group, deficit round robin across groups): it must be the same with
// handoffs and without, for a mix of groups, shares, light tasks, tasks with
// handles and Go tasks whose context can be cancelled.
func TestHandOffStartsWhatTheGeneralPathWould(t *testing.T) {
	run := func(handOff bool) ([]string, uint64) {
		defer executor.SetHandOff(executor.SetHandOff(handOff))
		p, err := policy.New(policy.WithGlobalMaxInFlight(1), policy.WithMaxConcurrencyPerGroup(1),
			policy.WithGroupShare("b", 2))
		if err != nil {
			t.Fatal(err)
		}
		ex, err := executor.New(p)
		if err != nil {
			t.Fatal(err)
		}
		defer ex.Close()
		var mu sync.Mutex
		var order []string
		record := func(name string) { mu.Lock(); order = append(order, name); mu.Unlock() }
		goTask := func(name string) func(context.Context) error {
			return func(context.Context) error { record(name); return nil }
		}
		gt := newGate()
		submit(t, ex, executor.Task[string]{Group: "x", Fn: gt.fn("blocker")})
		gt.waitStarted(t, 1)
		ctx, cancel := context.WithCancel(bg)
		defer cancel()
		for i := range 24 {
			for _, grp := range []string{"a", "b", "c"} {
				if grp != "a" && i >= 12 {
					continue // a's tail runs alone: handoffs
				}
				name := fmt.Sprint(grp, i)
				var err error
				switch {
				case grp == "c" && i%4 == 3:
					_, err = executor.Submit(ex, bg, executor.Task[int]{Group: grp, Fn: func(context.Context) (int, error) { record(name); return 0, nil }})
				case grp == "b" && i%5 == 4:
					err = ex.Go(ctx, grp, goTask(name))
				default:
					err = ex.Go(bg, grp, goTask(name))
				}
				if err != nil {
					t.Fatal(err)
				}
				if i == 6 && grp == "a" {
					ex.Stats() // moves the lanes to the queues: light tasks in both
				}
			}
		}
		gt.open()
		waitIdle(t, ex)
		mu.Lock()
		defer mu.Unlock()
		return order, executor.LightAdmitted(ex)
	}
	with, light := run(true)
	without, _ := run(false)
	if light < 20 {
		t.Fatalf("%d light tasks, want most of them", light)
	}
	if len(with) != 48 || fmt.Sprint(with) != fmt.Sprint(without) {
		t.Fatalf("start order with handoffs\n%v\nwithout\n%v", with, without)
	}
}

// A finish hands nothing to a light task while its group runs over a
// lowered concurrency limit: the task starts only once the group is under
// it, as the general path would have it. (Lowering the limit makes the head
// a job, and nothing starts while over it, so the handoff's own check of
// the limits is a safeguard this cannot reach; the outcome is what counts.)
func TestHandOffHonoursALoweredLimit(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithMaxConcurrencyPerGroup(2)})
	release := [2]chan struct{}{make(chan struct{}), make(chan struct{})}
	var running, most, ran atomic.Int32
	started := make(chan struct{}, 2)
	for i := range 2 {
		if err := ex.Go(bg, "g", func(context.Context) error { started <- struct{}{}; <-release[i]; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	<-started
	<-started
	for range 5 {
		err := ex.Go(bg, "g", func(context.Context) error {
			n := running.Add(1)
			defer running.Add(-1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			ran.Add(1)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := executor.LaneLen(ex, "g"); got != 4 {
		t.Fatalf("lane holds %d, want 4", got)
	}
	if err := ex.SetGroupLimits("g", policy.GroupLimits{MaxInFlight: policy.Unlimited, MaxConcurrency: 1,
		QueueThreshold: policy.Unlimited, Share: 1}); err != nil {
		t.Fatal(err)
	}
	close(release[0])
	// The first blocker's finish leaves the group at its new limit, 1: no
	// waiting task may start until the second finishes.
	deadline := time.Now().Add(10 * time.Second) // a hang guard
	for s, _ := ex.GroupStats("g"); s.RunningTasks != 1; s, _ = ex.GroupStats("g") {
		if time.Now().After(deadline) {
			t.Fatalf("the first blocker did not finish: %+v", s)
		}
		runtime.Gosched()
	}
	if n := ran.Load(); n != 0 {
		t.Fatalf("%d tasks started over the lowered limit", n)
	}
	close(release[1])
	waitIdle(t, ex)
	if ran.Load() != 5 || most.Load() != 1 {
		t.Fatalf("%d ran, at most %d at once; want 5, 1 at a time", ran.Load(), most.Load())
	}
}

// A finish hands its permits to its group's light head only while no other
// group waits for global room, and charges the group's deficit as the
// general path would. Group a (share 2) runs alone, one task at a time
// (global limit 1): a1 starts on a0's release and begins a's turn, a2 takes
// over a1's permits at a1's finish. While a2 runs, b0 comes to wait for
// global room. At a2's finish a's turn has no credit left, so b0 starts
// before a3: a handoff there, or a turn given a share it did not pay for,
// would start a3 first.
func TestHandOffLeavesRoomToWaitingGroups(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithGlobalMaxInFlight(1), policy.WithMaxConcurrencyPerGroup(1),
		policy.WithGroupShare("a", 2)})
	var mu sync.Mutex
	var order []string
	record := func(name string) func(context.Context) error {
		return func(context.Context) error { mu.Lock(); order = append(order, name); mu.Unlock(); return nil }
	}
	a0 := newGate()
	submit(t, ex, executor.Task[string]{Group: "a", Fn: a0.fn("a0")})
	a0.waitStarted(t, 1)
	a2 := newGate()
	defer a2.open()
	fns := []func(context.Context) error{
		record("a1"), // the first to wait: a job, through the locked path
		func(ctx context.Context) error { // light, as the rest
			record("a2")(ctx)
			_, err := a2.fn("a2")(ctx)
			return err
		},
		record("a3"), record("a4"),
	}
	for _, fn := range fns {
		if err := ex.Go(bg, "a", fn); err != nil {
			t.Fatal(err)
		}
	}
	if got := executor.LaneLen(ex, "a"); got != 3 {
		t.Fatalf("lane holds %d, want 3", got)
	}
	a0.open()
	a2.waitStarted(t, 1)
	if err := ex.Go(bg, "b", record("b0")); err != nil {
		t.Fatal(err)
	}
	a2.open()
	// Not Shutdown yet: a drain under way takes the general path.
	// Wait for the five and a0, with a hang guard.
	deadline := time.Now().Add(10 * time.Second)
	for ex.Stats().Succeeded < 6 {
		if time.Now().After(deadline) {
			t.Fatalf("tasks did not finish: %+v", ex.Stats())
		}
		runtime.Gosched()
	}
	mu.Lock()
	defer mu.Unlock()
	if got, want := fmt.Sprint(order), "[a1 a2 b0 a3 a4]"; got != want {
		t.Fatalf("start order %s, want %s", got, want)
	}
}
