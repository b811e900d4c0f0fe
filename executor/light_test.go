package executor_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// waitFor waits until cond holds, failing the test after a minute.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in a minute")
		}
	}
}

// order records the order in which tasks run.
type order struct {
	mu  sync.Mutex
	ran []int
	wg  sync.WaitGroup
}

// count reports how many of the functions have run.
func (o *order) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.ran)
}

func (o *order) fn(i int) func(context.Context) error {
	o.wg.Add(1)
	return func(context.Context) error {
		o.mu.Lock()
		o.ran = append(o.ran, i)
		o.mu.Unlock()
		o.wg.Done()
		return nil
	}
}

// TestGoLightTasksKeepOrder: Go tasks with context.Background wait as
// light tasks, and a group's tasks still start in the order they were
// admitted, whether Submit, Do or Go admitted them, and whether a light
// task starts by a handoff or as a job.
func TestGoLightTasksKeepOrder(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1), policy.WithDefaultMaxInFlight(policy.Unlimited)})
	g := newGate()
	defer g.open()
	submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("holder")})
	g.waitStarted(t, 1)
	var o order
	goRange := func(from, to int) {
		for i := from; i < to; i++ {
			if err := ex.Go(bg, "g", o.fn(i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	goRange(0, 50)
	if n, _ := ex.LightQueued("g"); n != 50 {
		t.Fatalf("%d light tasks queued, want 50", n)
	}
	fn50 := o.fn(50)
	submit(t, ex, executor.Task[string]{Group: "g", Fn: func(ctx context.Context) (string, error) { return "", fn50(ctx) }})
	if n, _ := ex.LightQueued("g"); n != 0 {
		t.Fatalf("%d light tasks queued behind a task of Submit, want them all made tasks", n)
	}
	goRange(51, 100)
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	if err := ex.Go(ctx, "g", o.fn(100)); err != nil { // not light: a context that may end
		t.Fatal(err)
	}
	goRange(101, 150)
	checkGroupUse(t, ex, "g", 1, 150, 151)
	doDone := make(chan error, 1)
	fn150 := o.fn(150)
	go func() { doDone <- ex.Do(bg, "g", fn150) }()
	waitFor(t, func() bool { return groupStats(t, ex, "g").Waiting == 151 })
	goRange(151, 200)

	g.open()
	waitAll(t, &o.wg, "every Go task ran")
	if err := recv(t, doDone, "the Do call ran in its turn"); err != nil {
		t.Fatal(err)
	}
	if !slices.IsSorted(o.ran) || len(o.ran) != 200 {
		t.Fatalf("ran %v, want 0 to 199 in order", o.ran)
	}
	waitFor(t, func() bool { return groupStats(t, ex, "g").InFlight == 0 })
	checkGroupUse(t, ex, "g", 0, 0, 0)
}

// TestGoHandsOff: a reused Go task that finishes hands its permits to the
// light task at its group's head and runs it, so that a backlog of light
// tasks behind a Go task starts each of them by a handoff; behind a task
// of Submit, all but the first.
func TestGoHandsOff(t *testing.T) {
	for _, holder := range []string{"Go", "Submit"} {
		t.Run(holder, func(t *testing.T) {
			ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1), policy.WithDefaultMaxInFlight(policy.Unlimited)})
			release := make(chan struct{})
			hold := func(context.Context) error { <-release; return nil }
			if holder == "Go" {
				if err := ex.Go(bg, "g", hold); err != nil {
					t.Fatal(err)
				}
			} else {
				submit(t, ex, executor.Task[int]{Group: "g", Fn: func(ctx context.Context) (int, error) { return 0, hold(ctx) }})
			}
			waitFor(t, func() bool { return groupStats(t, ex, "g").Running == 1 })
			var o order
			for i := range 100 {
				if err := ex.Go(bg, "g", o.fn(i)); err != nil {
					t.Fatal(err)
				}
			}
			before := executor.HandOffs()
			close(release)
			o.wg.Wait()
			want := int64(100)
			if holder == "Submit" {
				want = 99
			}
			waitFor(t, func() bool { return groupStats(t, ex, "g").InFlight == 0 })
			if got := executor.HandOffs() - before; got != want {
				t.Errorf("%d handoffs, want %d", got, want)
			}
			if !slices.IsSorted(o.ran) || len(o.ran) != 100 {
				t.Fatalf("ran %v, want 0 to 99 in order", o.ran)
			}
			if s := groupStats(t, ex, "g"); s.Started != 101 || s.Succeeded != 101 {
				t.Errorf("counts %+v", s.TaskCounts)
			}
		})
	}
}

