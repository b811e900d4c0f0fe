package executor_test

import (
	"context"
	"sync"
	"testing"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// Shutdown releases an executor, as Close does: once no task can start, no
// worker waits for one. Workers parked before Shutdown exit, and a worker
// whose task ends after Shutdown returned (its deadline passed first)
// exits instead of parking. Kept parked, each would hold its goroutine and
// the whole executor for the life of the program.
func TestShutdownLetsParkedWorkersGo(t *testing.T) {
	var workers sync.WaitGroup
	spawn := func(f func()) {
		workers.Add(1)
		go func() {
			defer workers.Done()
			f()
		}()
	}
	ex := newExec(t, []policy.Option{policy.WithGlobalMaxInFlight(8), policy.WithDefaultMaxConcurrency(8)},
		executor.WithSpawn(spawn))

	// Four workers that run a task each at once, then park: one of them
	// runs the next task, the others stay parked until Shutdown.
	g := newGate()
	closeAtEnd(t, g.release)
	var hs []*executor.Handle[string]
	for range 4 {
		h, err := executor.Submit(ex, bg, executor.Task[string]{Group: "a", Fn: g.fn("a")})
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	g.waitStarted(t, 4)
	g.open()
	for _, h := range hs {
		if r, err := h.Wait(guardCtx(t)); err != nil || r.Status != executor.Success {
			t.Fatalf("%+v %v, want Success", r, err)
		}
	}
	await(t, "the four workers parked", func() bool { return ex.Parked() == 4 })

	// A task that outlives Shutdown's deadline: it ends after Shutdown
	// has returned.
	running, release := make(chan struct{}), make(chan struct{})
	closeAtEnd(t, release)
	late, err := executor.Submit(ex, bg, executor.Task[int]{Group: "b", Fn: func(context.Context) (int, error) {
		close(running)
		<-release
		return 0, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	recv(t, running, "the late task started")
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if err := ex.Shutdown(ctx); err != context.Canceled {
		t.Fatalf("Shutdown: %v, want context.Canceled", err)
	}
	close(release)
	if _, err := late.Wait(guardCtx(t)); err != nil {
		t.Fatal(err)
	}
	waitAll(t, &workers, "every worker exits once Shutdown has returned and the tasks have ended")
}

// As TestCloseReleasesParkedWorkersBeforeWaitingForTasks, with Shutdown:
// a task started while every slot of a bounded spawn pool is held by a
// parked worker waits in spawn for one, and Shutdown, which waits for the
// task, must let the parked workers go first, or wait for ever.
func TestShutdownReleasesParkedWorkersBeforeWaitingForTasks(t *testing.T) {
	spawn, slots := boundedSpawn(2)
	ex := newExec(t, []policy.Option{policy.WithGlobalMaxInFlight(3), policy.WithDefaultMaxConcurrency(2)},
		executor.WithSpawn(spawn))
	ran, submitted := parkHoldingEverySlot(t, ex, slots)
	if err := ex.Shutdown(guardCtx(t)); err != nil {
		t.Fatalf("Shutdown: %v: the parked workers kept the pool's slots", err)
	}
	recv(t, submitted, "Go returned")
	recv(t, ran, "the third task ran")
}
