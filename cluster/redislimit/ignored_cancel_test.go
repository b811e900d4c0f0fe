package redislimit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/groupexec/groupexec/cluster/redislimit"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// TestTaskThatIgnoresItsLostLeaseRunsOutsideTheLimit pins what the package
// doc says of a task that runs on after its lease is lost: its context is
// cancelled with a *LeaseLostError, and its slot is free in Redis at once
// (given back) or when the lease expires, counted by no holder: a task of
// another process is given it while the first one still runs.
func TestTaskThatIgnoresItsLostLeaseRunsOutsideTheLimit(t *testing.T) {
	addr := startRedis(t)
	h := newHolder(t, addr)
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(4)}, h.Groups(1), nil)
	release, cancelled := make(chan struct{}), make(chan error, 1)
	defer close(release)
	if _, err := executor.Submit(ex, bg, executor.Task[int]{Group: "g", Fn: func(ctx context.Context) (int, error) {
		<-ctx.Done()
		cancelled <- context.Cause(ctx)
		<-release // it runs on, ignoring the cancellation
		return 0, nil
	}}); err != nil {
		t.Fatal(err)
	}
	redislimit.SetRenewHook(h, func() error { return errors.New("cut off (test)") })
	select {
	case err := <-cancelled:
		if !errors.Is(err, redislimit.ErrLeaseLost) {
			t.Fatalf("the task's context ended with %v; want ErrLeaseLost", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the lease was not lost within 30s of the renewals being cut")
	}

	o := newHolder(t, addr)
	exo := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(4)}, o.Groups(1), nil)
	r, err := executor.Submit(exo, bg, executor.Task[int]{Group: "g",
		Fn: func(context.Context) (int, error) { return 1, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := r.Wait(ctxTimeout(t, 30*time.Second)); err != nil || res.Status != executor.Success {
		t.Fatalf("the other process's task: %v %v %v; want it run while the first still runs", res.Status, res.Err, err)
	}
}
