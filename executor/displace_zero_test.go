package executor_test

import (
	"errors"
	"testing"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// Under DiscardOldest a group whose queue threshold is 0 has no waiting
// task to give up: a task that cannot start at once is discarded, refused
// by the group queue threshold, as under Discard, and the running task is
// untouched.
func TestDiscardOldestZeroThresholdDiscards(t *testing.T) {
	ex := newExec(t, []policy.Option{
		policy.WithGroupQueueThreshold("g", 0),
		policy.WithRejectionPolicy(policy.DiscardOldest),
	})
	g := newGate()
	defer g.open()
	running := submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("running")})
	g.waitStarted(t, 1)
	h, err := executor.Submit(ex, bg, executor.Task[string]{Group: "g", ID: "new", Fn: g.fn("never")})
	var re *executor.RejectedError
	if err != nil {
		t.Fatalf("Submit: %v, want nil under DiscardOldest", err)
	}
	if r := wait(t, h); r.Status != executor.Rejected || !errors.As(r.Err, &re) ||
		re.Limit != executor.LimitGroupQueue || errors.Is(r.Err, executor.ErrDisplaced) {
		t.Fatalf("new task: %+v; want discarded by the group queue threshold", r)
	}
	if isDone(running) {
		t.Fatal("the running task completed")
	}
	if s := groupStats(t, ex, "g"); s.Running != 1 || s.Waiting != 0 {
		t.Errorf("stats: running %d, waiting %d; want 1, 0", s.Running, s.Waiting)
	}
}
