package redislimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/groupexec/groupexec/cluster/redislimit"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// A Redis that answers every call with an error reply that says it cannot
// serve writes (here READONLY: a primary demoted to a replica by a
// failover, its clients still connected) cannot lease: the holder must
// count those calls failed, go down and apply its failure policy (FailOpen
// here: the task runs on a fallback permit), not count Redis as up and
// keep the task waiting for a lease that never comes.
func TestReadOnlyRedisIsAnOutage(t *testing.T) {
	addr := startRedis(t)
	h := newHolder(t, addr, redislimit.WithFailurePolicy(redislimit.FailOpen))
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(4)}, h.Groups(2), nil)
	run := func(group string) (executor.Result[int], error) {
		hd, err := executor.Submit(ex, bg, executor.Task[int]{Group: group,
			Fn: func(context.Context) (int, error) { return 1, nil }})
		if err != nil {
			t.Fatal(err)
		}
		return hd.Wait(ctxTimeout(t, 5*time.Second))
	}
	if r, err := run("a"); err != nil || r.Status != executor.Success {
		t.Fatalf("task before: %v %v %v", r.Status, r.Err, err)
	}
	// A replica of a primary it cannot reach: it keeps its data and
	// refuses every write.
	if err := newClient(t, addr).ReplicaOf(bg, "127.0.0.1", "1").Err(); err != nil {
		t.Fatal(err)
	}
	r, err := run("b")
	if err != nil || r.Status != executor.Success {
		t.Fatalf("task while Redis refuses writes, FailOpen: %v %v %v (stats %+v)", r.Status, r.Err, err, h.Stats())
	}
	if s := h.Stats(); s.Mode != redislimit.ModeDown || s.Fallbacks == 0 {
		t.Fatalf("stats %+v, want down with a fallback", s)
	}
}
