package executor_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// panickyClock is a fake clock whose Now, AfterFunc and timers' Stop
// panic while panics, arm and stop are set.
type panickyClock struct {
	*clock.Fake
	panics, arm, stop atomic.Bool
}

func (c *panickyClock) Now() time.Time {
	if c.panics.Load() {
		panic("clock bug")
	}
	return c.Fake.Now()
}

func (c *panickyClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	if c.arm.Load() {
		panic("clock bug")
	}
	return panickyTimer{c.Fake.AfterFunc(d, f), c}
}

type panickyTimer struct {
	clock.Timer
	c *panickyClock
}

func (t panickyTimer) Stop() bool {
	if t.c.stop.Load() {
		panic("clock bug")
	}
	return t.Timer.Stop()
}

// An injected clock is user code, which the executor calls under its locks:
// Now as a task is submitted, queued or started (with a queue timeout, at
// a finish and at dispatch too), AfterFunc as a queue fills, a timer's Stop
// as a group goes idle or is closed. A panic in any of them must not go on
// up with a lock held: time stands still while Now panics, a timer not
// armed is not, a Stop that panics counts as done.
func TestPanickingClockHoldsNoLock(t *testing.T) {
	clk := &panickyClock{Fake: fakeClock()}
	p, err := policy.New(policy.WithGlobalMaxInFlight(1), policy.WithDefaultMaxConcurrency(1),
		policy.WithQueueTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	ex, err := executor.New(p, executor.WithClock(clk),
		executor.WithListener(executor.ListenerFuncs{})) // Go and Do read the clock too
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(bg, 10*time.Second) // a hang guard
	defer cancel()
	clk.Advance(time.Second) // a reading that stands
	clk.panics.Store(true)
	clk.arm.Store(true)

	// Admission, queueing, a finish that starts its group's next task, and
	// a dispatch to another group waiting for global room, all with Now and
	// AfterFunc panicking.
	started, release := make(chan struct{}), make(chan struct{})
	var holder, waiter, other *executor.Handle[int]
	mustNotPanic(t, "Submit", func() {
		holder, _ = executor.Submit(ex, bg, executor.Task[int]{Group: "a", Fn: func(context.Context) (int, error) {
			close(started)
			<-release
			return 1, nil
		}})
	})
	recv(t, started, "the holder started")
	mustNotPanic(t, "Submit", func() { waiter, _ = executor.Submit(ex, bg, executor.Task[int]{Group: "a", Fn: succeeding}) })
	mustNotPanic(t, "Submit", func() { other, _ = executor.Submit(ex, bg, executor.Task[int]{Group: "b", Fn: succeeding}) })
	var ran atomic.Int32
	mustNotPanic(t, "Go", func() { ex.Go(bg, "b", func(context.Context) error { ran.Add(1); return nil }) })
	done := make(chan error, 1)
	go func() {
		defer func() {
			if v := recover(); v != nil {
				done <- executor.ErrGoexit // anything but nil
			}
		}()
		done <- ex.Do(bg, "a", func(context.Context) error { ran.Add(1); return nil })
	}()
	for s, _ := ex.GroupStats("a"); s.Waiting != 2; s, _ = ex.GroupStats("a") {
		if ctx.Err() != nil {
			t.Fatalf("%+v: the Do call never queued", s)
		}
		time.Sleep(time.Millisecond) // the Do call queues behind waiter
	}
	close(release)
	for i, h := range []*executor.Handle[int]{holder, waiter, other} {
		r, err := h.Wait(ctx)
		if err != nil || r.Status != executor.Success {
			t.Fatalf("task %d: %+v %v, want Success", i, r, err)
		}
		if r.Queued != 0 || r.Duration != 0 {
			t.Fatalf("task %d waited %v, ran %v: want 0, time standing still", i, r.Queued, r.Duration)
		}
	}
	if err := recv(t, done, "the queued Do returned"); err != nil {
		t.Fatalf("Do: %v", err)
	}
	if err := ex.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if ran.Load() != 2 {
		t.Fatalf("%d of the Go and Do calls ran, want 2", ran.Load())
	}
	if msg := ex.CheckInvariants(); msg != "" {
		t.Fatal(msg)
	}

	// A timer's Stop that panics as Close cancels a waiting task.
	clk.panics.Store(false)
	clk.arm.Store(false)
	ex2, err := executor.New(p, executor.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	running := make(chan struct{})
	mustNotPanic(t, "Submit", func() {
		holder, _ = executor.Submit(ex2, bg, executor.Task[int]{Group: "a", Fn: func(ctx context.Context) (int, error) {
			close(running)
			<-ctx.Done()
			return 0, ctx.Err()
		}})
	})
	recv(t, running, "the holder started")
	mustNotPanic(t, "Submit", func() { waiter, _ = executor.Submit(ex2, bg, executor.Task[int]{Group: "a", Fn: succeeding}) })
	clk.stop.Store(true)
	mustNotPanic(t, "Close", func() { ex2.Close() })
	if r, err := waiter.Wait(ctx); err != nil || r.Status != executor.Cancelled {
		t.Fatalf("the waiting task: %+v %v, want Cancelled", r, err)
	}
	ex.Close()
}
