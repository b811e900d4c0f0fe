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

// fickleLimiter is a memLimiter that, on draws of its own, answers "not
// now" with permits at hand (the test's notifier loop notifies after), refuses
// with an error, panics in TryAcquire, or hands out a permit whose Release
// panics once it has given the permit back.
type fickleLimiter struct {
	*memLimiter
	rnd func(int) int
}

var errFickleQuota = errors.New("cluster quota refused")

func (l *fickleLimiter) TryAcquire(key string, n int) (executor.LimiterPermit, error) {
	switch l.rnd(24) {
	case 0:
		return nil, nil
	case 1:
		return nil, errFickleQuota
	case 2:
		panic("limiter bug")
	}
	p, err := l.memLimiter.TryAcquire(key, n)
	if p != nil && l.rnd(8) == 0 {
		return panickyRelease{p}, err
	}
	return p, err
}

type panickyRelease struct{ executor.LimiterPermit }

func (p panickyRelease) Release() {
	p.LimiterPermit.Release()
	panic("release bug")
}

// TestClusterChurnStress runs Submit, Go and Do calls, weighted, some with
// contexts cancelled, under a global and a group limiter that answer "not
// now", refuse, panic in TryAcquire and in a permit's Release, while the
// local limits change, groups are evicted and queue timeouts expire on a
// fake clock: no more cluster permits are ever in use than the limiters
// hold, every permit comes back once, every task runs at most once, every
// handle and call ends, and the counts add up.
func TestClusterChurnStress(t *testing.T) {
	seededRuns(t, "GROUPEXEC_CLUSTER_CHURN", 2, 1, runClusterChurn)
}

func runClusterChurn(t *testing.T, seed uint64) {
	const groups, perGroup, global = 4, 2, 4
	rnd := sharedRand(seed)
	glob := &fickleLimiter{memLimiter: newMemLimiter(), rnd: rnd}
	grp := &fickleLimiter{memLimiter: newMemLimiter(), rnd: rnd}
	glob.avail[""] = global
	for i := range groups {
		grp.avail[fmt.Sprint("g", i)] = perGroup
	}
	clk := fakeClock()
	ex := newExec(t, []policy.Option{policy.WithGlobalMaxInFlight(6), policy.WithDefaultMaxConcurrency(3),
		policy.WithQueueTimeout(20 * time.Millisecond)},
		executor.WithClock(clk), executor.WithGlobalLimiter(glob), executor.WithGroupLimiter(grp))

	var v violations
	var total atomic.Int64
	var inGroup [groups]atomic.Int64
	body := func(gi, w int, runs *atomic.Int32) func(context.Context) error {
		return func(context.Context) error {
			if runs.Add(1) > 1 {
				v.add("a task ran twice")
			}
			if n := total.Add(int64(w)); n > global {
				v.add(fmt.Sprintf("%d cluster permits running, the global limiter holds %d", n, global))
			}
			if n := inGroup[gi].Add(int64(w)); n > perGroup {
				v.add(fmt.Sprintf("group g%d: %d cluster permits running, its limiter holds %d", gi, n, perGroup))
			}
			runtime.Gosched()
			inGroup[gi].Add(-int64(w))
			total.Add(-int64(w))
			return nil
		}
	}

	back := newBackground()
	defer func() {
		select {
		case <-back.stop:
		default:
			back.halt()
		}
	}()
	back.loop(sometimes(rnd, 3, func() { // refills, and the notify a spurious "not now" owes
		glob.notify("")
		grp.notify(fmt.Sprint("g", rnd(groups)))
	}))
	back.loop(sometimes(rnd, 20, func() { clk.Advance(time.Millisecond) }))
	back.churn(ex, rnd, 60, groups, 3, 2, 6, v.add)
	back.checkInvariants(ex, v.add)

	var handles sync.Map
	var callers sync.WaitGroup
	for c := range 6 {
		callers.Go(func() {
			r := rand.New(rand.NewPCG(seed, uint64(c)))
			for i := range 120 {
				gi, w := r.IntN(groups), 1+r.IntN(2)
				key := fmt.Sprint("g", gi)
				ctx, cancel := context.WithCancel(bg)
				runs := new(atomic.Int32)
				kind := r.IntN(3)
				if kind == 1 {
					w = 1 // Go takes no weight
				}
				fn := body(gi, w, runs)
				switch kind {
				case 0:
					h, _ := executor.Submit(ex, ctx, executor.Task[int]{Group: key, ID: fmt.Sprint(c, "-", i), Weight: w,
						Fn: func(ctx context.Context) (int, error) { return 0, fn(ctx) }})
					handles.Store(h, struct{}{})
				case 1:
					_ = ex.Go(ctx, key, fn)
				default:
					if r.IntN(3) == 0 {
						go func() { runtime.Gosched(); cancel() }()
					}
					_ = ex.DoWeighted(ctx, key, w, fn)
				}
				if r.IntN(4) == 0 {
					cancel()
				}
				defer cancel()
			}
		})
	}
	waitAll(t, &callers, "every caller returned")
	handles.Range(func(k, _ any) bool { wait(t, k.(*executor.Handle[int])); return true })
	await(t, "every task ended", func() bool {
		s := ex.Stats()
		return s.Running == 0 && s.Waiting == 0 && s.Submitted == s.Succeeded+s.Failed+s.Cancelled+s.Rejected
	})
	back.halt()
	v.check(t)
	if a, b := glob.outstanding(), grp.outstanding(); a != 0 || b != 0 {
		t.Fatalf("cluster permits out at the end: global %d, group %d", a, b)
	}
	if n := glob.doubles.Load() + grp.doubles.Load(); n != 0 {
		t.Fatalf("%d cluster permits released twice", n)
	}
	wantInvariants(t, ex)
}
