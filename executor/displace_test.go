package executor_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// TestDiscardOldestKeepsTheRoomItMakes: under DiscardOldest with a global
// queue threshold, a task that finds its group's queue full displaces the
// group's oldest waiting task to take its place. The place it makes in
// the global queue threshold is the new task's: another group's admission
// meanwhile must not take it, or the displaced task is lost for nothing
// and the new one refused as well. Group a's queue is kept full by one
// submitter, so each of its tasks displaces one and none is refused, while
// another goroutine keeps the global queue full with group b's tasks.
func TestDiscardOldestKeepsTheRoomItMakes(t *testing.T) {
	for _, procs := range []int{2, 8} {
		t.Run(fmt.Sprint("GOMAXPROCS=", procs), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			testDiscardOldestKeepsTheRoomItMakes(t)
		})
	}
}

func testDiscardOldestKeepsTheRoomItMakes(t *testing.T) {
	const (
		queueA      = 4
		globalQueue = 20
		rounds      = 50000
	)
	ex := newExec(t, []policy.Option{
		policy.WithGlobalMaxInFlight(100),
		policy.WithDefaultMaxConcurrency(1),
		policy.WithDefaultMaxInFlight(1000),
		policy.WithDefaultQueueThreshold(1000),
		policy.WithGroupQueueThreshold("a", queueA),
		policy.WithGlobalQueueThreshold(globalQueue),
		policy.WithRejectionPolicy(policy.DiscardOldest),
	})
	g := newGate()
	defer g.open()
	submit(t, ex, executor.Task[string]{Group: "a", Fn: g.fn("a")})
	submit(t, ex, executor.Task[string]{Group: "b", Fn: g.fn("b")})
	g.waitStarted(t, 2)
	noop := func(context.Context) (string, error) { return "", nil }
	for range queueA {
		submit(t, ex, executor.Task[string]{Group: "a", Fn: noop})
	}
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-stop:
				return
			default:
				executor.Submit(ex, bg, executor.Task[string]{Group: "b", Fn: noop})
			}
		}
	}()
	defer func() { close(stop); <-stopped }()
	for i := range rounds {
		h, err := executor.Submit(ex, bg, executor.Task[string]{Group: "a", Fn: noop})
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		if r, done := h.Result(); done {
			s := groupStats(t, ex, "a")
			t.Fatalf("round %d: the new task was refused (%v) after its group's queue made room: group a waits %d of %d, %d rejected for %d submitted",
				i, r.Err, s.Waiting, queueA, s.Rejected, s.Submitted)
		}
	}
}
