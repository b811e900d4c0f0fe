package executor_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// A handle's completion and the drain: Shutdown returns only once every
// handle has completed, Done channels closed, and a run context that cannot
// be made still completes its task. Each test failed on a version of the
// executor that got it wrong.

// A Done channel handed out before Shutdown is closed once Shutdown has
// returned. Here the worker that finishes A is held after its unlock (in
// the spawn hook it calls for the next task), between the release and the
// close of A's Done channel; Shutdown must wait for the close.
func TestShutdownWaitsForDoneChannel(t *testing.T) {
	hold := make(chan struct{})
	var spawns atomic.Int32
	spawn := func(f func()) {
		go f()
		if spawns.Add(1) == 2 {
			<-hold
		}
	}
	ex := newExec(t, []policy.Option{policy.WithGlobalMaxInFlight(1), policy.WithDefaultMaxConcurrency(1)},
		executor.WithSpawn(spawn))
	release := make(chan struct{})
	hA, _ := executor.Submit(ex, bg, executor.Task[int]{Group: "g", Fn: func(context.Context) (int, error) {
		<-release
		runtime.Goexit() // finish with no worker to continue: B goes to spawn
		return 0, nil
	}})
	hB, _ := executor.Submit(ex, bg, executor.Task[int]{Group: "g", Fn: func(context.Context) (int, error) { return 1, nil }})
	chA := hA.Done()
	shut := make(chan error, 1)
	go func() { shut <- ex.Shutdown(bg) }()
	close(release)
	// A's worker is now held in the spawn hook with A's channel not yet
	// closed, or about to be; Shutdown must not return before the close.
	var shutErr error
	returned := false
	select {
	case shutErr = <-shut:
		returned = true
		select {
		case <-chA:
		default:
			t.Errorf("Shutdown returned while A's Done channel was open")
		}
	case <-time.After(200 * time.Millisecond):
		// Still waiting, as it must while the worker is held. (The bound
		// only gives a wrong Shutdown the time to return; it cannot fail.)
	}
	close(hold)
	if !returned {
		shutErr = <-shut
	}
	if shutErr != nil {
		t.Fatalf("Shutdown: %v", shutErr)
	}
	<-chA
	if r, _ := hB.Wait(bg); r.Status != executor.Success {
		t.Fatalf("B: %v", r.Status)
	}
}

// The same race without hooks: Shutdown against the close of a Done channel
// after the unlock, many times.
func TestShutdownWaitsForDoneChannelStress(t *testing.T) {
	p, err := policy.New(policy.WithGlobalMaxInFlight(4), policy.WithDefaultMaxConcurrency(4))
	if err != nil {
		t.Fatal(err)
	}
	bad := 0
	for range 1000 {
		ex, err := executor.New(p)
		if err != nil {
			t.Fatal(err)
		}
		release := make(chan struct{})
		h, _ := executor.Submit(ex, bg, executor.Task[int]{Group: "g", Fn: func(context.Context) (int, error) {
			<-release
			return 0, nil
		}})
		ch := h.Done()
		go close(release)
		if err := ex.Shutdown(bg); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ch:
		default:
			bad++
		}
		ex.Close()
	}
	if bad > 0 {
		t.Errorf("%d of 1000 Shutdowns returned before the handle's Done channel was closed", bad)
	}
}

// A Submit context whose methods misbehave when the worker derives the run
// context from it (context.WithCancelCause asks its Value).
type hostileCtx struct {
	context.Context
	done   chan struct{}
	goexit bool
}

func (c *hostileCtx) Done() <-chan struct{} { return c.done }
func (c *hostileCtx) Value(any) any {
	if c.goexit {
		runtime.Goexit()
	}
	panic("hostile Value")
}

// A run context that cannot be made (the parent's Value exits the goroutine,
// or panics under a spawn hook that recovers, as a pool does) still fails
// the task, releases its permits and completes its handle.
func TestRunContextThatCannotBeMade(t *testing.T) {
	for _, goexit := range []bool{true, false} {
		spawn := func(f func()) {
			go func() {
				defer func() { _ = recover() }()
				f()
			}()
		}
		ex := newExec(t, []policy.Option{policy.WithGlobalMaxInFlight(1), policy.WithDefaultMaxConcurrency(1)},
			executor.WithSpawn(spawn))
		ctx := &hostileCtx{Context: context.Background(), done: make(chan struct{}), goexit: goexit}
		ran := false
		h, err := executor.Submit(ex, ctx, executor.Task[int]{Group: "g", Fn: func(context.Context) (int, error) {
			ran = true
			return 1, nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		r, err := h.Wait(bg)
		if err != nil || r.Status != executor.Failed || ran {
			t.Fatalf("goexit=%v: status %v err %v (wait %v), ran %v; want Failed without running", goexit, r.Status, r.Err, err, ran)
		}
		// The permit is back: another task runs.
		h2, _ := executor.Submit(ex, bg, executor.Task[int]{Group: "g", Fn: func(context.Context) (int, error) { return 2, nil }})
		if r, _ := h2.Wait(bg); r.Status != executor.Success {
			t.Fatalf("goexit=%v: next task %v", goexit, r.Status)
		}
		sctx, cancel := context.WithTimeout(bg, 5*time.Second)
		err = ex.Shutdown(sctx)
		cancel()
		if err != nil {
			t.Fatalf("goexit=%v: Shutdown: %v", goexit, err)
		}
	}
}
