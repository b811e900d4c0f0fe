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

// Breakers that trip and recover all the time, under Submit, Go and Do,
// cancels and limit changes: no queued task starts while its group's
// breaker is open, limits hold, each task ends once, and everything is
// given back at the end.
//
// Groups c0..c2 run one task at a time (their concurrency limit stays 1):
// the outcome of a group's task is recorded before its permit goes back,
// and only a running task's outcome opens a breaker, so as a task of such
// a group that waited in its queue begins, its group's breaker is not
// open, unless the look as it started was skipped. (A task started as it
// was admitted may find it open: let through before the running task's
// failure opened it, it starts after; cOp checks only the tasks that
// surely waited.) Groups w0..w2 have limits that change.
func TestBreakerRefusesQueuedTasksUnderStress(t *testing.T) {
	seededRuns(t, "BREAKER_START_STRESS", 3, 1, breakerStartStress)
}

const (
	breakerStressGroups    = 3
	breakerStressMaxGlobal = 6
	breakerStressMaxConc   = 3 // a w group's, at most
)

func breakerStartStress(t *testing.T, seed uint64) {
	clk := fakeClock()
	var v violations
	var (
		mu        sync.Mutex
		submitted int
		ended     = map[string]int{} // terminal events by ID (Submit tasks have one)
		endedAll  int
		refusedQ  atomic.Int64 // refusals by the breaker of tasks it had admitted
	)
	l := executor.ListenerFuncs{
		Submitted: func(executor.Event) { mu.Lock(); submitted++; mu.Unlock() },
		Completed: func(e executor.Event) { mu.Lock(); ended[e.ID]++; endedAll++; mu.Unlock() },
		Rejected:  func(e executor.Event) { mu.Lock(); ended[e.ID]++; endedAll++; mu.Unlock() },
	}
	ex := newExec(t, []policy.Option{policy.WithGlobalMaxInFlight(4), policy.WithDefaultMaxConcurrency(2),
		policy.WithDefaultMaxInFlight(12)},
		executor.WithListener(l),
		executor.WithGroupBreaker(breaker.Settings{Clock: clk, Timeout: 5 * time.Millisecond, MaxRequests: 2,
			ReadyToTrip: func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 2 }}))
	for i := range breakerStressGroups {
		if err := ex.SetGroupLimits(fmt.Sprint("c", i), policy.GroupLimits{MaxInFlight: 8, MaxConcurrency: 1, QueueThreshold: 8, Share: 1}); err != nil {
			t.Fatal(err)
		}
	}

	rnd := sharedRand(seed)
	bgr := newBackground()
	bgr.loop(func() { clk.Advance(time.Duration(rnd(6)) * time.Millisecond) })
	bgr.loop(sometimes(rnd, 20, func() {
		if err := ex.SetGlobalMaxInFlight(2 + rnd(breakerStressMaxGlobal-1)); err != nil {
			v.add("SetGlobalMaxInFlight: " + err.Error())
		}
	}))
	bgr.loop(sometimes(rnd, 20, func() {
		// A w group's concurrency limit stays at least 2, the heaviest
		// task's weight: a task heavier than its limit waits until it is
		// raised.
		g := fmt.Sprint("w", rnd(breakerStressGroups))
		if err := ex.SetGroupLimits(g, policy.GroupLimits{MaxInFlight: 4 + rnd(12), MaxConcurrency: 2 + rnd(breakerStressMaxConc-1),
			QueueThreshold: 1 + rnd(10), Share: 1 + rnd(3)}); err != nil {
			v.add("SetGroupLimits: " + err.Error())
		}
	}))
	bgr.loop(sometimes(rnd, 20, func() {
		g := fmt.Sprint("c", rnd(breakerStressGroups))
		if err := ex.SetGroupLimits(g, policy.GroupLimits{MaxInFlight: 1 + rnd(10), MaxConcurrency: 1,
			QueueThreshold: 1 + rnd(10), Share: 1 + rnd(3)}); err != nil {
			v.add("SetGroupLimits: " + err.Error())
		}
	}))
	bgr.checkInvariants(ex, v.add)

	var global atomic.Int64
	var groupRunning [2][breakerStressGroups]atomic.Int64
	// body is a task of group c<i> (kind 0) or w<i> (kind 1) of weight w.
	// It holds its permits until hold is closed, if it is not nil. If
	// queued reports true as it begins, it waited in its group's queue
	// for sure, and its group's breaker must not be open (a task started
	// as it was admitted may find it open: asked before its group's
	// running task's failure opened it, it started after).
	body := func(kind, i, w int, fails bool, runs *atomic.Int32, hold <-chan struct{}, queued *atomic.Bool) func(context.Context) error {
		name := fmt.Sprint("cw"[kind:kind+1], i)
		return func(context.Context) error {
			if runs.Add(1) > 1 {
				v.add("a task ran twice")
			}
			if queued != nil && queued.Load() {
				if s, ok := ex.GroupStats(name); !ok || s.Breaker == breaker.StateOpen {
					v.add(fmt.Sprintf("a task queued in %s began with its breaker open (stats found %v)", name, ok))
				}
			}
			defer global.Add(-int64(w))
			defer groupRunning[kind][i].Add(-int64(w))
			if n := global.Add(int64(w)); n > breakerStressMaxGlobal {
				v.add(fmt.Sprintf("global running %d > %d", n, breakerStressMaxGlobal))
			}
			if n, most := groupRunning[kind][i].Add(int64(w)), []int64{1, breakerStressMaxConc}[kind]; n > most {
				v.add(fmt.Sprintf("%s running %d > %d", name, n, most))
			}
			if hold != nil {
				<-hold
			}
			for range w {
				runtime.Gosched()
			}
			if fails {
				return errStress
			}
			return nil
		}
	}
	// submitOne submits fn to group and waits for its outcome, checking it
	// against fn's runs.
	submitOne := func(ctx context.Context, id, group string, w int, fn func(context.Context) error, runs *atomic.Int32) {
		h, err := executor.Submit(ex, ctx, executor.Task[int]{Group: group, ID: id, Weight: w,
			Fn: func(ctx context.Context) (int, error) { return 0, fn(ctx) }})
		if h == nil {
			v.add("Submit returned no handle")
			return
		}
		res, werr := h.Wait(guardCtx(t))
		if werr != nil {
			v.add(fmt.Sprintf("task %s never completed: %v", id, werr))
			return
		}
		checkRuns(t, id, res, runs.Load())
		if err == nil && (errors.Is(res.Err, breaker.ErrOpenState) || errors.Is(res.Err, breaker.ErrTooManyRequests)) {
			refusedQ.Add(1)
		}
	}

	const submitters, ops = 4, 200
	var wg sync.WaitGroup
	for s := range submitters {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seed, uint64(s)+2))
			for op := range ops {
				i := r.IntN(breakerStressGroups)
				if r.IntN(2) == 0 {
					cOp(t, ex, r, fmt.Sprintf("%d/%d", s, op), i, body, v.add)
					continue
				}
				group := fmt.Sprint("w", i)
				call, w := r.IntN(3), 1
				if call != 1 { // Go's tasks weigh 1
					w += r.IntN(2)
				}
				var runs atomic.Int32
				fn := body(1, i, w, r.IntN(3) == 0, &runs, nil, nil)
				ctx, cancel := context.WithCancel(bg)
				if r.IntN(6) == 0 {
					go cancel()
				}
				switch call {
				case 0:
					submitOne(ctx, fmt.Sprintf("%d/%d", s, op), group, w, fn, &runs)
				case 1:
					if err := ex.Go(ctx, group, fn); err != nil && runs.Load() != 0 {
						v.add("a Go task refused at admission ran")
					}
				default:
					err := ex.DoWeighted(ctx, group, w, fn)
					if errors.Is(err, executor.ErrRejected) && runs.Load() != 0 {
						v.add("a refused Do call ran its function")
					}
				}
				cancel()
			}
		})
	}
	waitAll(t, &wg, "the submitters")
	await(t, "the listener told of every task's end", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return endedAll == submitted
	})
	bgr.halt()
	v.check(t)

	mu.Lock()
	for id, n := range ended {
		if id != "" && n != 1 {
			t.Errorf("task %s: told %d ends, want 1", id, n)
		}
	}
	mu.Unlock()
	await(t, "the groups to have given everything back", func() bool {
		s := ex.Stats()
		if s.Running != 0 || s.Waiting != 0 {
			return false
		}
		for k := range 2 {
			for i := range breakerStressGroups {
				if gs, ok := ex.GroupStats(fmt.Sprint("cw"[k:k+1], i)); ok && gs.InFlight != 0 {
					return false
				}
			}
		}
		return true
	})
	wantInvariants(t, ex)
	t.Logf("%+v; w tasks (Submit) refused by their breaker after admission: %d", ex.Stats().TaskCounts, refusedQ.Load())
}

