package executor_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// A WithSpawn function that panics, before or after starting its worker,
// loses no task and runs none twice: every handle completes Success, every
// Done channel closes, each Fn runs once and the permits all come back.
// Spawn is called from Submit and from finishing workers (between a task's
// release and the close of its Done channel), and both see the panics.
func TestSpawnPanicLosesNothing(t *testing.T) {
	var calls, before, after atomic.Int32
	spawn := func(f func()) {
		switch calls.Add(1) % 3 {
		case 0:
			before.Add(1)
			panic("spawn refused")
		case 1:
			go f()
			after.Add(1)
			panic("spawn started the worker, then panicked")
		default:
			go f()
		}
	}
	ex := newExec(t, []policy.Option{policy.WithGlobalMaxInFlight(8), policy.WithDefaultMaxConcurrency(1)},
		executor.WithSpawn(spawn))

	const tasks, groups = 600, 30
	runs := make([]atomic.Int32, tasks)
	gate := make(chan struct{})
	hs := make([]*executor.Handle[int], tasks)
	done := make([]<-chan struct{}, tasks)
	for i := range tasks {
		h, err := executor.Submit(ex, bg, executor.Task[int]{Group: fmt.Sprint("g", i%groups), Fn: func(context.Context) (int, error) {
			runs[i].Add(1)
			if i < 16 {
				<-gate // the first tasks hold their permits, so that later ones queue and workers finish in bursts
			}
			return i, nil
		}})
		if err != nil {
			t.Fatalf("submit %d: %v", i, err)
		}
		hs[i], done[i] = h, h.Done()
	}
	close(gate)

	// The bound only turns a stranded task (the failure) into a report
	// instead of a hang; no outcome depends on speed.
	ctx, cancel := context.WithTimeout(bg, 30*time.Second)
	defer cancel()
	for i, h := range hs {
		select {
		case <-done[i]:
		case <-ctx.Done():
			t.Fatalf("task %d: Done channel still open (runs %d)", i, runs[i].Load())
		}
		r, err := h.Wait(ctx)
		if err != nil || r.Status != executor.Success || r.Value != i {
			t.Fatalf("task %d: %v %v %v (wait %v)", i, r.Status, r.Value, r.Err, err)
		}
		if n := runs[i].Load(); n != 1 {
			t.Fatalf("task %d ran %d times", i, n)
		}
	}
	if before.Load() == 0 || after.Load() == 0 {
		t.Fatalf("spawn panicked %d times before starting and %d after: the test missed a case", before.Load(), after.Load())
	}
	if s := ex.Stats(); s.Running != 0 || s.Waiting != 0 {
		t.Fatalf("after every task: %d running, %d waiting", s.Running, s.Waiting)
	}
	sctx, scancel := context.WithTimeout(bg, 30*time.Second)
	defer scancel()
	if err := ex.Shutdown(sctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

// A WithSpawn function that exits its goroutine (runtime.Goexit), which is
// the caller's of Submit here, before starting the worker, must not strand
// the task: it holds its permits, and Close would wait for its worker for
// ever. The executor starts the worker itself, as for a spawn that panics;
// one that started it first has it run once.
func TestSpawnGoexitLosesNothing(t *testing.T) {
	for _, started := range []bool{false, true} {
		t.Run(fmt.Sprint("started=", started), func(t *testing.T) {
			var calls atomic.Int32
			spawn := func(f func()) {
				if calls.Add(1) == 1 {
					if started {
						go f()
					}
					runtime.Goexit()
				}
				go f()
			}
			p, err := policy.New(policy.WithDefaultMaxConcurrency(1))
			if err != nil {
				t.Fatal(err)
			}
			ex, err := executor.New(p, executor.WithSpawn(spawn))
			if err != nil {
				t.Fatal(err)
			}
			var runs atomic.Int32
			var h *executor.Handle[int]
			exited := make(chan struct{})
			go func() {
				defer close(exited)
				h, _ = executor.Submit(ex, bg, executor.Task[int]{Group: "g", Fn: func(context.Context) (int, error) {
					runs.Add(1)
					return 1, nil
				}})
			}()
			<-exited
			if h != nil {
				t.Fatal("Submit returned: spawn did not exit the goroutine")
			}
			ctx, cancel := context.WithTimeout(bg, 10*time.Second) // a hang guard
			defer cancel()
			// Admitted once the first task's permits are back.
			if err := ex.Do(ctx, "g", func(context.Context) error { return nil }); err != nil {
				t.Fatalf("the next call: %v (the first task never ran: runs %d)", err, runs.Load())
			}
			if n := runs.Load(); n != 1 {
				t.Fatalf("the first task ran %d times", n)
			}
			if err := ex.Shutdown(ctx); err != nil {
				t.Fatalf("Shutdown: %v", err)
			}
			ex.Close()
		})
	}
}
