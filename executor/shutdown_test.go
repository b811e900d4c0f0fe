package executor_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

func TestShutdownGroupDrains(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)})
	g := newGate()
	defer g.open()
	running := submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("a")})
	g.waitStarted(t, 1)
	waiting := submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("b")})
	other := submit(t, ex, executor.Task[string]{Group: "other", Fn: g.fn("o")})
	g.waitStarted(t, 1)

	done := make(chan error)
	go func() { done <- ex.ShutdownGroup(bg, "g") }()
	// New tasks for g are refused once the shutdown is in place; others pass.
	await(t, "ShutdownGroup marked the group shut down", func() bool { return groupStats(t, ex, "g").Shutdown })
	if _, err := executor.Submit(ex, bg, executor.Task[string]{Group: "g", Fn: g.fn("late")}); !errors.Is(err, executor.ErrGroupShutdown) {
		t.Fatalf("err = %v, want ErrGroupShutdown", err)
	}
	g.open()
	if err := recv(t, done, "ShutdownGroup returned once the group drained"); err != nil {
		t.Fatal(err)
	}
	for _, h := range []*executor.Handle[string]{running, waiting, other} {
		if r := wait(t, h); r.Status != executor.Success {
			t.Errorf("%+v", r)
		}
	}
	wait(t, submit(t, ex, executor.Task[string]{Group: "other", Fn: g.fn("o2")}))
	if _, err := executor.Submit(ex, bg, executor.Task[string]{Group: "g", Fn: g.fn("late")}); !errors.Is(err, executor.ErrGroupShutdown) {
		t.Fatalf("err = %v: a drained group stays shut down", err)
	}
	ex.EvictGroup("g")
	wait(t, submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("after-evict")}))
}

func TestShutdownGroupTimesOutAndCancels(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)})
	started := make(chan struct{})
	running := submit(t, ex, executor.Task[int]{Group: "g", Fn: func(ctx context.Context) (int, error) {
		close(started)
		<-ctx.Done()
		return 0, ctx.Err()
	}})
	recv(t, started, "the task started")
	var ran atomic.Bool
	waiting := submit(t, ex, executor.Task[int]{Group: "g", Fn: func(context.Context) (int, error) { ran.Store(true); return 0, nil }})
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if err := ex.ShutdownGroup(ctx, "g"); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	for _, h := range []*executor.Handle[int]{running, waiting} {
		if r := wait(t, h); r.Status != executor.Cancelled {
			t.Errorf("%+v", r)
		}
	}
	if r := wait(t, waiting); !errors.Is(r.Err, executor.ErrGroupShutdown) || ran.Load() {
		t.Errorf("waiting task: %+v ran=%v", r, ran.Load())
	}
}

func TestShutdownGroupOfUnknownGroup(t *testing.T) {
	ex := newExec(t, nil)
	if err := ex.ShutdownGroup(bg, "nobody"); err != nil {
		t.Fatal(err)
	}
	if _, err := executor.Submit(ex, bg, executor.Task[int]{Group: "nobody", Fn: func(context.Context) (int, error) { return 0, nil }}); !errors.Is(err, executor.ErrGroupShutdown) {
		t.Fatalf("err = %v", err)
	}
}

func TestShutdownWaitsForAll(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)})
	g := newGate()
	defer g.open()
	var hs []*executor.Handle[string]
	for _, grp := range []string{"a", "a", "b"} {
		hs = append(hs, submit(t, ex, executor.Task[string]{Group: grp, Fn: g.fn(grp)}))
	}
	g.waitStarted(t, 2)
	done := make(chan error)
	go func() { done <- ex.Shutdown(bg) }()
	await(t, "Shutdown refused new tasks", func() bool {
		// Until the shutdown is in place these are admitted (or refused for
		// room: c's backlog may fill its bulkhead) and run.
		_, err := executor.Submit(ex, bg, executor.Task[string]{Group: "c", Fn: func(context.Context) (string, error) { return "", nil }})
		if err != nil && !errors.Is(err, executor.ErrShutdown) && !errors.Is(err, executor.ErrRejected) {
			t.Fatal(err)
		}
		return errors.Is(err, executor.ErrShutdown)
	})
	g.open()
	if err := recv(t, done, "Shutdown returned once every task finished"); err != nil {
		t.Fatal(err)
	}
	for _, h := range hs {
		if r := wait(t, h); r.Status != executor.Success {
			t.Errorf("%+v", r)
		}
	}
}

