package executor_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// pauseOnce returns a hook that blocks its first caller until release is
// called, and reports through reached when it has been entered; later
// callers go through.
func pauseOnce() (hook func(), reached <-chan struct{}, release func()) {
	var once sync.Once
	in, out := make(chan struct{}), make(chan struct{})
	var rel sync.Once
	return func() {
			first := false
			once.Do(func() { first = true })
			if first {
				close(in)
				<-out
			}
		}, in, func() {
			rel.Do(func() { close(out) })
		}
}

// A ShutdownGroup on a key with no state makes the group's state to mark
// it shut down. A task submitted for the key meanwhile is either admitted
// (it came first) or refused as shut down: never refused as too heavy for
// the limits of a group it never had.
func TestShutdownGroupOfNewGroupRacingSubmit(t *testing.T) {
	for _, call := range []string{"Submit", "Do", "Go"} {
		t.Run(call, func(t *testing.T) {
			ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(4), policy.WithDefaultMaxInFlight(8)})
			hook, reached, release := pauseOnce()
			executor.SetHookMarked(hook)
			done := make(chan error, 1)
			go func() { done <- ex.ShutdownGroup(bg, "fresh") }()
			t.Cleanup(func() {
				release()
				recv(t, done, "ShutdownGroup returned once released")
				executor.SetHookMarked(nil)
			})
			recv(t, reached, "ShutdownGroup made the group's state") // not yet marked shut down
			fn := func(context.Context) error { return nil }
			var err error
			switch call {
			case "Submit":
				var h *executor.Handle[int]
				h, err = executor.Submit(ex, bg, executor.Task[int]{Group: "fresh", Fn: func(context.Context) (int, error) { return 1, nil }})
				if err == nil {
					wait(t, h)
				}
			case "Do":
				err = ex.Do(bg, "fresh", fn)
			case "Go":
				err = ex.Go(bg, "fresh", fn)
			}
			if err != nil && !errors.Is(err, executor.ErrGroupShutdown) {
				t.Fatalf("%s for a group being shut down: %v, want nil or ErrGroupShutdown", call, err)
			}
		})
	}
}

// Limits given by SetGroupLimits outlive the group's state: evicting an
// idle group and using it again must find the limits it had. Concurrent
// SetGroupLimits and ResetGroupLimits calls for one key leave it with the
// limits of the one whose change was made last, in force as well as kept.
func TestConcurrentGroupLimitChangesAgreeWithKeptLimits(t *testing.T) {
	a, b := limits(8, 2, 8, 1), limits(8, 3, 8, 1)
	for _, first := range []string{"SetGroupLimits", "ResetGroupLimits"} {
		t.Run(first, func(t *testing.T) {
			ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(4), policy.WithDefaultMaxInFlight(8), policy.WithDefaultQueueThreshold(8)})
			use := func() {
				if err := ex.Do(bg, "k", func(context.Context) error { return nil }); err != nil {
					t.Fatal(err)
				}
			}
			if err := ex.SetGroupLimits("k", a); err != nil {
				t.Fatal(err)
			}
			use() // the group has state
			hook, reached, release := pauseOnce()
			executor.SetHookOverridden(hook)
			var firstErr error
			done := make(chan struct{})
			go func() {
				defer close(done)
				if first == "SetGroupLimits" {
					firstErr = ex.SetGroupLimits("k", a)
				} else {
					firstErr = ex.ResetGroupLimits("k")
				}
			}()
			t.Cleanup(func() {
				release()
				recv(t, done, "the first call returned once released")
				executor.SetHookOverridden(nil)
			})
			recv(t, reached, "the first call made its change") // not yet applied
			if err := ex.SetGroupLimits("k", b); err != nil {
				t.Fatal(err)
			}
			release()
			if recv(t, done, "the first call returned once released"); firstErr != nil {
				t.Fatal(firstErr)
			}
			s, ok := ex.GroupStats("k")
			if !ok {
				t.Fatal("no state for k")
			}
			if !ex.EvictGroup("k") {
				t.Fatal("k, idle, was not evicted at once")
			}
			use()
			s2, _ := ex.GroupStats("k")
			if s.MaxConcurrency != s2.MaxConcurrency {
				t.Fatalf("k ran at concurrency %d, and at %d once evicted and used again (%s, then SetGroupLimits with %d)",
					s.MaxConcurrency, s2.MaxConcurrency, first, b.MaxConcurrency)
			}
		})
	}
}

// A group that waited for global room is known to the dispatcher for its
// fairness window. Once dropped (idle with WithMaxIdleGroups, evicted) it
// must not be kept there: while the global room stays taken, groups that
// come, wait, give up and are dropped would otherwise pile up, their state
// kept past WithMaxIdleGroups, until a window of dispatched starts ends.
func TestDroppedGroupsLeaveTheDispatcher(t *testing.T) {
	for _, maxIdle := range []int{0, 1, 4} {
		t.Run(fmt.Sprint("maxIdle=", maxIdle), func(t *testing.T) {
			ex := newExec(t, []policy.Option{policy.WithGlobalMaxInFlight(1), policy.WithDefaultMaxConcurrency(4)},
				executor.WithMaxIdleGroups(maxIdle))
			c := newCrew()
			hold := c.submit(t, ex, "hold", "hold", 1)
			c.waitStarted(t, 1)
			const n = 20
			for i := range n {
				ctx, cancel := context.WithCancel(bg)
				h, err := executor.Submit(ex, ctx, executor.Task[int]{Group: fmt.Sprint("k", i), Fn: func(context.Context) (int, error) { return 0, nil }})
				if err != nil {
					t.Fatal(err)
				}
				cancel()
				if r := wait(t, h); r.Status != executor.Cancelled {
					t.Fatalf("k%d: %+v, want Cancelled", i, r)
				}
			}
			for i := range n {
				ex.EvictGroup(fmt.Sprint("k", i)) // dropped now, or once its last task has settled
			}
			// A group is dropped once its cancelled task has completed,
			// which its Wait may see first: wait for the drops to be done.
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) { // a hang guard, not a timing assertion
				known, dropped := ex.KnownGroups()
				if dropped == 0 && ex.Stats().Groups == 1 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the dispatcher keeps %d dropped groups (of %d known); %d groups kept", dropped, known, ex.Stats().Groups)
				}
			}
			c.finish(t, hold)
		})
	}
}
