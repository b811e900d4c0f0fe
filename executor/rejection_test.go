package executor_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"weak"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// full returns an executor whose group "g" has no room left: one task
// running and a queue threshold of 0.
func full(t *testing.T, rp policy.RejectionPolicy, eopts ...executor.Option) (*executor.Executor, *gate) {
	t.Helper()
	ex := newExec(t, []policy.Option{policy.WithDefaultQueueThreshold(0), policy.WithRejectionPolicy(rp)}, eopts...)
	g := newGate()
	t.Cleanup(g.open)
	submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("blocker")})
	g.waitStarted(t, 1)
	return ex, g
}

func TestAbort(t *testing.T) {
	ex, _ := full(t, policy.Abort)
	ran := false
	h, err := executor.Submit(ex, bg, executor.Task[int]{Group: "g", ID: "x", Fn: func(context.Context) (int, error) { ran = true; return 0, nil }})
	if !errors.Is(err, executor.ErrRejected) {
		t.Fatalf("err = %v, want ErrRejected", err)
	}
	if r := wait(t, h); r.Status != executor.Rejected || r.Err != err || ran {
		t.Errorf("result %+v ran=%v", r, ran)
	}
	if s := groupStats(t, ex, "g"); s.Rejected != 1 || s.Submitted != 2 {
		t.Errorf("counts %+v", s.TaskCounts)
	}
}

// TestRefusalOfATaskWithoutID checks that a refused Do, which has no ID,
// reads as the refusal of its group's task, not of a task named "".
func TestRefusalOfATaskWithoutID(t *testing.T) {
	ex, _ := full(t, policy.Abort)
	err := ex.Do(bg, "g", func(context.Context) error { return nil })
	const want = `executor: task of group "g" rejected by group queue threshold (weight 1, used 0 of 0)`
	if err == nil || err.Error() != want {
		t.Errorf("err = %v, want %s", err, want)
	}
	var rej *executor.RejectedError
	if !errors.As(err, &rej) || rej.ID != "" {
		t.Errorf("err = %#v, want a *RejectedError without ID", err)
	}
}

func TestDiscard(t *testing.T) {
	ex, _ := full(t, policy.Discard)
	ran := false
	h, err := executor.Submit(ex, bg, executor.Task[int]{Group: "g", Fn: func(context.Context) (int, error) { ran = true; return 0, nil }})
	if err != nil {
		t.Fatalf("err = %v, want nil under Discard", err)
	}
	if r := wait(t, h); r.Status != executor.Rejected || !errors.Is(r.Err, executor.ErrRejected) || ran {
		t.Errorf("result %+v ran=%v", r, ran)
	}
}

func TestCallerRuns(t *testing.T) {
	ex, _ := full(t, policy.CallerRuns)
	type marker struct{}
	ctx := context.WithValue(bg, marker{}, "v")
	var sawRunning int
	var sawValue any
	h, err := executor.Submit(ex, ctx, executor.Task[int]{Group: "g", Fn: func(ctx context.Context) (int, error) {
		sawRunning = groupStats(t, ex, "g").RunningTasks // runs outside the limits
		sawValue = ctx.Value(marker{})
		return 5, nil
	}})
	if err != nil {
		t.Fatalf("err = %v", err)
	}
	// Fn ran in this goroutine: it is complete when Submit returns, and its
	// plain writes are visible without synchronisation (the race detector
	// checks this).
	if !isDone(h) || sawRunning != 1 || sawValue != "v" {
		t.Fatalf("done=%v running=%d value=%v", isDone(h), sawRunning, sawValue)
	}
	if r := wait(t, h); r.Status != executor.Success || r.Value != 5 {
		t.Errorf("result %+v", r)
	}
	if s := groupStats(t, ex, "g"); s.CallerRuns != 1 || s.Succeeded != 1 || s.Rejected != 0 {
		t.Errorf("counts %+v", s.TaskCounts)
	}
}

