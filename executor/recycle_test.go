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

// A Go task with context.Background is reused once it completes: after the
// first, Go allocates nothing. Any other context gets a task of its own.
func TestGoReusesTasks(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithGlobalMaxInFlight(4)})
	fn := func(context.Context) error { return nil }
	run := func(ctx context.Context) func() {
		return func() {
			if err := ex.Go(ctx, "g", fn); err != nil {
				t.Fatal(err)
			}
			executor.WaitIdle(ex)
		}
	}
	run(context.Background())()
	if n, aging := executor.SpareTasks(ex); n == 0 || !aging {
		t.Fatalf("after a Go task completed: %d spare tasks (aging %v), want 1 and aging", n, aging)
	}
	if a := testing.AllocsPerRun(100, run(context.Background())); a >= 0.5 {
		t.Errorf("Go with context.Background: %.2f allocations per task, want 0", a)
	}
	type key struct{}
	withValue := context.WithValue(context.Background(), key{}, 1)
	if a := testing.AllocsPerRun(100, run(withValue)); a < 1 {
		t.Errorf("Go with a context carrying a value: %.2f allocations per task, want a task each", a)
	}
	if msg := ex.CheckInvariants(); msg != "" {
		t.Fatal(msg)
	}
}

// A reused task's Fn may keep its context: it is its group's, so it still
// hears of its own group's stop, not of the group whose task reuses it.
func TestGoKeptContextIsItsGroups(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithGlobalMaxInFlight(8), policy.WithMaxConcurrencyPerGroup(8)})
	bg := context.Background()
	var kept context.Context
	if err := ex.Go(bg, "a", func(ctx context.Context) error { kept = ctx; return nil }); err != nil {
		t.Fatal(err)
	}
	executor.WaitIdle(ex)
	keptB := make([]context.Context, 50)
	for i := range keptB {
		if err := ex.Go(bg, "b", func(ctx context.Context) error { keptB[i] = ctx; return nil }); err != nil {
			t.Fatal(err)
		}
		executor.WaitIdle(ex)
	}
	done := kept.Done()
	if kept.Err() != nil {
		t.Fatalf("kept context of a: %v before any stop", kept.Err())
	}

	// Stop group a while a task of it runs: its tasks' contexts end.
	started := make(chan struct{})
	stopped := make(chan error, 1)
	if err := ex.Go(bg, "a", func(ctx context.Context) error {
		close(started)
		<-ctx.Done()
		stopped <- ctx.Err()
		return ctx.Err()
	}); err != nil {
		t.Fatal(err)
	}
	<-started
	over, cancel := context.WithCancel(bg)
	cancel()
	if err := ex.ShutdownGroup(over, "a"); !errors.Is(err, context.Canceled) {
		t.Fatalf("ShutdownGroup with an ended context: %v", err)
	}
	if err := <-stopped; !errors.Is(err, context.Canceled) {
		t.Fatalf("running task of a: context error %v, want Canceled", err)
	}
	<-done // closed by a's stop, or this blocks
	if !errors.Is(kept.Err(), context.Canceled) {
		t.Errorf("kept context of a: Err %v after a stopped, want Canceled", kept.Err())
	}
	for i, ctx := range keptB {
		if ctx.Err() != nil {
			t.Fatalf("kept context %d of b: Err %v, but only a stopped", i, ctx.Err())
		}
		select {
		case <-ctx.Done():
			t.Fatalf("kept context %d of b: Done closed, but only a stopped", i)
		default:
		}
		if v, ok := ctx.Deadline(); ok || !v.IsZero() || ctx.Value("k") != nil {
			t.Fatalf("kept context %d of b has a deadline or a value", i)
		}
	}
}

