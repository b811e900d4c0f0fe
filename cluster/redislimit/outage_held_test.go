package redislimit_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/groupexec/groupexec/cluster/redislimit"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// A holder holds the whole group limit of 1, a task runs on it, and Redis
// becomes unreachable (three renewal rounds fail; the lease is still valid
// here for minutes). A task that comes now needs no permit from Redis: the
// lease at hand serves it once the running task ends, as it serves a task
// that was queued before the outage. FailClosed must not refuse it: it
// refuses only tasks that need a permit the holder has no lease for.
func TestOutageWithTheWholeLimitHereQueuesTheTask(t *testing.T) {
	addr := startRedis(t)
	h := newHolder(t, addr, manualRenewals()...)
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(4)}, h.Groups(1), nil)
	release, started := make(chan struct{}), make(chan struct{})
	var once sync.Once
	end := func() { once.Do(func() { close(release) }) }
	defer end()
	running, err := executor.Submit(ex, bg, executor.Task[int]{Group: "g", Fn: func(context.Context) (int, error) {
		close(started)
		<-release
		return 0, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	<-started
	redislimit.SetRenewHook(h, func() error { return errors.New("cut off (test)") })
	for range 3 {
		redislimit.RenewNow(h)
	}
	if s := h.Stats(); s.Mode != redislimit.ModeDown || s.Leases != 1 {
		t.Fatalf("stats %+v; want down, the lease still held", s)
	}
	next, err := executor.Submit(ex, bg, executor.Task[int]{Group: "g",
		Fn: func(context.Context) (int, error) { return 1, nil }})
	if err != nil {
		t.Fatal(err)
	}
	end()
	if r, err := running.Wait(ctxTimeout(t, 5*time.Second)); err != nil || r.Status != executor.Success {
		t.Fatalf("the running task: %v %v %v", r.Status, r.Err, err)
	}
	if r, err := next.Wait(ctxTimeout(t, 5*time.Second)); err != nil || r.Status != executor.Success {
		t.Fatalf("the task submitted during the outage, with the whole limit leased here: %v %v %v (stats %+v); "+
			"want it run on the lease", r.Status, r.Err, err, h.Stats())
	}
}
