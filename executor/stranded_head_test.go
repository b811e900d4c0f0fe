package executor_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// TestFollowersStartWhenStrandedHeadLeaves: a head made heavier than a
// lowered limit (the group's concurrency, or the global limit) holds its
// group's queue; the task behind it fits. However the head leaves the
// queue (its handle cancelled, its Do context ended, the queue timeout,
// displaced under DiscardOldest), the task behind it starts then, while
// the task that holds the permits still runs: no finish is needed to
// start it, and the head never runs.
func TestFollowersStartWhenStrandedHeadLeaves(t *testing.T) {
	const timeout = 10 * time.Second
	type removal struct {
		name   string
		viaDo  bool // the head is a Do call
		policy []policy.Option
		// remove takes the head out of the queue; follower is what was
		// queued behind it.
		remove func(t *testing.T, ex *executor.Executor, c *crew, head *executor.Handle[string], cancelDo context.CancelFunc, clk interface{ Advance(time.Duration) int })
		want   func(err error) bool // the head's error
	}
	removals := []removal{
		{name: "Cancel",
			remove: func(t *testing.T, _ *executor.Executor, _ *crew, head *executor.Handle[string], _ context.CancelFunc, _ interface{ Advance(time.Duration) int }) {
				if !head.Cancel() {
					t.Fatal("Cancel of the waiting head reported false")
				}
			},
			want: func(err error) bool { return errors.Is(err, context.Canceled) }},
		{name: "DoContext", viaDo: true,
			remove: func(_ *testing.T, _ *executor.Executor, _ *crew, _ *executor.Handle[string], cancelDo context.CancelFunc, _ interface{ Advance(time.Duration) int }) {
				cancelDo()
			},
			want: func(err error) bool { return errors.Is(err, context.Canceled) }},
		{name: "QueueTimeout", policy: []policy.Option{policy.WithQueueTimeout(timeout)},
			remove: func(_ *testing.T, _ *executor.Executor, _ *crew, _ *executor.Handle[string], _ context.CancelFunc, clk interface{ Advance(time.Duration) int }) {
				clk.Advance(timeout / 2) // the head's deadline, not the follower's
			},
			want: func(err error) bool { return errors.Is(err, executor.ErrQueueTimeout) }},
		{name: "DiscardOldest", policy: []policy.Option{policy.WithDefaultQueueThreshold(2), policy.WithRejectionPolicy(policy.DiscardOldest)},
			remove: func(t *testing.T, ex *executor.Executor, c *crew, _ *executor.Handle[string], _ context.CancelFunc, _ interface{ Advance(time.Duration) int }) {
				c.submit(t, ex, "g", "displacing", 1) // the queue holds 2: the head goes
			},
			want: func(err error) bool { return errors.Is(err, executor.ErrDisplaced) }},
	}
	for _, lowered := range []string{"group", "global"} {
		for _, rm := range removals {
			t.Run(lowered+"/"+rm.name, func(t *testing.T) {
				clk := fakeClock()
				popts := append([]policy.Option{policy.WithGlobalMaxInFlight(3), policy.WithDefaultMaxConcurrency(3)}, rm.policy...)
				ex := newExec(t, popts, executor.WithClock(clk))
				c := newCrew()
				// The holder runs in g for the group's limit, in another
				// group for the global one.
				holderGroup := "g"
				if lowered == "global" {
					holderGroup = "other"
				}
				holder := c.submit(t, ex, holderGroup, "holder", 1)
				c.waitStarted(t, 1)
				defer c.finish(t, holder)

				// The head: 1+3 > 3, it waits.
				var head *executor.Handle[string]
				doCtx, cancelDo := context.WithCancel(bg)
				defer cancelDo()
				doErr := make(chan error, 1)
				headRan := make(chan struct{}, 1)
				if rm.viaDo {
					go func() {
						doErr <- ex.DoWeighted(doCtx, "g", 3, func(context.Context) error { headRan <- struct{}{}; return nil })
					}()
					await(t, "the head Do waits", func() bool { s, ok := ex.GroupStats("g"); return ok && s.Waiting == 1 })
				} else {
					head = submit(t, ex, executor.Task[string]{Group: "g", ID: "head", Weight: 3,
						Fn: func(context.Context) (string, error) { headRan <- struct{}{}; return "", nil }})
				}
				clk.Advance(timeout / 2)
				follower := c.submit(t, ex, "g", "follower", 1) // FIFO: behind the head, though it fits
				if s := groupStats(t, ex, "g"); s.Waiting != 2 {
					t.Fatalf("before the change: %+v, want the head and its follower waiting", s)
				}
				if lowered == "group" {
					if err := ex.SetGroupLimits("g", limits(policy.DefaultMaxInFlight, 2, 2, 1)); err != nil {
						t.Fatal(err)
					}
				} else if err := ex.SetGlobalMaxInFlight(2); err != nil {
					t.Fatal(err)
				}
				c.noneStarted(t)

				rm.remove(t, ex, c, head, cancelDo, clk)
				if s := recv(t, c.started, "the follower started once the stranded head left"); s != "follower" {
					t.Fatalf("started %q, want the follower", s)
				}
				var err error
				if rm.viaDo {
					err = recv(t, doErr, "the head Do returned")
				} else {
					err = wait(t, head).Err
				}
				if !rm.want(err) {
					t.Errorf("the head ended with %v", err)
				}
				select {
				case <-headRan:
					t.Fatal("the head ran")
				default:
				}
				c.finish(t, follower)
				if rm.name == "DiscardOldest" {
					c.waitStarted(t, 1)
					close(c.release["displacing"])
				}
			})
		}
	}
}