// Spare tasks do not outlive two collections unused, and Close drops them.
func TestGoSparesAge(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithGlobalMaxInFlight(4)})
	var wg sync.WaitGroup
	for range 100 {
		wg.Add(1)
		if err := ex.Go(context.Background(), "g", func(context.Context) error { wg.Done(); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	executor.WaitIdle(ex)
	if n, _ := executor.SpareTasks(ex); n == 0 {
		t.Fatal("no spare task after 100 Go tasks completed")
	}
	// Cleanups run on a goroutine of their own after a collection: give
	// them turns, a bounded number of collections.
	n, aging := 0, true
	for i := 0; i < 1000 && (n > 0 || aging); i++ {
		runtime.GC()
		runtime.Gosched()
		n, aging = executor.SpareTasks(ex)
	}
	if n != 0 || aging {
		t.Fatalf("after many collections with no Go call: %d spare tasks (aging %v), want none", n, aging)
	}

	// Close drops what is kept.
	for range 10 {
		wg.Add(1)
		if err := ex.Go(context.Background(), "g", func(context.Context) error { wg.Done(); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	executor.WaitIdle(ex)
	if err := ex.Close(); err != nil {
		t.Fatal(err)
	}
	if n, _ := executor.SpareTasks(ex); n != 0 {
		t.Fatalf("after Close: %d spare tasks, want none", n)
	}
}

// Many goroutines start Go tasks with context.Background, so that tasks are
// reused while others run, panic, fail, read their contexts, and while
// groups are stopped and evicted. Every accepted task runs at most once
// (each has a Fn of its own), the Fns that ran are the tasks started,
// within their limits, and a refused one never runs; the invariants hold
// throughout, spare tasks included.
func TestGoReuseStress(t *testing.T) {
	const (
		submitters = 8
		perSub     = 3000
		groups     = 12
		conc       = 3
		global     = 16
	)
	ex := newExec(t, []policy.Option{
		policy.WithGlobalMaxInFlight(global),
		policy.WithMaxConcurrencyPerGroup(conc),
		policy.WithMaxInFlightPerGroup(policy.Unlimited),
		policy.WithQueueThresholdPerGroup(policy.Unlimited),
	})
	var viol violations
	bgLoop := newBackground()
	bgLoop.checkInvariants(ex, viol.add)
	rnd := sharedRand(16)
	bgLoop.loop(sometimes(rnd, 5000, func() {
		g := fmt.Sprintf("g%d", rnd(groups))
		switch rnd(3) {
		case 0:
			ex.EvictGroup(g)
		case 1:
			over, cancel := context.WithCancel(context.Background())
			cancel()
			_ = ex.ShutdownGroup(over, g) // stops its tasks
			ex.EvictGroup(g)              // lifts the shutdown
		default:
			runtime.Gosched()
		}
	}))

	runs := make([]atomic.Int32, submitters*perSub)
	accepted := make([]bool, submitters*perSub)
	var running [groups]atomic.Int32
	var inGlobal atomic.Int32
	var wg sync.WaitGroup
	for s := range submitters {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(s), 7))
			for i := range perSub {
				id := s*perSub + i
				gi := r.IntN(groups)
				kind := r.IntN(5)
				err := ex.Go(context.Background(), fmt.Sprintf("g%d", gi), func(ctx context.Context) error {
					runs[id].Add(1)
					if n := running[gi].Add(1); n > conc {
						viol.add(fmt.Sprintf("group g%d runs %d tasks, limit %d", gi, n, conc))
					}
					if n := inGlobal.Add(1); n > global {
						viol.add(fmt.Sprintf("%d tasks run, global limit %d", n, global))
					}
					defer running[gi].Add(-1)
					defer inGlobal.Add(-1)
					switch kind {
					case 0:
						panic("task panics")
					case 1:
						return errors.New("task fails")
					case 2:
						select {
						case <-ctx.Done():
							return ctx.Err()
						default:
						}
						runtime.Gosched()
					case 3:
						if err := ctx.Err(); err != nil && !errors.Is(err, context.Canceled) {
							viol.add("run context error " + err.Error())
						}
					}
					return nil
				})
				accepted[id] = err == nil
				if i%4 == 0 {
					runtime.Gosched() // let tasks run, and be reused
				}
				if err != nil && !errors.Is(err, executor.ErrRejected) && !errors.Is(err, executor.ErrGroupShutdown) {
					viol.add("Go: " + err.Error())
				}
			}
		})
	}
	wg.Wait()
	bgLoop.halt()
	if err := ex.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	viol.check(t)

	// An accepted task runs once, or never if a group's stop cancelled
	// it while it waited: the runs add up to the starts.
	acc, ran := 0, 0
	for id := range runs {
		n := runs[id].Load()
		switch {
		case n > 1:
			t.Fatalf("task %d ran %d times", id, n)
		case !accepted[id] && n != 0:
			t.Fatalf("refused task %d ran", id)
		}
		if accepted[id] {
			acc++
		}
		ran += int(n)
	}
	st := ex.Stats()
	if st.Counts.Started != uint64(ran) {
		t.Fatalf("stats count %d starts, %d Fns ran", st.Counts.Started, ran)
	}
	if got := st.Counts.Succeeded + st.Counts.Failed + st.Counts.Cancelled; got != uint64(acc) {
		t.Fatalf("stats count %d outcomes, %d tasks accepted", got, acc)
	}
	t.Logf("%d tasks accepted, %d ran; %+v", acc, ran, st.Counts)
	if ran < submitters*perSub/4 {
		t.Fatalf("only %d of %d tasks ran: the test exercises little", ran, submitters*perSub)
	}
	if msg := ex.CheckInvariants(); msg != "" {
		t.Fatal(msg)
	}
}
