package executor_test

import (
	"context"
	"fmt"
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