func TestCloseCancelsEverything(t *testing.T) {
	p, _ := policy.New(policy.WithDefaultMaxConcurrency(1))
	ex, _ := executor.New(p)
	started, giveUp := make(chan struct{}), make(chan struct{})
	defer close(giveUp) // the task returns, and Close, if Close does not cancel it
	running, _ := executor.Submit(ex, bg, executor.Task[int]{Group: "g", Fn: func(ctx context.Context) (int, error) {
		close(started)
		select {
		case <-ctx.Done():
		case <-giveUp:
		}
		return 0, ctx.Err()
	}})
	recv(t, started, "the task started")
	waiting, _ := executor.Submit(ex, bg, executor.Task[int]{Group: "g", Fn: func(context.Context) (int, error) { return 0, nil }})
	closed := make(chan struct{})
	go func() { ex.Close(); close(closed) }()
	recv(t, closed, "Close returned, the running task cancelled") // only after the running task's goroutine is done
	if !isDone(running) || !isDone(waiting) {
		t.Fatal("Close returned with tasks not complete")
	}
	for _, h := range []*executor.Handle[int]{running, waiting} {
		if r, _ := h.Result(); r.Status != executor.Cancelled {
			t.Errorf("%+v", r)
		}
	}
	if _, err := executor.Submit(ex, bg, executor.Task[int]{Group: "g", Fn: func(context.Context) (int, error) { return 0, nil }}); !errors.Is(err, executor.ErrShutdown) {
		t.Fatalf("err = %v", err)
	}
	if s := ex.Stats(); s.Running != 0 || s.Waiting != 0 || s.RunningTasks != 0 {
		t.Errorf("stats %+v", s)
	}
	ex.Close()
}

func TestExecuteAll(t *testing.T) {
	// The tasks hold until the last (invalid) task has been refused, so
	// that every admission is decided against a full executor.
	release := make(chan struct{})
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(2), policy.WithDefaultQueueThreshold(3)},
		executor.WithListener(executor.ListenerFuncs{Rejected: func(e executor.Event) {
			if e.ID == "bad" {
				close(release)
			}
		}}))
	var tasks []executor.Task[int]
	for i := range 10 {
		tasks = append(tasks, executor.Task[int]{Group: "g", ID: string(rune('a' + i)), Fn: func(ctx context.Context) (int, error) {
			<-release
			return i * i, nil
		}})
	}
	tasks = append(tasks, executor.Task[int]{Group: "", ID: "bad"})
	rs := executor.ExecuteAll(ex, bg, tasks)
	if len(rs) != len(tasks) {
		t.Fatalf("%d results", len(rs))
	}
	ok, rejected := 0, 0
	for i, r := range rs {
		if r.ID != tasks[i].ID {
			t.Fatalf("result %d is %q: order lost", i, r.ID)
		}
		switch r.Status {
		case executor.Success:
			ok++
			if r.Value != i*i {
				t.Errorf("result %d value %d", i, r.Value)
			}
		case executor.Rejected:
			rejected++
		}
	}
	// 2 start, 3 wait, the other 5 are refused by the queue threshold, plus
	// the invalid one.
	if ok != 5 || rejected != 6 {
		t.Errorf("%d ok, %d rejected", ok, rejected)
	}
}

func TestStatsCounts(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultQueueThreshold(0)})
	boom := errors.New("boom")
	fns := []func(context.Context) (int, error){
		func(context.Context) (int, error) { return 0, nil },
		func(context.Context) (int, error) { return 0, boom },
		func(context.Context) (int, error) { return 0, context.Canceled },
	}
	for _, fn := range fns {
		wait(t, submit(t, ex, executor.Task[int]{Group: "g", Fn: fn}))
	}
	s := ex.Stats()
	want := executor.TaskCounts{Submitted: 3, Started: 3, Succeeded: 1, Failed: 1, Cancelled: 1}
	if s.TaskCounts != want || s.GlobalMaxInFlight != policy.Unlimited {
		t.Errorf("stats %+v, want %+v", s, want)
	}
	gs := groupStats(t, ex, "g")
	if gs.TaskCounts != want || gs.MaxInFlight != policy.DefaultMaxInFlight || gs.MaxConcurrency != 1 || gs.QueueThreshold != 0 {
		t.Errorf("group stats %+v", gs)
	}
}

