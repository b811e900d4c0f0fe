package executor_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

func TestOutcomes(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name   string
		fn     func(context.Context) (int, error)
		status executor.Status
		value  int
		check  func(t *testing.T, err error)
	}{
		{"nil error", func(context.Context) (int, error) { return 7, nil }, executor.Success, 7, nil},
		{"error", func(context.Context) (int, error) { return 1, boom }, executor.Failed, 1,
			func(t *testing.T, err error) {
				if !errors.Is(err, boom) {
					t.Errorf("err = %v, want boom", err)
				}
			}},
		{"context.Canceled", func(context.Context) (int, error) { return 0, context.Canceled }, executor.Cancelled, 0, nil},
		{"wrapped context.Canceled", func(context.Context) (int, error) {
			return 0, fmt.Errorf("outer: %w", fmt.Errorf("inner: %w", context.Canceled))
		}, executor.Cancelled, 0, nil},
		{"deadline exceeded is a failure", func(context.Context) (int, error) { return 0, context.DeadlineExceeded }, executor.Failed, 0, nil},
		{"panic", func(context.Context) (int, error) { panic("kaboom") }, executor.Failed, 0,
			func(t *testing.T, err error) {
				var pe *executor.PanicError
				if !errors.As(err, &pe) || pe.Value != "kaboom" || !strings.Contains(string(pe.Stack), "outcome_test.go") {
					t.Errorf("err = %#v, want a *PanicError with value and stack", err)
				}
			}},
		{"panic with error", func(context.Context) (int, error) { panic(boom) }, executor.Failed, 0,
			func(t *testing.T, err error) {
				if !errors.Is(err, boom) {
					t.Errorf("err = %v, want to unwrap to boom", err)
				}
			}},
		{"Goexit", func(context.Context) (int, error) { runtime.Goexit(); return 0, nil }, executor.Failed, 0,
			func(t *testing.T, err error) {
				if !errors.Is(err, executor.ErrGoexit) {
					t.Errorf("err = %v, want ErrGoexit", err)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)})
			// Queue a second task behind the first, so that the worker that
			// panics or exits must still hand on to it.
			h := submit(t, ex, executor.Task[int]{Group: "g", ID: "t1", Fn: tt.fn})
			h2 := submit(t, ex, executor.Task[int]{Group: "g", ID: "t2", Fn: func(context.Context) (int, error) { return 2, nil }})
			r := wait(t, h)
			if r.Status != tt.status || r.Value != tt.value || r.Group != "g" || r.ID != "t1" {
				t.Errorf("result = %+v, want status %v value %d", r, tt.status, tt.value)
			}
			if tt.check != nil {
				tt.check(t, r.Err)
			}
			if r2 := wait(t, h2); r2.Status != executor.Success || r2.Value != 2 {
				t.Errorf("next task = %+v, want Success 2", r2)
			}
			if s := groupStats(t, ex, "g"); s.Running != 0 || s.InFlight != 0 {
				t.Errorf("permits leaked: %+v", s)
			}
		})
	}
}

func TestResultTimings(t *testing.T) {
	clk := fakeClock()
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)}, executor.WithClock(clk))
	g := newGate()
	first := submit(t, ex, executor.Task[string]{Group: "g", ID: "a", Fn: g.fn("a")})
	g.waitStarted(t, 1)
	second := submit(t, ex, executor.Task[string]{Group: "g", ID: "b", Fn: func(ctx context.Context) (string, error) {
		clk.Advance(5 * time.Millisecond) // runs for 5ms of fake time
		return "b", nil
	}})
	clk.Advance(3 * time.Millisecond) // b waits 3ms
	g.open()
	if r := wait(t, first); r.Queued != 0 || r.Duration != 3*time.Millisecond {
		t.Errorf("first: queued %v duration %v, want 0 and 3ms", r.Queued, r.Duration)
	}
	if r := wait(t, second); r.Queued != 3*time.Millisecond || r.Duration != 5*time.Millisecond {
		t.Errorf("second: queued %v duration %v, want 3ms and 5ms", r.Queued, r.Duration)
	}
}

func TestInvalidTasks(t *testing.T) {
	ok := func(context.Context) (int, error) { return 0, nil }
	tests := []struct {
		name string
		ctx  context.Context
		task executor.Task[int]
	}{
		{"nil Fn", bg, executor.Task[int]{Group: "g"}},
		{"empty group", bg, executor.Task[int]{Fn: ok}},
		{"negative weight", bg, executor.Task[int]{Group: "g", Weight: -1, Fn: ok}},
		{"nil context", nil, executor.Task[int]{Group: "g", Fn: ok}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ex := newExec(t, nil)
			h, err := executor.Submit(ex, tt.ctx, tt.task)
			if h == nil {
				t.Fatal("nil handle")
			}
			if !errors.Is(err, executor.ErrInvalidTask) || !errors.Is(err, executor.ErrRejected) {
				t.Fatalf("err = %v, want ErrInvalidTask and ErrRejected", err)
			}
			if !isDone(h) {
				t.Fatal("handle not complete")
			}
			if r := wait(t, h); r.Status != executor.Rejected || !errors.Is(r.Err, executor.ErrInvalidTask) {
				t.Errorf("result = %+v", r)
			}
			if s := ex.Stats(); s.Rejected != 1 || s.Submitted != 0 {
				t.Errorf("counts = %+v, want 1 rejected, 0 submitted", s.TaskCounts)
			}
		})
	}
}

