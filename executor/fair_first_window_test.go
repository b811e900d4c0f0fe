package executor_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// Groups whose queues filled before a fairness window's first start wait
// throughout it, and count: the executor's first window, whose starts all
// came after both groups' backlogs, is reported over both.
func TestFairnessCountsGroupsThatFilledBeforeTheWindowsFirstStart(t *testing.T) {
	ex := newExec(t, []policy.Option{
		policy.WithGlobalMaxInFlight(1),
		policy.WithDefaultMaxInFlight(policy.Unlimited),
		policy.WithGroupShare("a", 3),
	})
	release := hold(t, ex, 1)
	const perGroup = 300 // the first window is 256 starts: both groups wait throughout it
	var runs atomic.Int64
	seen := make(chan executor.Fairness, 1)
	fn := func(context.Context) (int, error) {
		if runs.Add(1) == perGroup { // one start at a time: the first window has ended
			seen <- ex.Stats().Fairness
		}
		return 0, nil
	}
	var hs []*executor.Handle[int]
	for range perGroup {
		for _, grp := range []string{"a", "b"} {
			hs = append(hs, submit(t, ex, executor.Task[int]{Group: grp, Fn: fn}))
		}
	}
	release()
	for _, h := range hs {
		wait(t, h)
	}
	f := <-seen
	if f.Windows != 1 || f.Groups != 2 || f.Starts != 256 || f.Index < 0.99 {
		t.Errorf("fairness after the first window %+v, want it over both groups, index >= 0.99", f)
	}
}
