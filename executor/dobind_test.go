package executor_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// A Do call whose cluster permit's Bind calls runtime.Goexit ends its
// caller's goroutine without running fn, as it ends a worker for a
// submitted task: the task's permits, local and cluster, come back.
func TestDoClusterBindGoexitReleases(t *testing.T) {
	glob, grp := newMemLimiter(), newMemLimiter()
	p, _ := policy.New(policy.WithDefaultMaxConcurrency(1))
	ex, err := executor.New(p, executor.WithGlobalLimiter(glob), executor.WithGroupLimiter(grp))
	if err != nil {
		t.Fatal(err)
	}
	glob.give("", 1)
	grp.give("a", 1)
	grp.onBind = runtime.Goexit
	ran, exited := false, make(chan struct{})
	go func() {
		defer close(exited)
		ex.Do(bg, "a", func(context.Context) error { ran = true; return nil })
	}()
	recv(t, exited, "the Do call whose Bind exits the goroutine ended")
	grp.onBind = nil
	if ran {
		t.Fatal("fn ran although Bind exited the goroutine")
	}
	if s := groupStats(t, ex, "a"); s.Running != 0 || s.InFlight != 0 {
		t.Fatalf("group holds %d running, %d in-flight permits after the call ended, want 0", s.Running, s.InFlight)
	}
	if a, b := glob.outstanding(), grp.outstanding(); a != 0 || b != 0 {
		t.Fatalf("cluster permits out: global %d group %d, want 0", a, b)
	}
	// Only now: Close waits for the running calls, and would wait for ever
	// for one leaked above.
	wantInvariants(t, ex)
	ex.Close()
}