// TestGoLightTasksOnlyWhenNothingElseIsNeeded: a Go task waits as its
// function alone only when the executor needs nothing else of it while it
// waits: no listener, no queue timeout, no breaker, no cluster limiter.
func TestGoLightTasksOnlyWhenNothingElseIsNeeded(t *testing.T) {
	lim := newMemLimiter()
	lim.avail[""] = 8 // the global limiter's key
	for _, tc := range []struct {
		name  string
		popts []policy.Option
		eopts []executor.Option
		light bool
	}{
		{"plain", nil, nil, true},
		{"listener", nil, []executor.Option{executor.WithListener(executor.ListenerFuncs{})}, false},
		{"queue timeout", []policy.Option{policy.WithQueueTimeout(time.Hour)}, nil, false},
		{"breaker", nil, []executor.Option{executor.WithGroupBreaker(breaker.Settings{})}, false},
		{"cluster", nil, []executor.Option{executor.WithGlobalLimiter(lim)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			popts := append([]policy.Option{policy.WithDefaultMaxConcurrency(1)}, tc.popts...)
			ex := newExec(t, popts, tc.eopts...)
			g := newGate()
			defer g.open()
			submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("holder")})
			g.waitStarted(t, 1)
			var o order
			if err := ex.Go(bg, "g", o.fn(0)); err != nil {
				t.Fatal(err)
			}
			n, allowed := ex.LightQueued("g")
			if allowed != tc.light || n != map[bool]int{true: 1, false: 0}[tc.light] {
				t.Errorf("light tasks allowed %v, %d queued; want %v", allowed, n, tc.light)
			}
			checkGroupUse(t, ex, "g", 1, 1, 2)
			g.open()
			o.wg.Wait()
		})
	}
}

// TestGoLightTasksDisplaced: under DiscardOldest, a full queue gives up its
// oldest tasks to a new one, jobs first, then the light tasks behind them,
// which stay light until then; the displaced never run and count as
// rejected.
func TestGoLightTasksDisplaced(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1), policy.WithDefaultMaxInFlight(policy.Unlimited),
		policy.WithDefaultQueueThreshold(3), policy.WithRejectionPolicy(policy.DiscardOldest)})
	g := newGate()
	defer g.open()
	submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("holder")})
	g.waitStarted(t, 1)
	oldest := submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("oldest")})
	var o order
	for i := range 5 {
		if err := ex.Go(bg, "g", o.fn(i)); err != nil {
			t.Fatal(err)
		}
	}
	if r := wait(t, oldest); r.Status != executor.Rejected || !errors.Is(r.Err, executor.ErrDisplaced) {
		t.Fatalf("the oldest waiting task: %+v, want displaced", r)
	}
	if n, _ := ex.LightQueued("g"); n != 3 {
		t.Fatalf("%d light tasks queued, want the 3 newest", n)
	}
	checkGroupUse(t, ex, "g", 1, 3, 4)
	o.wg.Add(-2) // the two oldest light tasks never run
	g.open()
	o.wg.Wait()
	waitFor(t, func() bool { return groupStats(t, ex, "g").InFlight == 0 })
	if !slices.Equal(o.ran, []int{2, 3, 4}) {
		t.Fatalf("ran %v, want [2 3 4]", o.ran)
	}
	if s := groupStats(t, ex, "g"); s.Rejected != 3 || s.Succeeded != 4 {
		t.Errorf("counts %+v, want 3 rejected, 4 succeeded", s.TaskCounts)
	}
}

