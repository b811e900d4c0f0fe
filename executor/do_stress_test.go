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

// TestDoSubmitGoStress drives Do, Submit and Go together from many
// goroutines, at GOMAXPROCS 1, 2 and 8, while background loops evict groups
// and change limits, and tasks fail, panic and are cancelled while they wait
// or run. It checks, from inside the tasks and at the end: limits never
// exceeded, the books always consistent, no work that was refused ever
// runs and none runs twice, every Do returns fn's outcome or a refusal, and
// once drained nothing is held and every call is counted once.
func TestDoSubmitGoStress(t *testing.T) {
	atProcs(t, testDoSubmitGoStress)
}

func testDoSubmitGoStress(t *testing.T) {
	const (
		callers   = 24
		perCaller = 300
		groups    = 8
		maxGlobal = 6
		maxConc   = 3
	)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	ex := newExec(t, []policy.Option{
		policy.WithGlobalMaxInFlight(maxGlobal),
		policy.WithDefaultMaxInFlight(12),
		policy.WithDefaultMaxConcurrency(2),
		policy.WithDefaultQueueThreshold(6),
	}, executor.WithMaxIdleGroups(2))
	var (
		globalRunning atomic.Int64
		groupRunning  [groups]atomic.Int64
		broken        violations
	)
	violate := broken.add
	chaos := newBackground()
	rnd := sharedRand(seed)
	// Limit changes and evictions reach g0..g3 only, so that g4..g7 keep
	// the policy's concurrency limit of 2, checked exactly.
	chaos.churn(ex, rnd, 64, groups/2, maxConc, 3, maxGlobal, violate)
	chaos.checkInvariants(ex, violate)

	type call struct {
		kind   string // "do", "submit" or "go"
		h      *executor.Handle[int]
		err    error
		panics bool // Do's fn panicked and the panic reached the caller
		runs   *atomic.Int32
		task   stressKind
	}
	calls := make([][]call, callers)
	cancels := make([][]context.CancelFunc, callers)
	var wg sync.WaitGroup
	for w := range callers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seed, uint64(w)+2))
			for i := range perCaller {
				gi := r.IntN(groups)
				grp := fmt.Sprint("g", gi)
				c := call{runs: new(atomic.Int32), task: stressKind(r.IntN(int(stressSucceeds) + 1))}
				ctx, cancel := context.WithCancel(bg)
				cancelLate := r.IntN(5) == 0
				kind := r.IntN(3)   // Do, Submit, Go
				weight := r.IntN(3) // 0 means 1
				if kind == 2 {
					weight = 1 // Go's
				}
				if c.task == stressWaitsCancel {
					// It returns once cancelled: soon, or it would hold its
					// permits, and the Do calls behind it, to the end.
					cancelLate = true
				}
				if !cancelLate && r.IntN(3) == 0 {
					ctx = bg // Do and Go then reuse their tasks (recycle.go, do.go)
				}
				groupMax := int64(maxConc)
				if gi >= groups/2 {
					groupMax = 2
				}
				fn := stressBody(c.runs, weight, stressRunning{&globalRunning, &groupRunning[gi], maxGlobal, groupMax, grp},
					violate, c.task, func() {
						for range 5 {
							runtime.Gosched()
						}
					}, i)
				if cancelLate {
					// Cancelled from elsewhere, while it waits or runs.
					yields := r.IntN(4)
					go func() {
						for range yields {
							runtime.Gosched()
						}
						cancel()
					}()
				}
				switch kind {
				case 0:
					c.kind = "do"
					func() {
						defer func() {
							if v := recover(); v != nil {
								if v != "stress panic" {
									panic(v)
								}
								c.panics = true
							}
						}()
						c.err = ex.DoWeighted(ctx, grp, weight, func(ctx context.Context) error { _, err := fn(ctx); return err })
					}()
				case 1:
					c.kind = "submit"
					c.h, c.err = executor.Submit(ex, ctx, executor.Task[int]{Group: grp, Weight: weight, Fn: fn})
				default:
					c.kind = "go"
					c.err = ex.Go(ctx, grp, func(ctx context.Context) error { _, err := fn(ctx); return err })
				}
				if r.IntN(4) == 0 {
					cancel() // a Submit or Go task may still wait or run
				}
				cancels[w] = append(cancels[w], cancel) // every one, once drained
				calls[w] = append(calls[w], c)
				if r.IntN(4) == 0 {
					runtime.Gosched()
				}
			}
		})
	}
	wg.Wait()
	for _, cs := range cancels {
		for _, cancel := range cs {
			cancel() // tasks that wait on their context end now
		}
	}
	drain(t, ex)
	chaos.halt()

	for _, cs := range calls {
		for _, c := range cs {
			runs := c.runs.Load()
			switch c.kind {
			case "submit":
				r, ok := c.h.Result()
				if !ok {
					t.Fatal("a handle is not complete after Shutdown returned")
				}
				checkRuns(t, "submitted", r, runs)
			case "do":
				switch {
				case runs > 1:
					t.Errorf("a Do ran fn %d times", runs)
				case c.panics && (runs != 1 || c.task != stressPanics):
					t.Errorf("a Do's caller saw a panic, fn ran %d times (task %v)", runs, c.task)
				case c.task == stressPanics && runs == 1 && !c.panics:
					t.Errorf("a Do's fn panicked and the caller got %v", c.err)
				case errors.Is(c.err, executor.ErrRejected) && runs != 0:
					t.Errorf("a Do refused (%v) ran fn", c.err)
				case runs == 0 && c.err == nil:
					t.Errorf("a Do returned nil without running fn")
				case c.task == stressFails && runs == 1 && !errors.Is(c.err, errStress):
					t.Errorf("a Do whose fn failed returned %v", c.err)
				case (c.task == stressSucceeds || c.task == stressHolds) && runs == 1 && c.err != nil:
					t.Errorf("a Do whose fn succeeded returned %v", c.err)
				case c.task == stressWaitsCancel && runs == 1 && !errors.Is(c.err, context.Canceled):
					t.Errorf("a Do whose fn returned its cancelled context's error returned %v", c.err)
				}
			case "go":
				if c.err != nil && runs != 0 {
					t.Errorf("Go refused a task (%v) that then ran %d times", c.err, runs)
				}
				if runs > 1 {
					t.Errorf("a Go task ran %d times", runs)
				}
			}
		}
	}
	broken.check(t)
	s := ex.Stats()
	if s.Running != 0 || s.Waiting != 0 || s.RunningTasks != 0 {
		t.Errorf("after Shutdown: %+v", s)
	}
	total := uint64(callers * perCaller)
	if got := s.Succeeded + s.Failed + s.Cancelled + s.Rejected; got != total || s.Submitted != total {
		t.Errorf("outcomes %d, submitted %d, want %d (%+v)", got, s.Submitted, total, s.TaskCounts)
	}
	if s.Failed == 0 || s.Cancelled == 0 || s.Rejected == 0 {
		t.Errorf("the mix did not exercise failures, cancellations and refusals: %+v", s.TaskCounts)
	}
}
