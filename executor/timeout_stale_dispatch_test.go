package executor_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// stallClock is a fake clock whose next Now, once armed, waits until
// resumed before reading the time: called under a group's mutex (a task
// joining a queue under a queue timeout reads its submission time there),
// it holds that mutex as long as the test wants.
type stallClock struct {
	*clock.Fake
	armed   atomic.Bool
	stalled chan struct{} // closed when the armed Now is called
	resume  chan struct{} // closed to let it read the time
}

func (c *stallClock) Now() time.Time {
	if c.armed.CompareAndSwap(true, false) {
		close(c.stalled)
		<-c.resume
	}
	return c.Fake.Now()
}

// TestDispatchedHeadPastItsTimeoutDoesNotStart: a dispatch pass reads the
// clock at the first group it serves and, in the same pass, may wait for
// the lock of the next. If that group's head passes its queue timeout
// meanwhile, it must be refused when the dispatcher gets to it, not
// started: WithQueueTimeout says a task that waits longer never runs.
//
// The clock's Now stalls under group y's lock (a task joining y's queue
// reads its time there), so that the dispatcher, having served x, waits
// for y while the time passes y's head's deadline. y's timer, which would
// refuse the head on its own, is held (SetHookExpiring) until the end.
func TestDispatchedHeadPastItsTimeoutDoesNotStart(t *testing.T) {
	const timeout = 10 * time.Second
	clk := &stallClock{Fake: fakeClock(), stalled: make(chan struct{}), resume: make(chan struct{})}
	ex := newExec(t, []policy.Option{
		policy.WithGlobalMaxInFlight(2),
		policy.WithDefaultMaxConcurrency(2),
		policy.WithQueueTimeout(timeout),
	}, executor.WithClock(clk))
	expiring := make(chan struct{})
	executor.SetHookExpiring(func(*executor.Executor) { <-expiring })
	defer executor.SetHookExpiring(nil)
	closeAtEnd(t, expiring)
	closeAtEnd(t, clk.resume)

	c := newCrew()
	holder := c.submit(t, ex, "h", "holder", 2)
	c.waitStarted(t, 1)
	x1 := c.submit(t, ex, "x", "x1", 1) // waits for global room, first in line
	var y1Ran atomic.Bool
	y1 := submit(t, ex, executor.Task[int]{Group: "y", ID: "y1", Fn: func(context.Context) (int, error) {
		y1Ran.Store(true)
		return 0, nil
	}})
	clk.Advance(timeout / 2)

	// y2 joins y's queue and reads its time under y's lock: stalled there.
	clk.armed.Store(true)
	y2 := make(chan *executor.Handle[string], 1)
	go func() { y2 <- c.submit(t, ex, "y", "y2", 1) }()
	recv(t, clk.stalled, "y2's admission read the clock")

	// The holder's finish dispatches: x1 starts, then the dispatcher waits
	// for y's lock, with the time it read at x.
	close(c.release["holder"])
	await(t, "the dispatcher served x", func() bool {
		s, ok := ex.GroupStats("x")
		return ok && s.RunningTasks == 1
	})
	clk.Advance(timeout) // y1 has now waited 1.5 timeouts
	close(clk.resume)

	res := wait(t, y1)
	if y1Ran.Load() || !errors.Is(res.Err, executor.ErrQueueTimeout) {
		t.Errorf("y1 ended %v (%v), having waited %v, ran %v: want refused by the queue timeout (%v), never run",
			res.Status, res.Err, res.Queued, y1Ran.Load(), timeout)
	}
	if r := wait(t, holder); r.Status != executor.Success {
		t.Fatalf("holder: %+v", r)
	}
	close(expiring)
	h2 := recv(t, y2, "y2's Submit returned")
	c.finish(t, x1)
	c.finish(t, h2)
}
