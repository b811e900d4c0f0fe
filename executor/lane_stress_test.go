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

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// TestLaneStress is TestStress in a configuration where the lanes open (no
// queue timeout, breaker, cluster limiter or global queue threshold), so
// that most queued tasks go in without the executor's lock while everything
// else moves: group limits and the global limit change, groups are evicted,
// statistics are read, tasks are cancelled by handle and by context, panic
// and fail, some are too heavy ever to start, a third come in with Go and
// context.Background (light tasks, go.go), and Shutdown comes while
// submitters are still at work. It checks, from inside the tasks and at the
// end: limits never exceeded, the books (CheckInvariants, lane credit
// included) always consistent, nothing runs twice or after a refusal, a
// task too heavy is refused with ErrTooHeavy, and once Shutdown has
// returned and the submitters are done, every handle has completed.
func TestLaneStress(t *testing.T) {
	const (
		submitters = 24
		perWorker  = 600
		groups     = 12
		maxGlobal  = 8
		maxConc    = 4
	)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	p, err := policy.New(
		policy.WithGlobalMaxInFlight(maxGlobal),
		policy.WithMaxInFlightPerGroup(2000),
		policy.WithMaxConcurrencyPerGroup(2),
		policy.WithQueueThresholdPerGroup(1500),
		policy.WithRejectionPolicy(policy.Discard),
	)
	if err != nil {
		t.Fatal(err)
	}
	ex, err := executor.New(p, executor.WithMaxIdleGroups(4))
	if err != nil {
		t.Fatal(err)
	}
	if !executor.LanesEnabled(ex) {
		t.Fatal("this configuration keeps the lanes closed")
	}

	var (
		globalRunning atomic.Int64
		groupRunning  [groups]atomic.Int64
		broken        violations
	)
	violate := broken.add

	chaos := newBackground()
	rnd := sharedRand(seed)
	// Changes of limits and evictions close lanes: they come one in a few
	// dozen steps, so that the lanes are open most of the time.
	chaos.churn(ex, rnd, 256, groups, maxConc, 4, maxGlobal, violate)
	chaos.loop(sometimes(rnd, 256, func() {
		// Statistics drain the lanes (a lowered limit may leave a group
		// over it: CheckInvariants checks the lane's credit).
		ex.GroupStats(fmt.Sprint("g", rnd(groups)))
		ex.Stats()
	}))
	chaos.checkInvariants(ex, violate)

	type record struct {
		h        *executor.Handle[int]
		err      error
		runs     *atomic.Int32
		heavy    bool
		cancelFn context.CancelFunc
		viaGo    bool // submitted with Go: no handle
	}
	records := make([][]record, submitters)
	shutdownAt := submitters * perWorker * 3 / 4 // Shutdown comes mid-run
	var submitted atomic.Int64
	shutdownDone := make(chan error, 1)
	var shutdownOnce sync.Once

	var wg sync.WaitGroup
	for w := range submitters {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seed, uint64(w)+2))
			for i := range perWorker {
				if submitted.Add(1) == int64(shutdownAt) {
					shutdownOnce.Do(func() {
						go func() {
							ctx, cancel := context.WithTimeout(bg, 20*time.Second) // a hang guard
							defer cancel()
							err := ex.Shutdown(ctx)
							shutdownDone <- err
						}()
					})
				}
				gi := r.IntN(groups)
				grp := fmt.Sprint("g", gi)
				weight := r.IntN(3) // 0 means 1
				rec := record{runs: new(atomic.Int32)}
				if r.IntN(40) == 0 {
					weight, rec.heavy = maxGlobal+1, true
				}
				mode := r.IntN(10)
				kind := stressKind(min(mode, int(stressSucceeds)))
				if mode >= 3 && mode <= 6 {
					kind = stressHolds // queues build up
				}
				// A third come in with Go, as light tasks unless their
				// lane is closed: nothing can cancel them, so they must
				// end on their own. Go's weight is 1.
				rec.viaGo = r.IntN(3) == 0 && !rec.heavy && kind != stressWaitsCancel
				if rec.viaGo {
					weight = 1
				}
				fn := stressBody(rec.runs, weight, stressRunning{&globalRunning, &groupRunning[gi], maxGlobal, maxConc, grp},
					violate, kind, func() {
						for range 20 {
							runtime.Gosched()
						}
					}, i)
				if rec.viaGo {
					rec.err = ex.Go(bg, grp, func(ctx context.Context) error { _, err := fn(ctx); return err })
					records[w] = append(records[w], rec)
					continue
				}
				ctx := bg
				if r.IntN(8) == 0 {
					ctx, rec.cancelFn = context.WithCancel(bg)
				}
				rec.h, rec.err = executor.Submit(ex, ctx, executor.Task[int]{Group: grp, ID: fmt.Sprint(w, "-", i), Weight: weight, Fn: fn})
				switch {
				case mode == 2:
					rec.h.Cancel() // or it would run until Close
				case r.IntN(10) == 0:
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
		})
	}
	wg.Wait()
	if err := <-shutdownDone; err != nil {
		t.Fatalf("Shutdown: %v; %d violations, first %v; books: %q; stats %+v", err,
			broken.n.Load(), broken.first.Load(), ex.CheckInvariants(), ex.Stats())
	}
	chaos.halt()

	// Shutdown has returned and no Submit is under way: every handle has
	// completed, with no further wait.
	var counts [5]int
	reasons := map[string]int{}
	defer func() { t.Logf("refusals by limit: %v", reasons) }()
	goTasks := 0
	for _, rs := range records {
		for _, rec := range rs {
			if rec.viaGo {
				// Its outcome is in the totals below; here, only that
				// a refused one never ran (a second run is a violation).
				goTasks++
				if rec.err != nil && rec.runs.Load() != 0 {
					t.Errorf("Go task refused (%v) ran", rec.err)
				}
				continue
			}
			if rec.cancelFn != nil {
				rec.cancelFn()
			}
			r, ok := rec.h.Result()
			if !ok {
				t.Fatalf("handle %s (Submit error %v) not complete after Shutdown returned", rec.h.ID(), rec.err)
			}
			counts[r.Status]++
			if r.Status == executor.Rejected {
				var re *executor.RejectedError
				if errors.As(r.Err, &re) {
					reasons[fmt.Sprint(re.Limit, "/", re.Err)]++
				}
			}
			if rec.heavy && (r.Status != executor.Rejected || !errors.Is(r.Err, executor.ErrTooHeavy) && !errors.Is(r.Err, executor.ErrShutdown)) {
				t.Errorf("too heavy task %s: %+v, want Rejected with ErrTooHeavy", rec.h.ID(), r)
			}
			checkRuns(t, rec.h.ID(), r, rec.runs.Load())
		}
	}
	broken.check(t)
	if msg := ex.CheckInvariants(); msg != "" {
		t.Fatal(msg)
	}
	s := ex.Stats()
	if s.Running != 0 || s.Waiting != 0 || s.RunningTasks != 0 {
		t.Errorf("after Shutdown: %+v", s)
	}
	total := uint64(submitters * perWorker)
	if got := s.Succeeded + s.Failed + s.Cancelled + s.Rejected; got != total || s.Submitted != total {
		t.Errorf("outcomes %d, submitted %d, want %d (%+v)", got, s.Submitted, total, s.Counts)
	}
	viaLane, light := executor.LaneAdmitted(ex), executor.LightAdmitted(ex)
	t.Logf("%d Go tasks, %d of them light", goTasks, light)
	t.Logf("outcomes: success %d failed %d cancelled %d rejected %d; %d admitted through lanes",
		counts[executor.Success], counts[executor.Failed], counts[executor.Cancelled], counts[executor.Rejected], viaLane)
	if counts[executor.Success] == 0 || counts[executor.Rejected] == 0 || counts[executor.Cancelled] == 0 || counts[executor.Failed] == 0 {
		t.Errorf("the mix did not exercise every outcome: %v", counts)
	}
	// A few hundred to a few thousand in runs so far; how many depends on
	// the scheduling, so only none is a failure.
	if viaLane == 0 || light == 0 {
		t.Errorf("of %d tasks, %d came in through a lane, %d of them light: the test did not exercise them", total, viaLane, light)
	}
	ex.Close()
	if n := executor.DoubleCompletions(); n != 0 {
		t.Errorf("%d double completions", n)
	}
}