// cOp submits to group c<i> a task that holds its one running permit (or
// waits for it) until the others are submitted behind it: one to three
// tasks, Submit or Go, some failing, some cancelled. Those admitted while
// the holder is still there waited in the queue for sure: they are
// checked for the breaker's state as they begin.
func cOp(t *testing.T, ex *executor.Executor, r *rand.Rand, id string, i int,
	body func(kind, i, w int, fails bool, runs *atomic.Int32, hold <-chan struct{}, queued *atomic.Bool) func(context.Context) error,
	violate func(string)) {
	group := fmt.Sprint("c", i)
	release := make(chan struct{})
	var holderRuns atomic.Int32
	holder, _ := executor.Submit(ex, bg, executor.Task[int]{Group: group, ID: id + "/holder", Fn: func(ctx context.Context) (int, error) {
		return 0, body(0, i, 1, false, &holderRuns, release, nil)(ctx)
	}})
	var queued atomic.Bool
	type submitted struct {
		h    *executor.Handle[int]
		runs *atomic.Int32
	}
	var hs []submitted
	for k := range 1 + r.IntN(3) {
		runs := new(atomic.Int32)
		fn := body(0, i, 1, r.IntN(2) == 0, runs, nil, &queued)
		ctx, cancel := context.WithCancel(bg)
		defer cancel()
		if r.IntN(8) == 0 {
			go cancel()
		}
		if r.IntN(2) == 0 {
			if err := ex.Go(ctx, group, fn); err != nil && runs.Load() != 0 {
				violate("a Go task refused at admission ran")
			}
			continue
		}
		h, _ := executor.Submit(ex, ctx, executor.Task[int]{Group: group, ID: fmt.Sprint(id, "/", k),
			Fn: func(ctx context.Context) (int, error) { return 0, fn(ctx) }})
		hs = append(hs, submitted{h, runs})
	}
	if !isDone(holder) {
		queued.Store(true) // the holder was ahead of them all along
	}
	close(release)
	for _, s := range append(hs, submitted{holder, &holderRuns}) {
		res, err := s.h.Wait(guardCtx(t))
		if err != nil {
			violate(fmt.Sprintf("task %s never completed: %v", s.h.ID(), err))
			continue
		}
		checkRuns(t, s.h.ID(), res, s.runs.Load())
	}
}
