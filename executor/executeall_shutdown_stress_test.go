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

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// TestExecuteAllAcrossShutdown runs batches (ExecuteAll) from several
// goroutines while the executor shuts down, its wait cut short by a
// context that ends midway, or not, and checks each batch's results: one
// per task, in order, each task run at most once and only while admitted,
// a result Success or Failed exactly when its Fn ran, a refusal matching
// ErrRejected and one after the shutdown ErrShutdown; no Fn starts once
// a Shutdown that waited has returned; and the counts add up.
func TestExecuteAllAcrossShutdown(t *testing.T) {
	seededRuns(t, "EXECUTEALL_SHUTDOWN", 4, 1, func(t *testing.T, seed uint64) {
		var v violations
		r := rand.New(rand.NewPCG(seed, 7))
		ex := newExec(t, []policy.Option{
			policy.WithGlobalMaxInFlight(3),
			policy.WithDefaultMaxConcurrency(2),
			policy.WithDefaultMaxInFlight(8),
			policy.WithDefaultQueueThreshold(4),
			policy.WithRejectionPolicy([]policy.RejectionPolicy{policy.Abort, policy.Discard, policy.DiscardOldest}[r.IntN(3)]),
		}, executor.WithMaxIdleGroups(r.IntN(2)))
		cutShort := r.IntN(2) == 0
		var shutDown atomic.Bool // a Shutdown that waited has returned
		var tasks atomic.Int64
		var wg sync.WaitGroup
		batches := make(chan struct{}, 64) // one per batch returned
		for w := range 4 {
			r := rand.New(rand.NewPCG(seed, uint64(w)))
			wg.Go(func() {
				for b := range 30 {
					batch := make([]executor.Task[int], 1+r.IntN(6))
					runs := make([]atomic.Int32, len(batch))
					for i := range batch {
						batch[i] = executor.Task[int]{
							Group: fmt.Sprint("g", r.IntN(3)), ID: fmt.Sprint(w, "/", b, "/", i), Weight: 1 + r.IntN(2),
							Fn: func(ctx context.Context) (int, error) {
								if shutDown.Load() {
									v.add("a task ran after Shutdown returned")
								}
								runs[i].Add(1)
								runtime.Gosched()
								if i%3 == 2 {
									return i, errors.New("failed")
								}
								return i, nil
							},
						}
					}
					tasks.Add(int64(len(batch)))
					rs := executor.ExecuteAll(ex, context.Background(), batch)
					checkBatch(batch, rs, runs, v.add)
					select {
					case batches <- struct{}{}:
					default:
					}
				}
			})
		}
		for range 8 + r.IntN(16) { // some batches done before the shutdown
			recv(t, batches, "a batch")
		}
		ctx, cancel := context.WithCancel(context.Background())
		if cutShort {
			cancel()
		}
		if err := ex.Shutdown(ctx); err == nil {
			shutDown.Store(true)
		} else if !cutShort {
			t.Fatalf("Shutdown: %v", err)
		}
		cancel()
		waitAll(t, &wg, "the batches")
		v.check(t)
		if err := ex.Shutdown(guardCtx(t)); err != nil {
			t.Fatalf("second Shutdown: %v", err)
		}
		s := ex.Stats()
		n := uint64(tasks.Load())
		if outcomes := s.Succeeded + s.Failed + s.Cancelled + s.Rejected; s.Submitted != n || outcomes != n || s.Started != s.Succeeded+s.Failed {
			t.Errorf("%d tasks: %+v", n, s.TaskCounts)
		}
	})
}

// checkBatch reports what ExecuteAll's results rs for batch get wrong;
// runs counts each task's runs.
func checkBatch(batch []executor.Task[int], rs []executor.Result[int], runs []atomic.Int32, violate func(string)) {
	if len(rs) != len(batch) {
		violate(fmt.Sprintf("%d results for %d tasks", len(rs), len(batch)))
		return
	}
	for i, r := range rs {
		ran := runs[i].Load()
		switch {
		case r.ID != batch[i].ID || r.Group != batch[i].Group:
			violate(fmt.Sprintf("result %d is %s of %s, want %s of %s", i, r.ID, r.Group, batch[i].ID, batch[i].Group))
		case ran > 1:
			violate(fmt.Sprintf("task %s ran %d times", r.ID, ran))
		case (r.Status == executor.Success || r.Status == executor.Failed) != (ran == 1):
			violate(fmt.Sprintf("task %s: %v (%v) having run %d times", r.ID, r.Status, r.Err, ran))
		case r.Status == executor.Success && (r.Err != nil || r.Value != i):
			violate(fmt.Sprintf("task %s: Success with %d, %v", r.ID, r.Value, r.Err))
		case r.Status == executor.Rejected && !errors.Is(r.Err, executor.ErrRejected):
			violate(fmt.Sprintf("task %s: Rejected with %v, not matching ErrRejected", r.ID, r.Err))
		case r.Status == executor.Cancelled && !errors.Is(r.Err, executor.ErrShutdown):
			violate(fmt.Sprintf("task %s: Cancelled with %v, not matching ErrShutdown", r.ID, r.Err))
		}
	}
}
