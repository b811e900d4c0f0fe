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
	"time"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// TestStress drives the executor from many goroutines with random groups,
// weights, outcomes, cancellations, timeouts, evictions and per-group
// breakers tripping and recovering, and checks the
// invariants from inside the tasks and at the end: limits never exceeded,
// every handle completes exactly once, no Fn runs twice or after a refusal,
// and after Close nothing is held and no goroutine is left (TestMain).
func TestStress(t *testing.T) {
	const (
		submitters = 32
		perWorker  = 400
		groups     = 16
		global     = 8
	)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	clk := fakeClock()
	concOf := func(g string) int {
		if g == "g0" {
			return 4
		}
		return 2
	}
	p, err := policy.New(
		policy.WithGlobalMaxInFlight(global),
		policy.WithDefaultMaxInFlight(12),
		policy.WithDefaultMaxConcurrency(2),
		policy.WithGroupMaxConcurrency("g0", 4),
		policy.WithDefaultQueueThreshold(8),
		policy.WithGlobalQueueThreshold(64),
		policy.WithQueueTimeout(50*time.Millisecond),
		policy.WithRejectionPolicy(policy.Discard),
	)
	if err != nil {
		t.Fatal(err)
	}
	// The breakers keep their own clock, moved by the submissions rather
	// than by the chaos loop: an open breaker then stays open for a fixed
	// share of the run (4 steps = 256 submissions), so it refuses some
	// tasks however fast the machine runs the chaos loop. On the shared
	// clock a fast loop let every open window pass unseen (CI, 2026-11-21).
	brClk := fakeClock()
	var submissions, trips atomic.Int64
	ex, err := executor.New(p, executor.WithClock(clk), executor.WithMaxIdleGroups(4),
		executor.WithGroupBreaker(breaker.Settings{Clock: brClk, Timeout: 20 * time.Millisecond, MaxRequests: 2,
			OnStateChange: func(_ string, _, to breaker.State) {
				if to == breaker.StateOpen {
					trips.Add(1)
				}
			},
			ReadyToTrip: func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 3 }}))
	if err != nil {
		t.Fatal(err)
	}

	var (
		globalRunning atomic.Int64
		groupRunning  [groups]atomic.Int64
		broken        violations
	)
	violate := broken.add

	type record struct {
		h        *executor.Handle[int]
		runs     *atomic.Int32
		invalid  bool
		cancelFn context.CancelFunc
	}
	records := make([][]record, submitters)

	chaos := newBackground()
	chaos.loop(func() { clk.Advance(5 * time.Millisecond) }) // time moves: queue timeouts fire
	r := rand.New(rand.NewPCG(seed, 1))
	chaos.loop(func() { ex.EvictGroup(fmt.Sprint("g", r.IntN(groups))) })
	chaos.checkInvariants(ex, violate)

	var wg sync.WaitGroup
	for w := range submitters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(w)+2))
			for i := range perWorker {
				gi := r.IntN(groups)
				grp := fmt.Sprint("g", gi)
				weight := r.IntN(3) // 0 means 1
				if gi != 0 && weight > 2 {
					weight = 2
				}
				runs := new(atomic.Int32)
				mode := r.IntN(10)
				if gi == groups-1 {
					// The last group's tasks all fail or panic, so its
					// breaker trips however few of them get to run.
					mode = r.IntN(2)
				}
				// Mode 3 holds the permits for some fake time, so that
				// queues build up and waiting tasks time out at any speed.
				hold := func() {
					for until := clk.Now().Add(20 * time.Millisecond); clk.Now().Before(until); {
						runtime.Gosched()
					}
				}
				fn := stressBody(runs, weight, stressRunning{&globalRunning, &groupRunning[gi], global, int64(concOf(grp)), grp},
					violate, stressKind(min(mode, int(stressSucceeds))), hold, i)
				rec := record{runs: runs}
				ctx := bg
				if r.IntN(8) == 0 {
					ctx, rec.cancelFn = context.WithCancel(bg)
				}
				task := executor.Task[int]{Group: grp, ID: fmt.Sprint(w, "-", i), Weight: weight, Fn: fn}
				if r.IntN(50) == 0 {
					task.Group, rec.invalid = "", true
				}
				rec.h, _ = executor.Submit(ex, ctx, task)
				if submissions.Add(1)%64 == 0 {
					brClk.Advance(5 * time.Millisecond)
				}
				switch {
				case mode == 2:
					rec.h.Cancel() // or it would run until Close
				case r.IntN(5) == 0:
					rec.h.Cancel()
				}
				if rec.cancelFn != nil && r.IntN(2) == 0 {
					rec.cancelFn()
				}
				records[w] = append(records[w], rec)
				if r.IntN(4) == 0 {
					runtime.Gosched()
				}
			}
		}()
	}
	wg.Wait()

	// A drained Shutdown returns only once every handle has completed.
	for _, rs := range records {
		for _, rec := range rs {
			if rec.cancelFn != nil {
				rec.cancelFn() // tasks that wait on their context end now
			}
		}
	}
	sctx, scancel := context.WithTimeout(bg, 60*time.Second) // a hang guard
	if err := ex.Shutdown(sctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	scancel()
	for _, rs := range records {
		for _, rec := range rs {
			if _, ok := rec.h.Result(); !ok {
				t.Fatalf("handle %s not complete after Shutdown returned", rec.h.ID())
			}
		}
	}

	// Wait for every handle (all complete by now).
	var counts [5]int
	timeouts, breakerRefusals := 0, 0
	for _, rs := range records {
		for _, rec := range rs {
			ctx, cancel := context.WithTimeout(bg, 30*time.Second) // hang guard
			r, err := rec.h.Wait(ctx)
			cancel()
			if rec.cancelFn != nil {
				rec.cancelFn()
			}
			if err != nil {
				t.Fatalf("handle %s never completed", rec.h.ID())
			}
			counts[r.Status]++
			if errors.Is(r.Err, executor.ErrQueueTimeout) {
				timeouts++
			}
			if errors.Is(r.Err, breaker.ErrOpenState) || errors.Is(r.Err, breaker.ErrTooManyRequests) {
				breakerRefusals++
			}
			if rec.invalid && (r.Status != executor.Rejected || !errors.Is(r.Err, executor.ErrInvalidTask)) {
				t.Errorf("invalid task %s: %+v", rec.h.ID(), r)
			}
			checkRuns(t, rec.h.ID(), r, rec.runs.Load())
		}
	}
	chaos.halt()

	broken.check(t)
	if msg := ex.CheckInvariants(); msg != "" {
		t.Fatal(msg)
	}
	s := ex.Stats()
	if s.Running != 0 || s.Waiting != 0 || s.RunningTasks != 0 {
		t.Errorf("after all handles completed: %+v", s)
	}
	total := uint64(submitters * perWorker)
	if got := s.Succeeded + s.Failed + s.Cancelled + s.Rejected; got != total {
		t.Errorf("outcomes %d, want %d (%+v)", got, total, s.TaskCounts)
	}
	t.Logf("timeouts %d, breaker trips %d, refusals %d", timeouts, trips.Load(), breakerRefusals)
	t.Logf("outcomes: success %d failed %d cancelled %d rejected %d; stats %+v",
		counts[executor.Success], counts[executor.Failed], counts[executor.Cancelled], counts[executor.Rejected], s.TaskCounts)
	if timeouts == 0 || breakerRefusals == 0 || counts[executor.Success] == 0 || counts[executor.Rejected] == 0 || counts[executor.Cancelled] == 0 || counts[executor.Failed] == 0 {
		t.Errorf("the mix did not exercise every outcome: %v", counts)
	}
	ex.Close()
	if s := ex.Stats(); s.Running != 0 || s.Waiting != 0 {
		t.Errorf("after Close: %+v", s)
	}
	if n := executor.DoubleCompletions(); n != 0 {
		t.Errorf("%d double completions", n)
	}
}
