package executor_test

import (
	"context"
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

// TestFanOutNearTheLimitsWithReentrantListener: parents admitted by Do and
// Submit in group "p" fan out with ExecuteAll to weighted sub-tasks in
// groups "s0" to "s2", under the limits docs/admission.md gives for a
// fan-out that cannot starve: p's concurrency limit is below the global
// limit by at least the heaviest sub-task, so the sub-tasks always have
// room. A listener calls back into the executor from every event: it
// reads Stats and GroupStats, changes the sub-groups' shares, and moves the
// global limit between its policy value and a little above, which keeps
// the guarantee. Every sub-task and parent must succeed, from inside each
// the group's permits running stay within its concurrency limit, and at
// the end nothing runs or waits and the counts sum up.
func TestFanOutNearTheLimitsWithReentrantListener(t *testing.T) {
	atProcs(t, func(t *testing.T) {
		for range 3 {
			testFanOutNearTheLimits(t)
		}
	})
}

func testFanOutNearTheLimits(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	r := rand.New(rand.NewPCG(seed, 0))
	var (
		maxW    = 1 + r.IntN(3)
		global  = maxW + 1 + r.IntN(3)
		parConc = global - maxW
		subConc = maxW + r.IntN(2)
	)
	const (
		parents  = 24
		subGroup = 3
	)
	t.Logf("seed %d: global %d, parents' concurrency %d, sub-groups' %d, sub-task weights up to %d", seed, global, parConc, subConc, maxW)

	var (
		v       violations
		exRef   atomic.Pointer[executor.Executor]
		events  atomic.Int64
		lr      = sharedRand(seed)
		running [1 + subGroup]atomic.Int64 // permits running: p, then s0...
	)
	listen := func(e executor.Event) {
		ex := exRef.Load()
		if ex == nil {
			return
		}
		events.Add(1)
		ex.Stats()
		ex.GroupStats(e.Group)
		switch lr(8) {
		case 0:
			s := lr(subGroup)
			l := limits(policy.Unlimited, subConc, policy.Unlimited, 1+lr(4))
			if err := ex.SetGroupLimits(fmt.Sprint("s", s), l); err != nil {
				v.add("listener's SetGroupLimits: " + err.Error())
			}
		case 1:
			if err := ex.SetGlobalMaxInFlight(global + lr(3)); err != nil {
				v.add("listener's SetGlobalMaxInFlight: " + err.Error())
			}
		}
	}
	ex := newExec(t, []policy.Option{
		policy.WithGlobalMaxInFlight(global),
		policy.WithDefaultMaxConcurrency(subConc),
		policy.WithGroupMaxConcurrency("p", parConc),
		policy.WithDefaultMaxInFlight(policy.Unlimited),
		policy.WithDefaultQueueThreshold(policy.Unlimited),
		policy.WithGlobalQueueThreshold(policy.Unlimited),
	}, executor.WithListener(executor.ListenerFuncs{
		Submitted: listen, Started: listen, Completed: listen, Rejected: listen,
	}))
	exRef.Store(ex)

	enter := func(gi, w, limit int) func() {
		if n := running[gi].Add(int64(w)); n > int64(limit) {
			v.add(fmt.Sprintf("group %d runs %d permits, limit %d", gi, n, limit))
		}
		return func() { running[gi].Add(-int64(w)) }
	}
	parent := func(ctx context.Context, pi int) error {
		defer enter(0, 1, parConc)()
		pr := rand.New(rand.NewPCG(seed, uint64(pi)+1))
		tasks := make([]executor.Task[int], 1+pr.IntN(6))
		for i := range tasks {
			si, w := pr.IntN(subGroup), 1+pr.IntN(maxW)
			tasks[i] = executor.Task[int]{Group: fmt.Sprint("s", si), Weight: w, Fn: func(context.Context) (int, error) {
				defer enter(1+si, w, subConc)()
				runtime.Gosched()
				return w, nil
			}}
		}
		for i, res := range executor.ExecuteAll(ex, ctx, tasks) {
			if res.Status != executor.Success || res.Value != tasks[i].Weight {
				return fmt.Errorf("sub-task %d: %v %v", i, res.Status, res.Err)
			}
		}
		return nil
	}
	var wg sync.WaitGroup
	for pi := range parents {
		wg.Go(func() {
			var err error
			if pi%2 == 0 {
				err = ex.Do(bg, "p", func(ctx context.Context) error { return parent(ctx, pi) })
			} else {
				var h *executor.Handle[int]
				h, err = executor.Submit(ex, bg, executor.Task[int]{Group: "p", Fn: func(ctx context.Context) (int, error) {
					return 0, parent(ctx, pi)
				}})
				if err == nil {
					res, _ := h.Wait(bg)
					err = res.Err
				}
			}
			if err != nil {
				v.add(fmt.Sprintf("parent %d: %v", pi, err))
			}
		})
	}
	waitAll(t, &wg, "every parent returned: a fan-out within the documented limits starved")
	v.check(t)
	await(t, "nothing running or waiting", func() bool {
		s := ex.Stats()
		return s.Running == 0 && s.RunningTasks == 0 && s.Waiting == 0
	})
	wantInvariants(t, ex)
	s := ex.Stats()
	if s.Submitted != s.Succeeded || s.Started != s.Submitted || s.Rejected+s.Failed+s.Cancelled != 0 {
		t.Errorf("every task should start and succeed: %+v", s.TaskCounts)
	}
	if events.Load() == 0 {
		t.Error("the listener heard nothing")
	}
}
