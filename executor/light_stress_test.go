package executor_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// TestLightTasksStress: submitting goroutines admit mostly Go tasks with
// context.Background, which wait as light tasks, mixed with Go on a
// context that may be cancelled, weighted Submit with cancels, and Do,
// while a background loop changes the global and group limits, resets
// them and evicts groups, under Discard and DiscardOldest (which displaces
// light tasks), at GOMAXPROCS 1, 2 and 8. It checks, inside the tasks and
// at the end: limits never exceeded (above what ran when they were
// lowered), no task run twice, FIFO order in a group of concurrency 1, the
// books always consistent, and once drained nothing held and every task
// counted once.
func TestLightTasksStress(t *testing.T) {
	for _, procs := range []int{1, 2, 8} {
		for _, rp := range []policy.RejectionPolicy{policy.Discard, policy.DiscardOldest} {
			for _, global := range []int{6, 64} {
				t.Run(fmt.Sprint("GOMAXPROCS=", procs, "/", rp, "/global=", global), func(t *testing.T) {
					defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
					testLightTasksStress(t, rp, global)
				})
			}
		}
	}
}

func testLightTasksStress(t *testing.T, rp policy.RejectionPolicy, global int) {
	const (
		submitters = 16
		perWorker  = 600
		groups     = 6
		groupConc  = 2
	)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	ex := newExec(t, []policy.Option{
		policy.WithGlobalMaxInFlight(global),
		policy.WithDefaultMaxInFlight(16),
		policy.WithDefaultMaxConcurrency(groupConc),
		policy.WithDefaultQueueThreshold(12),
		policy.WithGlobalQueueThreshold(200),
		policy.WithRejectionPolicy(rp),
	}, executor.WithMaxIdleGroups(2))
	if _, light := ex.LightQueued("x"); !light {
		t.Fatal("the executor queues no light tasks")
	}

	var (
		use      = newCeilings(ex, global, groupConc, groups)
		broken   violations
		changes  atomic.Int64
		ran      atomic.Int64
		closed   atomic.Bool
		fifoLast [submitters]atomic.Int64 // g0, at concurrency 1: each submitter's last task run
	)
	violate := broken.add
	// g0 keeps concurrency 1 for the FIFO check.
	g0 := limits(16, 1, 12, 1)
	if err := use.setGroup(0, &g0); err != nil {
		t.Fatal(err)
	}

	chaos := newBackground()
	r := rand.New(rand.NewPCG(seed, 0))
	chaos.loop(func() {
		time.Sleep(time.Duration(r.IntN(200)) * time.Microsecond)
		gi := 1 + r.IntN(groups-1)
		var err error
		switch k := r.IntN(12); {
		case k < 3:
			err = use.setGlobal(1 + r.IntN(global+2))
		case k < 8:
			l := limits(2+r.IntN(30), 1+r.IntN(3), r.IntN(24), 1+r.IntN(3))
			err = use.setGroup(gi, &l)
		case k < 10:
			err = use.setGroup(gi, nil)
		default:
			use.evict(gi)
		}
		if err != nil {
			violate(err.Error())
		}
		changes.Add(1)
	})
	chaos.checkInvariants(ex, violate)

	var submitted atomic.Int64
	var wg sync.WaitGroup
	for w := range submitters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(w)+1))
			for i := range perWorker {
				gi := r.IntN(groups)
				grp := fmt.Sprint("g", gi)
				runs := new(atomic.Int32)
				seq := int64(i + 1)
				body := func(ctx context.Context, weight int) error {
					if closed.Load() {
						violate("ran after Close")
					}
					if runs.Add(1) > 1 {
						violate("a task ran twice")
					}
					ran.Add(1)
					if gi == 0 {
						if last := fifoLast[w].Load(); last >= seq {
							violate(fmt.Sprintf("g0 FIFO: submitter %d task %d after %d", w, seq, last))
						}
						fifoLast[w].Store(seq)
					}
					use.enter(gi, weight, violate)
					defer use.leave(gi, weight)
					for range i % 8 {
						runtime.Gosched()
					}
					return nil
				}
				submitted.Add(1)
				if i%64 == 63 {
					// Now and then, let the backlog drain (paces the
					// test; nothing checked depends on it)
					for deadline := time.Now().Add(50 * time.Millisecond); time.Now().Before(deadline); {
						if s, _ := ex.GroupStats(grp); s.Waiting == 0 {
							break
						}
						time.Sleep(100 * time.Microsecond)
					}
				}
				switch k := r.IntN(20); {
				case k < 14:
					ex.Go(bg, grp, func(ctx context.Context) error { return body(ctx, 1) })
				case k < 16:
					ctx, cancel := context.WithCancel(bg)
					ex.Go(ctx, grp, func(ctx context.Context) error { return body(ctx, 1) })
					if r.IntN(2) == 0 {
						cancel()
					} else {
						defer cancel()
					}
				case k < 18:
					weight := 1 + r.IntN(2)
					if gi == 0 {
						weight = 1
					}
					h, _ := executor.Submit(ex, bg, executor.Task[int]{Group: grp, Weight: weight,
						Fn: func(ctx context.Context) (int, error) { return 0, body(ctx, weight) }})
					if r.IntN(4) == 0 {
						h.Cancel()
					}
				default:
					if r.IntN(3) == 0 {
						ex.Do(bg, grp, func(ctx context.Context) error { return body(ctx, 1) })
					} else {
						ex.Go(bg, grp, func(ctx context.Context) error { return body(ctx, 1) })
					}
				}
				if r.IntN(4) == 0 {
					runtime.Gosched()
				}
			}
		}()
	}
	wg.Wait()
	chaos.halt()

	// Limits that every task fits; g0 keeps its own, for the FIFO check.
	if err := use.fitAll(1, groups); err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithTimeout(bg, 60*time.Second)
	if err := ex.Shutdown(sctx); err != nil {
		s := ex.Stats()
		t.Fatalf("Shutdown: %v; stats %+v; invariants %q", err, s, ex.CheckInvariants())
	}
	scancel()
	broken.check(t)
	if msg := ex.CheckInvariants(); msg != "" {
		t.Fatal(msg)
	}
	s := ex.Stats()
	if s.Running != 0 || s.Waiting != 0 || s.RunningTasks != 0 {
		t.Errorf("after drain: %+v", s)
	}
	if got := s.Succeeded + s.Failed + s.Cancelled + s.Rejected; got != s.Submitted {
		t.Errorf("outcomes %d, submitted %d (%+v)", got, s.Submitted, s.TaskCounts)
	}
	if s.Succeeded != uint64(ran.Load()) || s.Started != s.Succeeded {
		t.Errorf("ran %d, stats %+v", ran.Load(), s.TaskCounts)
	}
	ex.Close()
	closed.Store(true)
	t.Logf("%d limit changes and evictions, ran %d of %d; %+v", changes.Load(), ran.Load(), submitted.Load(), s.TaskCounts)
}
