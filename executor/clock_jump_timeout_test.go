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

// jumpClock reads a Fake's time shifted by an offset that a test changes
// to step the clock back or jump it forward without its timers firing, as
// a wall clock set by hand does; its timers are the Fake's.
type jumpClock struct {
	*clock.Fake
	off atomic.Int64
}

func (c *jumpClock) Now() time.Time { return c.Fake.Now().Add(time.Duration(c.off.Load())) }

func (c *jumpClock) shift(d time.Duration) { c.off.Add(int64(d)) }

// A clock that steps back while a task waits stops the executor's time
// (WithClock): the queue timeout's timer, firing on schedule, finds the
// task has waited no time, and arms again; the task expires once the
// clock passes its latest reading by the timeout, having waited the
// timeout to the executor.
func TestQueueTimeoutOnAClockSteppedBack(t *testing.T) {
	clk := &jumpClock{Fake: fakeClock()}
	ex := newExec(t, []policy.Option{policy.WithGlobalMaxInFlight(1), policy.WithQueueTimeout(time.Minute)},
		executor.WithClock(clk))
	hold := newGate()
	defer hold.open()
	submit(t, ex, executor.Task[string]{Group: "x", Fn: hold.fn("x")})
	hold.waitStarted(t, 1)
	var ran atomic.Bool
	h := submit(t, ex, executor.Task[string]{Group: "a", Fn: func(context.Context) (string, error) { ran.Store(true); return "", nil }})
	if n := clk.Pending(); n != 1 {
		t.Fatalf("%d timers armed, want the queue timeout's", n)
	}

	clk.shift(-time.Hour)
	clk.Advance(time.Minute) // the timer fires at its time; the clock reads an hour less
	await(t, "the timer armed again", func() bool { return clk.Pending() == 1 })
	if isDone(h) {
		r := wait(t, h)
		t.Fatalf("a task that waited no time by the clock, stepped back: %v %v", r.Status, r.Err)
	}

	clk.Advance(time.Hour) // the clock reads a minute past the task's submission
	r := wait(t, h)
	if r.Status != executor.Rejected || !errors.Is(r.Err, executor.ErrQueueTimeout) || ran.Load() {
		t.Fatalf("the task past its queue timeout: %v %v (ran: %v)", r.Status, r.Err, ran.Load())
	}
	if r.Queued != time.Minute {
		t.Errorf("queued %v, want the timeout, 1m0s, on the executor's time", r.Queued)
	}
}

// A clock that jumps forward past a waiting head's deadline before its
// timer fires leaves the head to be refused when a finish would start it,
// in its own group (the freed permits) or in another (the dispatcher):
// neither runs, both complete Rejected by the queue timeout.
func TestQueueTimeoutOnAClockJumpingForwardAtAFinish(t *testing.T) {
	clk := &jumpClock{Fake: fakeClock()}
	ex := newExec(t, []policy.Option{policy.WithGlobalMaxInFlight(1), policy.WithDefaultMaxConcurrency(1),
		policy.WithQueueTimeout(time.Minute)}, executor.WithClock(clk))
	hold := newGate()
	defer hold.open()
	hx := submit(t, ex, executor.Task[string]{Group: "x", Fn: hold.fn("x")})
	hold.waitStarted(t, 1)
	var ran atomic.Int32
	body := func(context.Context) (string, error) { ran.Add(1); return "", nil }
	same := submit(t, ex, executor.Task[string]{Group: "x", Fn: body})
	other := submit(t, ex, executor.Task[string]{Group: "b", Fn: body})

	clk.shift(5 * time.Hour) // no timer fires: the Fake has not moved
	hold.open()
	if r := wait(t, hx); r.Status != executor.Success {
		t.Fatalf("x: %v %v", r.Status, r.Err)
	}
	for name, h := range map[string]*executor.Handle[string]{"x's next": same, "b's head": other} {
		if r := wait(t, h); r.Status != executor.Rejected || !errors.Is(r.Err, executor.ErrQueueTimeout) {
			t.Errorf("%s, hours past its deadline at the finish: %v %v", name, r.Status, r.Err)
		}
	}
	if n := ran.Load(); n != 0 {
		t.Fatalf("%d tasks past their queue timeout ran", n)
	}
	wantServes(t, ex, "b", "heads refused past their queue timeout")
}