func TestCallerRunsPanicIsContained(t *testing.T) {
	ex, _ := full(t, policy.CallerRuns)
	h, err := executor.Submit(ex, bg, executor.Task[int]{Group: "g", Fn: func(context.Context) (int, error) { panic("caller") }})
	var pe *executor.PanicError
	if r := wait(t, h); err != nil || r.Status != executor.Failed || !errors.As(r.Err, &pe) {
		t.Errorf("err %v result %+v", err, r)
	}
}

func TestRejectionHandler(t *testing.T) {
	custom := errors.New("custom")
	tests := []struct {
		name    string
		handler executor.RejectionHandler
		wantErr error
		status  executor.Status
		ran     bool
	}{
		{"returns an error", func(r *executor.Rejection) error { return custom }, custom, executor.Rejected, false},
		{"swallows", func(r *executor.Rejection) error { return nil }, nil, executor.Rejected, false},
		{"runs in caller", func(r *executor.Rejection) error { r.RunInCaller(); r.RunInCaller(); return nil }, nil, executor.Success, true},
		{"panics", func(r *executor.Rejection) error { panic("handler") }, executor.ErrRejected, executor.Rejected, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var seen *executor.Rejection
			h := func(r *executor.Rejection) error { seen = r; return tt.handler(r) }
			// The policy says Abort; the handler takes over.
			ex, _ := full(t, policy.Abort, executor.WithRejectionHandler(h))
			runs := 0
			hd, err := executor.Submit(ex, bg, executor.Task[int]{Group: "g", ID: "x", Weight: 1, Fn: func(context.Context) (int, error) { runs++; return 1, nil }})
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if seen == nil || seen.Group != "g" || seen.ID != "x" || !errors.Is(seen.Err, executor.ErrRejected) {
				t.Fatalf("handler saw %+v", seen)
			}
			r := wait(t, hd)
			if r.Status != tt.status || (runs == 1) != tt.ran || runs > 1 {
				t.Errorf("result %+v, runs %d", r, runs)
			}
		})
	}
}

func TestShutdownRefusalsIgnoreThePolicy(t *testing.T) {
	for _, rp := range []policy.RejectionPolicy{policy.Abort, policy.Discard, policy.CallerRuns} {
		t.Run(rp.String(), func(t *testing.T) {
			called := false
			ex := newExec(t, []policy.Option{policy.WithRejectionPolicy(rp)},
				executor.WithRejectionHandler(func(*executor.Rejection) error { called = true; return nil }))
			if err := ex.Shutdown(bg); err != nil {
				t.Fatal(err)
			}
			ran := false
			h, err := executor.Submit(ex, bg, executor.Task[int]{Group: "g", Fn: func(context.Context) (int, error) { ran = true; return 0, nil }})
			if !errors.Is(err, executor.ErrShutdown) || !errors.Is(err, executor.ErrRejected) {
				t.Fatalf("err = %v", err)
			}
			if r := wait(t, h); r.Status != executor.Rejected || ran || called {
				t.Errorf("result %+v ran=%v handler called=%v", r, ran, called)
			}
		})
	}
}

// TestRunInCallerAfterHandlerReturnsDoesNothing: a Rejection kept past its
// handler cannot run a task already completed Rejected.
func TestRunInCallerAfterHandlerReturnsDoesNothing(t *testing.T) {
	var kept *executor.Rejection
	ex, _ := full(t, policy.Abort, executor.WithRejectionHandler(func(r *executor.Rejection) error { kept = r; return nil }))
	ran := false
	h, _ := executor.Submit(ex, bg, executor.Task[int]{Group: "g", Fn: func(context.Context) (int, error) { ran = true; return 0, nil }})
	kept.RunInCaller()
	if r := wait(t, h); r.Status != executor.Rejected || ran {
		t.Errorf("result %+v ran=%v", r, ran)
	}
}