func TestTooHeavyIsRejectedWhateverThePolicy(t *testing.T) {
	limits := []struct {
		name  string
		opts  []policy.Option
		limit executor.Limit
	}{
		{"global", []policy.Option{policy.WithGlobalMaxInFlight(2), policy.WithDefaultMaxConcurrency(10)}, executor.LimitGlobalInFlight},
		{"group in-flight", []policy.Option{policy.WithDefaultMaxInFlight(2), policy.WithDefaultMaxConcurrency(10)}, executor.LimitGroupInFlight},
		{"group concurrency", []policy.Option{policy.WithDefaultMaxConcurrency(2)}, executor.LimitGroupConcurrency},
	}
	for _, l := range limits {
		for _, rp := range []policy.RejectionPolicy{policy.Abort, policy.Discard, policy.CallerRuns} {
			t.Run(l.name+"/"+rp.String(), func(t *testing.T) {
				ex := newExec(t, append(l.opts, policy.WithRejectionPolicy(rp)))
				ran := false
				h, err := executor.Submit(ex, bg, executor.Task[int]{Group: "g", ID: "big", Weight: 3,
					Fn: func(context.Context) (int, error) { ran = true; return 0, nil }})
				var re *executor.RejectedError
				if !errors.As(err, &re) || !errors.Is(err, executor.ErrTooHeavy) {
					t.Fatalf("err = %v, want a *RejectedError matching ErrTooHeavy", err)
				}
				if re.Limit != l.limit || re.Weight != 3 || re.Max != 2 || re.Group != "g" || re.ID != "big" {
					t.Errorf("RejectedError = %+v, want limit %q weight 3 max 2", re, l.limit)
				}
				if !strings.Contains(err.Error(), string(l.limit)) {
					t.Errorf("error %q does not name the limit", err)
				}
				if r := wait(t, h); r.Status != executor.Rejected || ran {
					t.Errorf("status %v, ran %v: want Rejected, never run", r.Status, ran)
				}
			})
		}
	}
}

func TestWeightZeroMeansOne(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(2)})
	g := newGate()
	defer g.open()
	submit(t, ex, executor.Task[string]{Group: "g", Weight: 0, Fn: g.fn("a")})
	submit(t, ex, executor.Task[string]{Group: "g", Weight: 0, Fn: g.fn("b")})
	g.waitStarted(t, 2)
	if s := groupStats(t, ex, "g"); s.Running != 2 || s.RunningTasks != 2 {
		t.Errorf("stats = %+v, want two tasks of weight 1 running", s)
	}
}

func TestWaitReturnsContextErrorAndTaskGoesOn(t *testing.T) {
	ex := newExec(t, nil)
	g := newGate()
	h := submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("a")})
	g.waitStarted(t, 1)
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if _, err := h.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v, want context.Canceled", err)
	}
	if _, ok := h.Result(); ok {
		t.Fatal("Result reports completion of a running task")
	}
	g.open()
	if r := wait(t, h); r.Status != executor.Success || r.Value != "a" {
		t.Errorf("result = %+v", r)
	}
}

// A panic ends the worker that ran the task (the recover is deferred once
// per worker, not once per task), so the tasks queued behind a panicking
// one must go to other goroutines: every one runs exactly once, in order,
// each panic is the task's own *PanicError, and no permit is left held.
func TestPanicsBeforeABacklog(t *testing.T) {
	for _, viaGo := range []bool{false, true} {
		t.Run(map[bool]string{false: "Submit", true: "Go"}[viaGo], func(t *testing.T) {
			ex := newExec(t, []policy.Option{policy.WithGlobalMaxInFlight(1), policy.WithDefaultMaxConcurrency(1)})
			const n = 200
			var ran [n]atomic.Int32
			var order []int // written by one task at a time: concurrency 1
			hs := make([]*executor.Handle[int], 0, n)
			for i := range n {
				fn := func(context.Context) (int, error) {
					ran[i].Add(1)
					order = append(order, i)
					if i%3 == 0 {
						panic(i)
					}
					return i, nil
				}
				if viaGo {
					if err := ex.Go(bg, "g", func(ctx context.Context) error { _, err := fn(ctx); return err }); err != nil {
						t.Fatal(err)
					}
					continue
				}
				h, err := executor.Submit(ex, bg, executor.Task[int]{Group: "g", Fn: fn})
				if err != nil {
					t.Fatal(err)
				}
				hs = append(hs, h)
			}
			drain(t, ex)
			for i, h := range hs {
				r := wait(t, h)
				var pe *executor.PanicError
				switch {
				case i%3 == 0 && (r.Status != executor.Failed || !errors.As(r.Err, &pe) || pe.Value != i):
					t.Errorf("task %d: %v %v, want Failed with its own panic", i, r.Status, r.Err)
				case i%3 != 0 && (r.Status != executor.Success || r.Value != i):
					t.Errorf("task %d: %v %v, want Success", i, r.Status, r.Value)
				}
			}
			for i := range n {
				if got := ran[i].Load(); got != 1 {
					t.Errorf("task %d ran %d times", i, got)
				}
			}
			for k, i := range order {
				if k != i {
					t.Fatalf("run %d was task %d: FIFO broken", k, i)
				}
			}
			s := ex.Stats()
			if s.Running != 0 || s.Waiting != 0 || s.Failed != n/3+1 || s.Succeeded != n-(n/3+1) {
				t.Errorf("stats %+v, want nothing held, %d failed", s, n/3+1)
			}
		})
	}
}
