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

// TestQueueTimeoutAcrossBatches submits batches (ExecuteAll) and single
// tasks, some cancelled, into groups whose tasks wait under a queue
// timeout on a fake clock that a driver moves on in random steps, while
// limits change, and checks every result: a task timed out never ran and
// waited at least the timeout by the executor's clock; one that ran did
// so once; and the counts add up once all is done.
func TestQueueTimeoutAcrossBatches(t *testing.T) {
	seededRuns(t, "TIMEOUT_BATCH", 3, 1, func(t *testing.T, seed uint64) {
		var v violations
		const timeout = 10 * time.Millisecond
		clk := fakeClock()
		ex := newExec(t, []policy.Option{
			policy.WithGlobalMaxInFlight(3),
			policy.WithDefaultMaxConcurrency(1),
			policy.WithQueueTimeout(timeout),
		}, executor.WithClock(clk), executor.WithMaxIdleGroups(int(seed%2)))
		rr := rand.New(rand.NewPCG(seed, 99))
		var rmu sync.Mutex
		rnd := func(n int) int { rmu.Lock(); defer rmu.Unlock(); return rr.IntN(n) }
		bg := newBackground()
		bg.loop(func() { clk.Advance(time.Duration(rnd(4)) * time.Millisecond) })
		bg.loop(sometimes(rnd, 50, func() {
			_ = ex.SetGroupLimits(fmt.Sprint("g", rnd(3)), policy.GroupLimits{MaxInFlight: 1024, MaxConcurrency: 1 + rnd(2), QueueThreshold: policy.Unlimited, Share: 1 + rnd(3)})
		}))
		var tasks atomic.Int64
		var wg sync.WaitGroup
		for w := range 3 {
			r := rand.New(rand.NewPCG(seed, uint64(w)))
			wg.Go(func() {
				for b := range 40 {
					batch := make([]executor.Task[int], 1+r.IntN(5))
					runs := make([]atomic.Int32, len(batch))
					for i := range batch {
						batch[i] = executor.Task[int]{Group: fmt.Sprint("g", r.IntN(3)), ID: fmt.Sprint(w, "/", b, "/", i),
							Fn: func(ctx context.Context) (int, error) {
								runs[i].Add(1)
								// Runs for up to 6ms of the fake clock, which the driver moves on.
								for end := clk.Now().Add(time.Duration(i%4) * 2 * time.Millisecond); clk.Now().Before(end); {
									runtime.Gosched()
								}
								return i, nil
							}}
					}
					tasks.Add(int64(len(batch)))
					ctx, cancel := context.WithCancel(context.Background())
					if r.IntN(4) == 0 {
						time.AfterFunc(0, cancel) // some waiting tasks cancelled
					}
					rs := executor.ExecuteAll(ex, ctx, batch)
					cancel()
					for i, res := range rs {
						ran := runs[i].Load()
						switch {
						case ran > 1:
							v.add(fmt.Sprintf("task %s ran %d times", res.ID, ran))
						case errors.Is(res.Err, executor.ErrQueueTimeout) && (res.Status != executor.Rejected || ran != 0 || res.Queued < timeout):
							v.add(fmt.Sprintf("task %s timed out: %v, ran %d times, queued %v", res.ID, res.Status, ran, res.Queued))
						case (res.Status == executor.Success) != (ran == 1):
							v.add(fmt.Sprintf("task %s: %v (%v), ran %d times", res.ID, res.Status, res.Err, ran))
						}
					}
				}
			})
		}
		waitAll(t, &wg, "the batches")
		bg.halt()
		v.check(t)
		wantInvariants(t, ex)
		s := ex.Stats()
		n := uint64(tasks.Load())
		if outcomes := s.Succeeded + s.Failed + s.Cancelled + s.Rejected; s.Submitted != n || outcomes != n || s.Running != 0 || s.Waiting != 0 {
			t.Errorf("%d tasks: %+v", n, s)
		}
	})
}