// TestRunInCallerFromAnotherGoroutine: a handler that starts RunInCaller on
// another goroutine and returns races with the refusal; either way the task
// runs at most once and its handle completes exactly once, with the outcome
// of whichever won.
func TestRunInCallerFromAnotherGoroutine(t *testing.T) {
	for range 200 {
		var started sync.WaitGroup
		ex, _ := full(t, policy.Abort, executor.WithRejectionHandler(func(r *executor.Rejection) error {
			started.Add(1)
			go func() { defer started.Done(); r.RunInCaller() }()
			return nil
		}))
		var runs atomic.Int32
		h, _ := executor.Submit(ex, bg, executor.Task[int]{Group: "g", Fn: func(context.Context) (int, error) { runs.Add(1); return 1, nil }})
		r := wait(t, h)
		waitAll(t, &started, "RunInCaller, called from another goroutine, returned")
		switch {
		case r.Status == executor.Success && runs.Load() == 1:
		case r.Status == executor.Rejected && runs.Load() == 0:
		default:
			t.Fatalf("status %v after %d runs", r.Status, runs.Load())
		}
	}
}

// TestRepeatedRefusalSharesHandle: tasks without an ID that their group
// refuses the same way get one completed handle, so that a refused Submit
// allocates nothing, and each refusal is still counted and reported. A task
// with an ID, a different refusal, another value type, or a refusal that a
// rejection handler decides gets a handle of its own.
func TestRepeatedRefusalSharesHandle(t *testing.T) {
	for _, rp := range []policy.RejectionPolicy{policy.Abort, policy.Discard} {
		t.Run(rp.String(), func(t *testing.T) {
			var rejected atomic.Int64
			ex, _ := full(t, rp, executor.WithListener(executor.ListenerFuncs{Rejected: func(e executor.Event) {
				if e.Group != "g" || e.Status != executor.Rejected || !errors.Is(e.Err, executor.ErrRejected) {
					t.Errorf("OnRejected %+v", e)
				}
				rejected.Add(1)
			}}))
			ran := false
			task := executor.Task[int]{Group: "g", Fn: func(context.Context) (int, error) { ran = true; return 1, nil }}
			refuse := func(task executor.Task[int]) *executor.Handle[int] {
				t.Helper()
				h, err := executor.Submit(ex, bg, task)
				if wantErr := rp == policy.Abort; (err != nil) != wantErr || err != nil && !errors.Is(err, executor.ErrRejected) {
					t.Fatalf("Submit: %v", err)
				}
				return h
			}
			first := refuse(task)
			if second := refuse(task); second != first {
				t.Fatal("a second refusal the same way got a new handle")
			}
			if n := testing.AllocsPerRun(100, func() { executor.Submit(ex, bg, task) }); n != 0 {
				t.Errorf("a repeated refusal allocated %v times, want 0", n)
			}
			if first.Cancel() {
				t.Error("Cancel of a refused task reported true")
			}
			select {
			case <-first.Done():
			default:
				t.Fatal("a refused handle is not done")
			}
			r := wait(t, first)
			if r.Status != executor.Rejected || !errors.Is(r.Err, executor.ErrRejected) || r.Group != "g" || r.ID != "" || r.Value != 0 || ran {
				t.Fatalf("result %+v ran=%v", r, ran)
			}
			if s := groupStats(t, ex, "g"); s.Rejected != 103 || rejected.Load() != 103 {
				t.Fatalf("rejected counted %d, reported %d, want 103 each", s.Rejected, rejected.Load())
			}

			withID := task
			withID.ID = "x"
			if h := refuse(withID); h == first || h.ID() != "x" {
				t.Fatalf("a task with an ID got handle %p (shared %p), ID %q", h, first, h.ID())
			}
			heavier := task
			heavier.Weight = 2 // over the concurrency limit: refused whatever the policy
			if h, _ := executor.Submit(ex, bg, heavier); h == first {
				t.Fatal("a refusal of another weight got the shared handle")
			} else if rh := wait(t, h); !errors.Is(rh.Err, executor.ErrTooHeavy) {
				t.Fatalf("heavier refusal: %+v", rh)
			}
			if h := refuse(task); h == first {
				t.Fatal("after another refusal, the old handle was shared")
			}
			// Another value type in the same group.
			hs, _ := executor.Submit(ex, bg, executor.Task[string]{Group: "g", Fn: func(context.Context) (string, error) { return "", nil }})
			if r := wait(t, hs); r.Status != executor.Rejected {
				t.Fatalf("string task: %+v", r)
			}
		})
	}
	t.Run("handler", func(t *testing.T) {
		ex, _ := full(t, policy.Abort, executor.WithRejectionHandler(func(r *executor.Rejection) error { return r.Err }))
		task := executor.Task[int]{Group: "g", Fn: func(context.Context) (int, error) { return 0, nil }}
		a, _ := executor.Submit(ex, bg, task)
		b, _ := executor.Submit(ex, bg, task)
		if a == b {
			t.Fatal("refusals a rejection handler decided share a handle")
		}
	})
}

