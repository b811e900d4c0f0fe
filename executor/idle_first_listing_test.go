package executor_test

import (
	"fmt"
	"testing"

	"github.com/groupexec/groupexec/executor"
)

// The first time the executor keeps more groups than WithMaxIdleGroups,
// it lists the groups that went idle before, in the order of its index.
// A group busy then, or shut down, is not idle: listed, it counted toward
// the list's length, and an idle group was reclaimed in its place while no
// more than WithMaxIdleGroups groups were idle. Which group the index puts
// first depends on its hash seed, so each case runs on several executors,
// with keys of their own.
func TestIdleGroupsNotReclaimedForGroupsThatAreNotIdle(t *testing.T) {
	const runs = 20
	for _, c := range []struct {
		name string
		keep func(t *testing.T, ex *executor.Executor, key string) (release func())
	}{
		{"busy", func(t *testing.T, ex *executor.Executor, key string) func() {
			g := newGate()
			h := submit(t, ex, executor.Task[string]{Group: key, Fn: g.fn(key)})
			g.waitStarted(t, 1)
			return func() { g.open(); wait(t, h) }
		}},
		{"shut down", func(t *testing.T, ex *executor.Executor, key string) func() {
			if err := ex.ShutdownGroup(bg, key); err != nil {
				t.Fatal(err)
			}
			return func() {}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			for i := range runs {
				ex := newExec(t, nil, executor.WithMaxIdleGroups(2))
				release := c.keep(t, ex, fmt.Sprint("kept", i))
				a, b := fmt.Sprint("a", i), fmt.Sprint("b", i)
				for _, key := range []string{a, b} {
					wait(t, submit(t, ex, executor.Task[int]{Group: key, Fn: succeed}))
				}
				_, keptA := ex.GroupStats(a)
				_, keptB := ex.GroupStats(b)
				release()
				if !keptA || !keptB {
					t.Fatalf("run %d: kept a %v, b %v: two idle groups under WithMaxIdleGroups(2), want both kept", i, keptA, keptB)
				}
			}
		})
	}
}
