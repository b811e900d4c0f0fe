package executor_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// errStressEnd is the cause every context of the stress below ends with,
// so that a task's error tells the context's end from Handle.Cancel's
// (context.Canceled) and from a shutdown's.
var errStressEnd = errors.New("stress: the submitter's context ended")

// stopPanic is what the stops of an afterFuncCtx panic with.
const stopPanic = "stress: stop of a context's AfterFunc"

// afterFuncCtx is a context with an AfterFunc method of its own, which
// context.AfterFunc (and a standard context derived from it) calls to
// watch it. It ends when end does, with errStressEnd (context.Cause asks
// Err: it has no values). The stops its AfterFunc returns stop the watch,
// then panic: the first one only (panics 1: the watcher's on a queued
// task, or a started task's run context's), or every one (panics 2).
type afterFuncCtx struct {
	context.Context                 // Background: no deadline, no values
	std             context.Context // ended by end: its Done, its watches
	panics          int
	calls           atomic.Int32
}

func newAfterFuncCtx(panics int) (*afterFuncCtx, func()) {
	std, end := context.WithCancel(bg)
	return &afterFuncCtx{Context: bg, std: std, panics: panics}, end
}

func (c *afterFuncCtx) Done() <-chan struct{} { return c.std.Done() }

func (c *afterFuncCtx) Err() error {
	if c.std.Err() != nil {
		return errStressEnd
	}
	return nil
}

func (c *afterFuncCtx) AfterFunc(f func()) func() bool {
	stop := context.AfterFunc(c.std, f)
	if c.panics == 0 || c.panics == 1 && c.calls.Add(1) > 1 {
		return stop
	}
	return func() bool {
		stop()
		panic(stopPanic)
	}
}

// stressTaskBook is what the listener and a stress task saw of one
// submitted task, by its ID.
type stressTaskBook struct {
	started, completed, rejected, completedStarted atomic.Int32
}

// TestContextEndCancelStress drives Submit, Go and Do with contexts that
// end while their tasks wait, start or run, some of them with an
// AfterFunc method of their own whose stops panic, and Handle.Cancel
// racing with those ends and with the starts, while limits change and
// groups are evicted. It checks, from inside the tasks and once drained:
// limits never exceeded, no task run twice, every handle complete, a task
// that did not run completed with the cancellation that came first (its
// Cancel's exactly when Cancel reported true), and the listener's story
// matching the counts: OnStarted once for each start counted, and
// Event.Started on OnCompleted exactly when OnStarted was called.
func TestContextEndCancelStress(t *testing.T) {
	atProcs(t, testContextEndCancelStress)
}