// TestSharedRefusalHandleKeepsNoTask: the handle later refusals share is the
// first one's, which keeps neither its caller's context nor its Fn (what
// they hold is collected), so that a group refusing under overload does
// not keep one request's state alive for as long as it refuses.
func TestSharedRefusalHandleKeepsNoTask(t *testing.T) {
	ex, _ := full(t, policy.Abort)
	type held struct{ b [1 << 10]byte }
	type key struct{}
	inCtx, inFn := new(held), new(held)
	wCtx, wFn := weak.Make(inCtx), weak.Make(inFn)
	func() {
		ctx := context.WithValue(bg, key{}, inCtx)
		fnHeld := inFn // captured: the closure holds it
		task := executor.Task[int]{Group: "g", Fn: func(context.Context) (int, error) { return int(fnHeld.b[0]), nil }}
		first, _ := executor.Submit(ex, ctx, task)
		if again, _ := executor.Submit(ex, bg, executor.Task[int]{Group: "g", Fn: task.Fn}); again != first {
			t.Fatal("the second refusal got a handle of its own")
		}
	}()
	inCtx, inFn = nil, nil
	runtime.GC()
	runtime.GC()
	if wCtx.Value() != nil {
		t.Error("the shared handle keeps its first caller's context")
	}
	if wFn.Value() != nil {
		t.Error("the shared handle keeps its first task's Fn")
	}
	// The handle is still the group's: a third refusal gets it.
	h, _ := executor.Submit(ex, bg, executor.Task[int]{Group: "g", Fn: func(context.Context) (int, error) { return 0, nil }})
	if r := wait(t, h); r.Status != executor.Rejected || r.Group != "g" {
		t.Fatalf("result %+v", r)
	}
}