// TestShutdownReturnsAfterHandlesComplete: a drained Shutdown or
// ShutdownGroup returns only after every handle of its tasks has completed,
// however slow the listener that runs before each completion.
func TestShutdownReturnsAfterHandlesComplete(t *testing.T) {
	for _, whole := range []bool{true, false} {
		t.Run(fmt.Sprint("whole executor ", whole), func(t *testing.T) {
			slow := executor.ListenerFuncs{Completed: func(executor.Event) {
				for range 200 {
					runtime.Gosched()
				}
			}}
			ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(4)}, executor.WithListener(slow))
			var hs []*executor.Handle[int]
			for range 50 {
				hs = append(hs, submit(t, ex, executor.Task[int]{Group: "g", Fn: succeeding}))
			}
			var err error
			if whole {
				err = ex.Shutdown(bg)
			} else {
				err = ex.ShutdownGroup(bg, "g")
			}
			if err != nil {
				t.Fatal(err)
			}
			for i, h := range hs {
				if !isDone(h) {
					t.Fatalf("task %d not complete when the shutdown returned", i)
				}
			}
		})
	}
}

// TestShutdownAfterDropFindsHandlesComplete: a group dropped as its last
// task finishes (reclaimed while idle, or evicted) leaves the index only
// once that task's handle has completed, so that a Shutdown or
// ShutdownGroup that no longer finds the group returns with every handle of
// its tasks complete.
func TestShutdownAfterDropFindsHandlesComplete(t *testing.T) {
	for _, evict := range []bool{false, true} {
		t.Run(fmt.Sprint("evicted ", evict), func(t *testing.T) {
			maxIdle := 0
			if evict {
				maxIdle = 8
			}
			ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)}, executor.WithMaxIdleGroups(maxIdle))
			g := newGate()
			h := submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("a")})
			g.waitStarted(t, 1)
			if evict && ex.EvictGroup("g") {
				t.Fatal("a busy group was dropped at once")
			}
			dropped, resume := make(chan struct{}), make(chan struct{})
			executor.SetHookDropped(func(key string) {
				if key == "g" {
					close(dropped)
					<-resume
				}
			})
			defer executor.SetHookDropped(nil)
			g.open()
			<-dropped
			// g has left the index: ShutdownGroup finds no task of it.
			err := ex.ShutdownGroup(bg, "g")
			done := isDone(h)
			close(resume)
			if err != nil {
				t.Fatal(err)
			}
			if !done {
				t.Fatal("ShutdownGroup returned before the handle of the group's last task completed")
			}
			wait(t, h)
			if err := ex.Shutdown(bg); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestShutdownGroupAfterPendingEvictionStaysShutDown: the later of
// EvictGroup and ShutdownGroup wins.
func TestShutdownGroupAfterPendingEvictionStaysShutDown(t *testing.T) {
	ex := newExec(t, nil)
	g := newGate()
	defer g.open()
	h := submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("a")})
	g.waitStarted(t, 1)
	ex.EvictGroup("g") // busy: pending
	done := make(chan error)
	go func() { done <- ex.ShutdownGroup(bg, "g") }()
	await(t, "ShutdownGroup marked the group shut down", func() bool { return groupStats(t, ex, "g").Shutdown })
	g.open()
	wait(t, h)
	if err := recv(t, done, "ShutdownGroup returned once the group drained"); err != nil {
		t.Fatal(err)
	}
	if _, err := executor.Submit(ex, bg, executor.Task[int]{Group: "g", Fn: succeeding}); !errors.Is(err, executor.ErrGroupShutdown) {
		t.Fatalf("err = %v, want the group to stay shut down", err)
	}
}
