package executor_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// waitGroupGone waits until ex keeps no state for group.
func waitGroupGone(t *testing.T, ex *executor.Executor, group string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ex.EvictGroup(group)
		if _, ok := ex.GroupStats(group); !ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %q is still kept", group)
		}
		runtime.Gosched()
	}
}

// keptGoContext runs a Go task with context.Background in group and
// returns the context its fn kept.
func keptGoContext(t *testing.T, ex *executor.Executor, group string) context.Context {
	t.Helper()
	kept := make(chan context.Context, 1)
	if err := ex.Go(bg, group, func(ctx context.Context) error {
		_ = ctx.Done() // asked for while it runs, as a select on it does
		kept <- ctx
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return recv(t, kept, "the Go task ran")
}

// keptDoContext returns the context a Do call of ex, for group under
// parent, gave its function, kept past the call; the function asked for
// Done if askDone.
func keptDoContext(t *testing.T, ex *executor.Executor, parent context.Context, group string, askDone bool) context.Context {
	t.Helper()
	var kept context.Context
	if err := ex.Do(parent, group, func(ctx context.Context) error {
		if askDone {
			_ = ctx.Done()
		}
		kept = ctx
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return kept
}

// A context kept by a fn of a Go or Do call with context.Background, its
// group's, has ended once the executor is closed, whether or not its
// group's state was dropped meanwhile: a kept group ends it at Close, a
// dropped one when it is dropped, since no stop reaches it after.
func TestKeptGroupContextEndsAtCloseAfterEviction(t *testing.T) {
	for _, tc := range []struct {
		name string
		kept func(*testing.T, *executor.Executor, string) context.Context
	}{{"Go", keptGoContext}, {"Do", func(t *testing.T, ex *executor.Executor, group string) context.Context {
		return keptDoContext(t, ex, bg, group, true)
	}}} {
		for _, evict := range []bool{false, true} {
			name := tc.name + "/kept"
			if evict {
				name = tc.name + "/evicted"
			}
			t.Run(name, func(t *testing.T) {
				ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(2)})
				ctx := tc.kept(t, ex, "g")
				if evict {
					waitGroupGone(t, ex, "g")
					tc.kept(t, ex, "g") // a new group with the same key
				}
				ex.Close()
				select {
				case <-ctx.Done():
				default:
					t.Fatalf("the kept context is not done after Close (Err %v)", ctx.Err())
				}
				if ctx.Err() == nil {
					t.Fatal("the kept context's Err is nil after Close")
				}
			})
		}
	}
}

// A Go task of a group made again after its key's group was evicted runs
// with the new group's context: a ShutdownGroup whose wait ends cancels it,
// and a context kept from the evicted group is not what it sees.
func TestGoAfterEvictionSeesItsOwnGroupsStop(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(2)})
	for range 3 {
		keptGoContext(t, ex, "g") // spares for the group
	}
	waitGroupGone(t, ex, "g")
	started := make(chan context.Context, 1)
	if err := ex.Go(bg, "g", func(ctx context.Context) error {
		started <- ctx
		<-ctx.Done()
		return ctx.Err()
	}); err != nil {
		t.Fatal(err)
	}
	ctx := recv(t, started, "the Go task started")
	sctx, cancel := context.WithCancel(bg)
	cancel()
	if err := ex.ShutdownGroup(sctx, "g"); err == nil {
		t.Fatal("ShutdownGroup returned nil with a task blocked")
	}
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the running task's context is not cancelled by its group's stop")
	}
}
