package executor_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// A queue timeout's timer that fires for a head that has left the queue
// re-arms for the task now at its head at that task's deadline, also when
// the task joined the queue (time having passed) between the timer's
// firing and its locking the group: a timer that armed the next one from
// the time it read as it fired had the task time out late by the time
// that passed before it took the lock (a preempted goroutine, a contended
// lock; the time a test's fake clock moved meanwhile).
func TestQueueTimeoutRearmsAtTheHeadsDeadline(t *testing.T) {
	clk := fakeClock()
	const timeout = 25 * time.Millisecond
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1), policy.WithQueueTimeout(timeout)}, executor.WithClock(clk))
	first, second := newGate(), newGate()
	defer first.open()
	defer second.open()
	submit(t, ex, executor.Task[string]{Group: "g", Fn: first.fn("a")})
	first.waitStarted(t, 1)
	submit(t, ex, executor.Task[string]{Group: "g", Fn: second.fn("b")}) // the head: a timer for 25ms
	first.open()
	second.waitStarted(t, 1) // b left the queue; its timer stays armed

	firing, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	executor.SetHookExpiring(func(e *executor.Executor) {
		if e == ex {
			once.Do(func() { close(firing); <-resume })
		}
	})
	t.Cleanup(func() { executor.SetHookExpiring(nil) })
	if n := clk.Advance(timeout); n != 1 {
		t.Fatalf("b's deadline started %d timers, want its timer", n)
	}
	recv(t, firing, "b's timer firing") // it waits before locking the group
	clk.Advance(10 * time.Millisecond)
	var ran atomic.Bool
	c := submit(t, ex, executor.Task[int]{Group: "g", ID: "c", Fn: func(context.Context) (int, error) { ran.Store(true); return 0, nil }})
	executor.SetHookExpiring(nil)
	close(resume)
	await(t, "the timer re-armed for c", func() bool { return clk.Pending() == 1 })

	if n := clk.Advance(timeout); n != 1 {
		t.Fatalf("c's deadline, %v after it joined the queue, started %d timers, want one", timeout, n)
	}
	r := wait(t, c)
	if r.Status != executor.Rejected || !errors.Is(r.Err, executor.ErrQueueTimeout) || r.Queued != timeout {
		t.Errorf("c = %+v, want Rejected with ErrQueueTimeout after %v", r, timeout)
	}
	if ran.Load() {
		t.Error("c ran")
	}
}
