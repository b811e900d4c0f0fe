package executor_test

import (
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// TestLongestQueueTimeoutArmsOneTimer: the longest queue timeout the
// policy accepts (math.MaxInt64) arms its group's timer once, for the far
// future, however late on the executor's clock the task queues, and the
// timer does not fire: the deadline, a submission time plus the timeout,
// must not wrap to the past, where a timer fires at once, finds its head
// within the timeout, and arms another that fires at once, for as long as
// the task waits.
func TestLongestQueueTimeoutArmsOneTimer(t *testing.T) {
	clk := fakeClock()
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1), policy.WithQueueTimeout(math.MaxInt64)},
		executor.WithClock(clk))
	var fired atomic.Int64
	executor.SetHookExpiring(func(e *executor.Executor) {
		if e == ex {
			fired.Add(1)
		}
	})
	defer executor.SetHookExpiring(nil)
	clk.Advance(time.Hour) // the task queues an hour after the executor's epoch
	gate := newGate()
	defer gate.open()
	running := submit(t, ex, executor.Task[string]{Group: "g", Fn: gate.fn("running")})
	gate.waitStarted(t, 1)
	waiting := submit(t, ex, executor.Task[string]{Group: "g", Fn: gate.fn("waiting")})
	if n := clk.Pending(); n != 1 || fired.Load() != 0 {
		t.Errorf("%d timers pending and %d fired with a task waiting; want 1 pending, none fired", n, fired.Load())
	}
	gate.open()
	if r := wait(t, waiting); r.Status != executor.Success {
		t.Errorf("waiting task: %v (%v), want Success", r.Status, r.Err)
	}
	wait(t, running)
}