// TestGoLightTasksCancelledByClose: Close cancels waiting light tasks as
// any waiting task: they never run, and count as cancelled.
func TestGoLightTasksCancelledByClose(t *testing.T) {
	p, err := policy.New(policy.WithDefaultMaxConcurrency(1), policy.WithDefaultMaxInFlight(policy.Unlimited))
	if err != nil {
		t.Fatal(err)
	}
	ex, err := executor.New(p)
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	if err := ex.Go(bg, "g", func(ctx context.Context) error { close(started); <-ctx.Done(); return ctx.Err() }); err != nil {
		t.Fatal(err)
	}
	recv(t, started, "the Go task started")
	ran := make(chan int, 10)
	for i := range 10 {
		if err := ex.Go(bg, "g", func(context.Context) error { ran <- i; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := ex.LightQueued("g"); n != 10 {
		t.Fatalf("%d light tasks queued, want 10", n)
	}
	ex.Close()
	if n, _ := ex.LightQueued("g"); n != 0 {
		t.Fatalf("%d light tasks queued after Close", n)
	}
	if len(ran) != 0 {
		t.Fatalf("%d light tasks ran after Close", len(ran))
	}
	if s := ex.Stats(); s.Cancelled != 11 || s.Waiting != 0 || s.Running != 0 {
		t.Errorf("stats %+v, want 11 cancelled", s)
	}
	if err := ex.Go(bg, "g", func(context.Context) error { return nil }); !errors.Is(err, executor.ErrShutdown) {
		t.Errorf("Go after Close: %v", err)
	}
}

// TestGoHandOffDrainsLoweredLimits: a finishing Go task hands its permits
// to the light task at its group's head only where the general path would
// start it: after a limit is lowered below what runs, nothing starts until
// the permits in use are under it.
func TestGoHandOffDrainsLoweredLimits(t *testing.T) {
	for _, lower := range []string{"global", "group"} {
		t.Run(lower, func(t *testing.T) {
			ex := newExec(t, []policy.Option{policy.WithGlobalMaxInFlight(4), policy.WithDefaultMaxConcurrency(4),
				policy.WithDefaultMaxInFlight(policy.Unlimited)})
			// Every task blocks until released, or until Close cancels it.
			block := func(ctx context.Context, ch chan struct{}) {
				select {
				case <-ch:
				case <-ctx.Done():
				}
			}
			var release [4]chan struct{}
			for i := range release {
				release[i] = make(chan struct{})
				if err := ex.Go(bg, "g", func(ctx context.Context) error { block(ctx, release[i]); return nil }); err != nil {
					t.Fatal(err)
				}
			}
			waitFor(t, func() bool { return groupStats(t, ex, "g").Running == 4 })
			// Two of them run at once under the lowered limit: each is
			// held until the next has started, so that the order in which
			// they run is the order in which they start.
			var hold [4]chan struct{}
			var o order
			for i := range 4 {
				hold[i] = make(chan struct{})
				fn := o.fn(i)
				if err := ex.Go(bg, "g", func(ctx context.Context) error { fn(ctx); block(ctx, hold[i]); return nil }); err != nil {
					t.Fatal(err)
				}
			}
			ran := func(n int) {
				t.Helper()
				waitFor(t, func() bool { return o.count() == n })
			}
			var err error
			if lower == "global" {
				err = ex.SetGlobalMaxInFlight(2)
			} else {
				err = ex.SetGroupLimits("g", limits(policy.Unlimited, 2, policy.Unlimited, 1))
			}
			if err != nil {
				t.Fatal(err)
			}
			finish := func(i int, running, waiting int) {
				t.Helper()
				close(release[i])
				waitFor(t, func() bool { return groupStats(t, ex, "g").Succeeded >= uint64(i+1) })
				checkGroupUse(t, ex, "g", running, waiting, running+waiting)
			}
			finish(0, 3, 4) // over the limit: no start
			finish(1, 2, 4) // at the limit: no start
			finish(2, 2, 3) // under once released: the head starts
			ran(1)
			finish(3, 2, 2)
			ran(2)
			for i := range hold {
				close(hold[i])
				if i+3 <= len(hold) {
					ran(i + 3)
				}
			}
			o.wg.Wait()
			waitFor(t, func() bool { return groupStats(t, ex, "g").InFlight == 0 })
			if !slices.IsSorted(o.ran) || len(o.ran) != 4 {
				t.Fatalf("ran %v, want 0 to 3 in order", o.ran)
			}
		})
	}
}
