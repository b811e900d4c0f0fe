package redislimit_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/cluster/redislimit"
	"github.com/groupexec/groupexec/cluster/redislimit/redistest"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
	"github.com/redis/go-redis/v9"
)

// TestThreeExecutorsShareTheLimit runs three executors, each with its own
// holder (its own connection, renewal loop and leases: a process in all but
// the address space), under random load with random weights, cancellations
// and panics. Sampled from inside the tasks, the permits running per group
// across all three never exceed the group limit, nor the global limit; every
// task runs at most once and every handle completes; and when it is over no
// permit is held, here or in Redis.
func TestThreeExecutorsShareTheLimit(t *testing.T) {
	addr := redistest.Shared(t)
	const (
		groups   = 4
		perGroup = 3
		global   = 8
		tasks    = 400 // per submitter
	)
	var holders []*redislimit.Holder
	var exs []*executor.Executor
	for range 3 {
		h := newHolder(t, addr)
		holders = append(holders, h)
		// No queue timeout: a group left waiting with no notify coming
		// would hang the run, not just have its tasks rejected.
		exs = append(exs, newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(perGroup)},
			h.Groups(perGroup), h.Global(global)))
	}
	var running [groups]atomic.Int32
	var total atomic.Int32
	var violation atomic.Value
	var ran sync.Map // task id -> *atomic.Int32
	var submitted, completed atomic.Int64
	var wg sync.WaitGroup
	for s := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(s), 42))
			var hs []*executor.Handle[int]
			for i := range tasks {
				gi, w := r.IntN(groups), int32(1+r.IntN(2))
				id := fmt.Sprintf("%d-%d", s, i)
				ctx, cancel := context.WithCancel(bg)
				panics, cancelIt := r.IntN(20) == 0, r.IntN(8) == 0
				hd, _ := executor.Submit(exs[r.IntN(3)], ctx, executor.Task[int]{Group: fmt.Sprint("g", gi), ID: id, Weight: int(w),
					Fn: func(ctx context.Context) (int, error) {
						c, _ := ran.LoadOrStore(id, new(atomic.Int32))
						if c.(*atomic.Int32).Add(1) > 1 {
							violation.Store("task " + id + " ran twice")
						}
						if n := running[gi].Add(w); n > perGroup {
							violation.Store(fmt.Sprintf("group g%d: %d permits running across the executors, limit %d", gi, n, perGroup))
						}
						if n := total.Add(w); n > global {
							violation.Store(fmt.Sprintf("%d permits running across the executors, global limit %d", n, global))
						}
						defer total.Add(-w)
						defer running[gi].Add(-w)
						if _, ok := redislimit.FencingToken(ctx); !ok {
							violation.Store("task " + id + " has no fencing token")
						}
						if panics {
							panic("boom")
						}
						select {
						case <-time.After(time.Duration(rand.IntN(3000)) * time.Microsecond):
						case <-ctx.Done():
							return 0, ctx.Err()
						}
						return 1, nil
					}})
				submitted.Add(1)
				hs = append(hs, hd)
				if cancelIt {
					go func() { time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond); cancel() }()
				} else {
					defer cancel()
				}
			}
			for _, hd := range hs {
				if _, err := hd.Wait(ctxTimeout(t, time.Minute)); err != nil {
					violation.Store("a handle did not complete: " + hd.ID())
					return
				}
				completed.Add(1)
			}
		}()
	}
	wg.Wait()
	if v := violation.Load(); v != nil {
		t.Fatal(v)
	}
	if submitted.Load() != completed.Load() {
		t.Fatalf("%d submitted, %d completed", submitted.Load(), completed.Load())
	}
	var sum executor.Stats
	for i, ex := range exs {
		s := ex.Stats()
		if s.Running != 0 || s.Waiting != 0 {
			t.Fatalf("executor %d after the run: %+v", i, s)
		}
		sum.Started += s.Started
		sum.Rejected += s.Rejected
		sum.Cancelled += s.Cancelled
		sum.Failed += s.Failed
	}
	var trips, acquired uint64
	for i, h := range holders {
		s := h.Stats()
		if s.PermitsInUse != 0 {
			t.Fatalf("holder %d: %d permits still in use", i, s.PermitsInUse)
		}
		trips += s.RoundTrips
		acquired += s.Acquired
	}
	t.Logf("started %d (failed %d, cancelled %d), rejected %d; %d permits from blocks in %d round trips",
		sum.Started, sum.Failed, sum.Cancelled, sum.Rejected, acquired, trips)
	if sum.Rejected != 0 {
		t.Fatalf("%d tasks rejected: with no queue timeout every task must get its permits", sum.Rejected)
	}
	if sum.Started < tasks {
		t.Fatalf("only %d tasks started: the executors barely ran", sum.Started)
	}
	// Closing the holders gives every lease back to Redis.
	for _, ex := range exs {
		ex.Close()
	}
	for _, h := range holders {
		if err := h.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	checkNoLeases(t, addr, "t:"+t.Name())
}

// checkNoLeases fails if Redis holds a lease under prefix.
func checkNoLeases(t *testing.T, addr, prefix string) {
	t.Helper()
	c := newClient(t, addr)
	keys, err := c.Keys(bg, prefix+":*:n").Result()
	if err != nil {
		t.Fatalf("KEYS: %v", err)
	}
	for _, k := range keys {
		if m, err := c.HGetAll(bg, k).Result(); err != nil || len(m) != 0 {
			t.Fatalf("%s still holds leases after Close: %v %v", k, m, err)
		}
	}
}

var _ = errors.Is
var _ redis.Cmder
