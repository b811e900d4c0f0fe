package executor_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// TestLightGroupNotStarvedWhileSharesChange: a light group of share 1
// waits for one global permit beside three heavy groups with deep
// backlogs, whose shares (1 to maxShare) and concurrency limits the running
// tasks change at every start, and whose tasks weigh 1. One permit, so the
// order of starts is the order of the functions' calls. A heavy group's
// turn is worth at most two shares (a changed share keeps at most one new
// share of credit for a turn under way), and the light group's turn comes
// once the others' have: between two of its starts, and before its
// first, at most 3 heavy turns of 2*maxShare starts each may come. Limits
// changing at every start must not make it wait longer: no starvation.
func TestLightGroupNotStarvedWhileSharesChange(t *testing.T) {
	atProcs(t, func(t *testing.T) {
		const (
			heavies  = 3
			maxShare = 4
			light    = 20
			backlog  = heavies * 2 * maxShare * (light + 1) // heavies never run out first
			bound    = heavies * 2 * maxShare               // heavy starts between two light ones
		)
		seed := uint64(time.Now().UnixNano())
		t.Logf("seed %d", seed)
		ex := newExec(t, []policy.Option{
			policy.WithGlobalMaxInFlight(1),
			policy.WithDefaultMaxConcurrency(1),
			policy.WithDefaultMaxInFlight(policy.Unlimited),
			policy.WithDefaultQueueThreshold(policy.Unlimited),
			policy.WithGlobalQueueThreshold(policy.Unlimited),
		})
		r := rand.New(rand.NewPCG(seed, 0))
		var (
			mu     sync.Mutex // the start log; r, used by the running task
			starts []string
			errs   []error
		)
		fn := func(grp string) func(context.Context) (int, error) {
			return func(context.Context) (int, error) {
				mu.Lock()
				defer mu.Unlock()
				starts = append(starts, grp)
				// Change a heavy group's share and concurrency limit.
				h := fmt.Sprint("h", r.IntN(heavies))
				if err := ex.SetGroupLimits(h, limits(policy.Unlimited, 1+r.IntN(2), policy.Unlimited, 1+r.IntN(maxShare))); err != nil {
					errs = append(errs, err)
				}
				return 0, nil
			}
		}
		release := hold(t, ex, 1)
		var hs []*executor.Handle[int]
		for i := range backlog {
			hs = append(hs, submit(t, ex, executor.Task[int]{Group: fmt.Sprint("h", i%heavies), Fn: fn(fmt.Sprint("h", i%heavies))}))
			if i < light {
				hs = append(hs, submit(t, ex, executor.Task[int]{Group: "light", Fn: fn("light")}))
			}
		}
		release()
		for _, h := range hs {
			if res := wait(t, h); res.Status != executor.Success {
				t.Fatalf("%s: %v %v", res.Group, res.Status, res.Err)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if len(errs) > 0 {
			t.Fatal(errs[0])
		}
		last, seen, widest := -1, 0, 0
		for i, g := range starts {
			if g != "light" {
				continue
			}
			gap := i - last - 1
			widest = max(widest, gap)
			if gap > bound {
				t.Errorf("light task %d started after %d heavy starts since the one before, want at most %d", seen, gap, bound)
			}
			last, seen = i, seen+1
		}
		t.Logf("at most %d heavy starts between two light ones (bound %d)", widest, bound)
		if seen != light {
			t.Fatalf("%d light starts, want %d", seen, light)
		}
	})
}