// TestIdleGroupKeepsNoRefusedHandle: a group keeps the handle of its last
// refused Submit only while it is busy. Neither a group idle when it
// refuses nor one that goes idle while the refused Submit is still under
// way (here, its OnRejected) keeps it.
func TestIdleGroupKeepsNoRefusedHandle(t *testing.T) {
	t.Run("idle when refusing", func(t *testing.T) {
		ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)})
		heavy := executor.Task[int]{Group: "g", Weight: 2, Fn: func(context.Context) (int, error) { return 0, nil }}
		if _, err := executor.Submit(ex, bg, heavy); !errors.Is(err, executor.ErrTooHeavy) {
			t.Fatalf("err = %v, want ErrTooHeavy", err)
		}
		if s := groupStats(t, ex, "g"); s.Running != 0 || s.InFlight != 0 {
			t.Fatalf("not idle: %+v", s)
		}
		if ex.KeepsRefusedHandle("g") {
			t.Error("an idle group keeps the handle of its refused Submit")
		}
	})
	t.Run("idle before the refusal ends", func(t *testing.T) {
		g := newGate()
		defer g.open()
		var blocker *executor.Handle[string]
		var once sync.Once
		ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1)}, executor.WithListener(executor.ListenerFuncs{
			Rejected: func(executor.Event) {
				once.Do(func() { // the group's last task finishes: it goes idle
					g.open()
					wait(t, blocker)
				})
			},
		}))
		blocker = submit(t, ex, executor.Task[string]{Group: "g", ID: "blocker", Fn: g.fn("blocker")})
		g.waitStarted(t, 1)
		if _, err := executor.Submit(ex, bg, executor.Task[int]{Group: "g", Fn: func(context.Context) (int, error) { return 0, nil }}); !errors.Is(err, executor.ErrRejected) {
			t.Fatalf("err = %v, want a refusal", err)
		}
		if s := groupStats(t, ex, "g"); s.Running != 0 || s.InFlight != 0 {
			t.Fatalf("not idle: %+v", s)
		}
		// The blocker's handle completes before its group goes idle: with
		// a listener, a task completes after its unlock, and the group
		// goes idle once it has (drain.go).
		select {
		case <-ex.Drained("g"):
		case <-time.After(10 * time.Second):
			t.Fatal("the group did not drain within 10s")
		}
		if ex.KeepsRefusedHandle("g") {
			t.Error("a group gone idle keeps the handle of its refused Submit")
		}
	})
	t.Run("busy", func(t *testing.T) {
		ex, _ := full(t, policy.Abort)
		task := executor.Task[int]{Group: "g", Fn: func(context.Context) (int, error) { return 0, nil }}
		first, _ := executor.Submit(ex, bg, task)
		if !ex.KeepsRefusedHandle("g") {
			t.Fatal("a busy group keeps no refused handle")
		}
		if again, _ := executor.Submit(ex, bg, task); again != first {
			t.Fatal("the second refusal got a handle of its own")
		}
	})
}

// A rejection handler that exits its goroutine (runtime.Goexit), which is
// the refused caller's, leaves the task refused and counted, as a handler
// that panics does: the task was counted submitted, and would otherwise
// never end in the counts.
func TestHandlerGoexitCountsRefusal(t *testing.T) {
	for _, via := range []string{"Submit", "Do", "Go"} {
		t.Run(via, func(t *testing.T) {
			ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1), policy.WithDefaultQueueThreshold(0)},
				executor.WithRejectionHandler(func(*executor.Rejection) error { runtime.Goexit(); return nil }))
			s := refuseOnItsOwnGoroutine(t, ex, via)
			if sum := s.Succeeded + s.Failed + s.Cancelled + s.Rejected; sum != s.Submitted || s.Rejected != 1 {
				t.Fatalf("%+v: want every submitted task's outcome counted, the refused one Rejected", s.TaskCounts)
			}
		})
	}
}

// refuseOnItsOwnGoroutine holds group a's one running place with a Do
// call, makes a call for a by via ("Submit", "Do" or "Go") on a goroutine
// of its own, which user code called for the refusal may exit, waits for
// that goroutine to end, lets the holder finish, and returns the counts.
func refuseOnItsOwnGoroutine(t *testing.T, ex *executor.Executor, via string) executor.Stats {
	t.Helper()
	release, started := make(chan struct{}), make(chan struct{})
	closeAtEnd(t, release)
	held := make(chan error, 1)
	go func() {
		held <- ex.Do(bg, "a", func(context.Context) error { close(started); <-release; return nil })
	}()
	recv(t, started, "the holder started")
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		switch via {
		case "Submit":
			executor.Submit(ex, bg, executor.Task[int]{Group: "a", Fn: func(context.Context) (int, error) { return 0, nil }})
		case "Do":
			ex.Do(bg, "a", func(context.Context) error { return nil })
		default:
			ex.Go(bg, "a", func(context.Context) error { return nil })
		}
	}()
	recv(t, exited, "the refused call's goroutine ended")
	close(release)
	if err := recv(t, held, "the holder returned"); err != nil {
		t.Fatalf("the task holding the group: %v", err)
	}
	return ex.Stats()
}