func testContextEndCancelStress(t *testing.T) {
	const (
		callers   = 16
		perCaller = 250
		groups    = 6
		maxGlobal = 5
		maxConc   = 3
	)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	var (
		globalRunning atomic.Int64
		groupRunning  [groups]atomic.Int64
		broken        violations
		books         [callers * perCaller]stressTaskBook
		started       atomic.Int64 // OnStarted calls, all tasks
		startedAsSaid atomic.Int64 // OnCompleted calls with Event.Started set
	)
	violate := broken.add
	book := func(e executor.Event) *stressTaskBook {
		if e.ID == "" {
			return nil // a Go task or a Do call
		}
		i, err := strconv.Atoi(e.ID)
		if err != nil || i < 0 || i >= len(books) {
			violate("an event names an unknown task: " + e.ID)
			return nil
		}
		return &books[i]
	}
	l := executor.ListenerFuncs{
		Started: func(e executor.Event) {
			started.Add(1)
			if b := book(e); b != nil && b.started.Add(1) > 1 {
				violate("OnStarted twice for task " + e.ID)
			}
		},
		Completed: func(e executor.Event) {
			if e.Started {
				startedAsSaid.Add(1)
			}
			b := book(e)
			if b == nil {
				return
			}
			if e.Started {
				b.completedStarted.Add(1)
			}
			// OnStarted, if called, came first, on this goroutine or
			// before the start of the one that runs it.
			if e.Started != (b.started.Load() == 1) {
				violate(fmt.Sprintf("task %s completed %v with Event.Started %v after %d OnStarted calls", e.ID, e.Status, e.Started, b.started.Load()))
			}
			if b.completed.Add(1) > 1 {
				violate("OnCompleted twice for task " + e.ID)
			}
		},
		Rejected: func(e executor.Event) {
			if b := book(e); b != nil {
				b.rejected.Add(1)
			}
		},
	}
	// A stop that panics on a worker goes on up its goroutine, as any
	// panic of a run context's: the spawn recovers it, as a pool does.
	spawn := func(f func()) {
		go func() {
			defer func() {
				if v := recover(); v != nil && v != stopPanic {
					violate(fmt.Sprint("a worker panicked: ", v))
				}
			}()
			f()
		}()
	}
	ex := newExec(t, []policy.Option{
		policy.WithGlobalMaxInFlight(maxGlobal),
		policy.WithDefaultMaxInFlight(10),
		policy.WithDefaultMaxConcurrency(2),
		policy.WithDefaultQueueThreshold(6),
	}, executor.WithMaxIdleGroups(2), executor.WithListener(l), executor.WithSpawn(spawn))
	chaos := newBackground()
	rnd := sharedRand(seed)
	// Limit changes and evictions reach g0..g2 only, so that g3..g5 keep
	// the policy's concurrency limit of 2, checked exactly.
	chaos.churn(ex, rnd, 64, groups/2, maxConc, 3, maxGlobal, violate)
	chaos.checkInvariants(ex, violate)

	type call struct {
		kind       string // "do", "submit" or "go"
		h          *executor.Handle[int]
		err        error
		runs       *atomic.Int32
		cancelled  chan bool // Handle.Cancel's answer, for a Submit task cancelled so
		stopPanics bool      // the context's stops panic
	}
	calls := make([][]call, callers)
	var ends []func()
	var endsMu sync.Mutex
	var racers sync.WaitGroup
	yield := func(n int) {
		for range n {
			runtime.Gosched()
		}
	}
	var wg sync.WaitGroup
	for w := range callers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seed, uint64(w)+2))
			for i := range perCaller {
				id := w*perCaller + i
				gi := r.IntN(groups)
				grp := fmt.Sprint("g", gi)
				c := call{runs: new(atomic.Int32)}
				var ctx context.Context = bg
				var end func()
				switch r.IntN(4) {
				case 0: // never ends
				case 1:
					std, cancel := context.WithCancelCause(bg)
					ctx, end = std, func() { cancel(errStressEnd) }
				default:
					ac, endAC := newAfterFuncCtx(r.IntN(3))
					ctx, end = ac, endAC
					c.stopPanics = ac.panics > 0
				}
				// A Do call's run context watches its context through
				// stopWatcher alone: no stop's panic reaches its caller.
				kind := r.IntN(3) // Do, Submit, Go
				// No panics in Fn: a worker's panic is a stop's.
				task := stressKind(1 + r.IntN(int(stressSucceeds)))
				if task == stressWaitsCancel && end == nil {
					task = stressHolds // nothing would end it
				}
				groupMax := int64(maxConc)
				if gi >= groups/2 {
					groupMax = 2
				}
				fn := stressBody(c.runs, 1, stressRunning{&globalRunning, &groupRunning[gi], maxGlobal, groupMax, grp},
					violate, task, func() { yield(5) }, i)
				if end != nil {
					if r.IntN(3) != 0 || task == stressWaitsCancel {
						// Ended from elsewhere, while the task waits,
						// starts or runs: soon, for a task that returns
						// only then, or it would hold its permits, and
						// the Do calls behind it, to the end.
						n := r.IntN(6)
						racers.Go(func() { yield(n); end() })
					}
					endsMu.Lock()
					ends = append(ends, end) // every one, once submitted
					endsMu.Unlock()
				}
				switch kind {
				case 0:
					c.kind = "do"
					c.err = ex.Do(ctx, grp, func(ctx context.Context) error { _, err := fn(ctx); return err })
				case 1:
					c.kind = "submit"
					c.h, c.err = executor.Submit(ex, ctx, executor.Task[int]{Group: grp, ID: strconv.Itoa(id), Fn: fn})
					if c.err == nil && r.IntN(3) == 0 {
						c.cancelled = make(chan bool, 1)
						n := r.IntN(6)
						racers.Go(func() { yield(n); c.cancelled <- c.h.Cancel() })
					}
				default:
					c.kind = "go"
					c.err = ex.Go(ctx, grp, func(ctx context.Context) error { _, err := fn(ctx); return err })
				}
				calls[w] = append(calls[w], c)
				if r.IntN(4) == 0 {
					runtime.Gosched()
				}
			}
		})
	}
	wg.Wait()
	racers.Wait()
	for _, end := range ends {
		end() // tasks that wait on their context end now
	}
	drain(t, ex)
	chaos.halt()
	broken.check(t)

	var submitted, refused int64
	for w, cs := range calls {
		for i, c := range cs {
			runs := c.runs.Load()
			switch c.kind {
			case "submit":
				submitted++
				id := strconv.Itoa(w*perCaller + i)
				res, ok := c.h.Result()
				if !ok {
					t.Fatalf("task %s: its handle is not complete after Shutdown returned", id)
				}
				if c.stopPanics && res.Status == executor.Failed && errors.Is(res.Err, executor.ErrGoexit) {
					// A stop panicked on its worker, around Fn or before
					// it (a run context made for a task cancelled first).
					if runs > 1 {
						t.Errorf("task %s ran %d times", id, runs)
					}
				} else {
					checkRuns(t, id, res, runs)
				}
				b := &books[w*perCaller+i]
				if c.err != nil {
					refused++
					continue
				}
				if runs == 1 && b.started.Load() != 1 {
					t.Errorf("task %s ran with %d OnStarted calls", id, b.started.Load())
				}
				if n := b.completed.Load() + b.rejected.Load(); n != 1 {
					t.Errorf("task %s: %d OnCompleted and OnRejected calls, want 1 (%v %v)", id, n, res.Status, res.Err)
				}
				if c.cancelled == nil || runs != 0 || res.Status != executor.Cancelled {
					continue
				}
				// Fn never ran: the task completed with the cancellation
				// recorded first. Cancel's, exactly when it reported true.
				if cancelled := <-c.cancelled; cancelled != (res.Err == context.Canceled) {
					t.Errorf("task %s: Cancel reported %v and the task completed %v with %v", id, cancelled, res.Status, res.Err)
				}
			case "do":
				if runs > 1 {
					t.Errorf("a Do ran fn %d times", runs)
				}
				if errors.Is(c.err, executor.ErrRejected) && runs != 0 {
					t.Errorf("a Do refused (%v) ran fn", c.err)
				}
			case "go":
				if c.err != nil && runs != 0 {
					t.Errorf("Go refused a task (%v) that then ran %d times", c.err, runs)
				}
			}
		}
	}
	s := ex.Stats()
	if s.Running != 0 || s.Waiting != 0 || s.RunningTasks != 0 {
		t.Errorf("after Shutdown: %+v", s)
	}
	if got := s.Succeeded + s.Failed + s.Cancelled + s.Rejected; got != s.Submitted || s.Submitted != callers*perCaller {
		t.Errorf("outcomes %d, submitted %d, want %d (%+v)", got, s.Submitted, callers*perCaller, s.TaskCounts)
	}
	if n := started.Load(); uint64(n) != s.Started || startedAsSaid.Load() != n {
		t.Errorf("Started %d, OnStarted calls %d, OnCompleted calls with Event.Started %d: want all equal", s.Started, n, startedAsSaid.Load())
	}
	if s.Cancelled == 0 || s.Rejected == 0 || submitted == refused {
		t.Errorf("the mix did not exercise cancellations and refusals: %+v", s.TaskCounts)
	}
}
