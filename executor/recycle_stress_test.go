package executor_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// TestReusedTasksRunTheirOwnWork submits Go and Do calls with
// context.Background, whose tasks are reused, from several goroutines into
// groups that are reclaimed as soon as they go idle (or kept), while
// groups are evicted, and checks from inside each call: its function runs
// once, with a context naming its own group, and the context of an
// earlier call in that group, kept past its end, still names the group it
// was given for. So no reused task runs another call's function, or lends
// a call a context of the group it served before.
func TestReusedTasksRunTheirOwnWork(t *testing.T) {
	seededRuns(t, "RECYCLE", 3, 1, func(t *testing.T, seed uint64) {
		var v violations
		ex := newExec(t, []policy.Option{
			policy.WithGlobalMaxInFlight(3),
			policy.WithDefaultMaxConcurrency(1 + int(seed%3)),
			policy.WithDefaultMaxInFlight(policy.Unlimited),
		}, executor.WithMaxIdleGroups(int(seed%2)))
		const groups, callers, calls = 4, 4, 300
		var kept [groups]atomic.Pointer[context.Context] // a context each group's calls were given, kept
		runs := make([]atomic.Int32, callers*calls)
		var wg sync.WaitGroup
		bg := newBackground()
		bg.loop(func() { ex.EvictGroup(fmt.Sprint("g", rand.IntN(groups))) })
		for c := range callers {
			r := rand.New(rand.NewPCG(seed, uint64(c)))
			wg.Go(func() {
				for n := range calls {
					id, k := c*calls+n, r.IntN(groups)
					group := fmt.Sprint("g", k)
					fn := func(ctx context.Context) error {
						if got := runs[id].Add(1); got != 1 {
							v.add(fmt.Sprintf("call %d ran %d times", id, got))
						}
						if g, ok := executor.GroupFromContext(ctx); !ok || g != group {
							v.add(fmt.Sprintf("call %d for %s: its context names %q, %v", id, group, g, ok))
						}
						if old := kept[k].Load(); old != nil {
							if g, ok := executor.GroupFromContext(*old); ok && g != group {
								v.add(fmt.Sprintf("a context kept from a call for %s names %q", group, g))
							}
						}
						kept[k].Store(&ctx)
						return nil
					}
					if r.IntN(2) == 0 {
						if err := ex.Go(context.Background(), group, fn); err != nil {
							v.add(fmt.Sprintf("Go %d: %v", id, err))
							runs[id].Add(1)
						}
					} else if err := ex.Do(context.Background(), group, fn); err != nil {
						v.add(fmt.Sprintf("Do %d: %v", id, err))
					}
				}
			})
		}
		waitAll(t, &wg, "the callers")
		if err := ex.Shutdown(guardCtx(t)); err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
		bg.halt()
		for id := range runs {
			if n := runs[id].Load(); n != 1 {
				v.add(fmt.Sprintf("call %d ran %d times", id, n))
			}
		}
		v.check(t)
	})
}
