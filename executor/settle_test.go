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
// the spawn hook it calls for the next task), where a version of the
// executor had released A but not yet closed its Done channel; Shutdown
// must wait for the close. Each
// Shutdown looks at the channel as it returns. While the worker is held,
// with B run and its worker gone (no worker parks once Shutdown has
// begun), nothing else moves: a second Shutdown then returns at once only
// if the group has drained, so a wrong one is seen without a wait for it.
func TestShutdownWaitsForDoneChannel(t *testing.T) {
	hold, held, bWorkerGone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	closeAtEnd(t, hold)
	var spawns atomic.Int32
	spawn := func(f func()) {
		n := spawns.Add(1)
		go func() {
			f()
			if n == 2 {
				close(bWorkerGone)
			}
		}()
		if n == 2 {
			close(held)
			<-hold
		}
	}
	ex := newExec(t, []policy.Option{policy.WithGlobalMaxInFlight(1), policy.WithDefaultMaxConcurrency(1)},
		executor.WithSpawn(spawn))
	release := make(chan struct{})
	closeAtEnd(t, release)
	hA, _ := executor.Submit(ex, bg, executor.Task[int]{Group: "g", Fn: func(context.Context) (int, error) {
		<-release
		runtime.Goexit() // finish with no worker to continue: B goes to spawn
		return 0, nil
	}})
	hB, _ := executor.Submit(ex, bg, executor.Task[int]{Group: "g", Fn: func(context.Context) (int, error) { return 1, nil }})
	chA := hA.Done()
	type returned struct {
		err      error
		chClosed bool // A's Done channel, as Shutdown returned
	}
	shutdown := func(ctx context.Context) <-chan returned {
		c := make(chan returned, 1)
		go func() {
			err := ex.Shutdown(ctx)
			c <- returned{err, isClosed(chA)}
		}()
		return c
	}
	check := func(r returned) {
		t.Helper()
		if r.err != nil {
			t.Errorf("Shutdown: %v", r.err)
		}
		if !r.chClosed {
			t.Error("Shutdown returned while A's Done channel was open")
		}
	}
	shut := shutdown(bg)
	close(release)
	recv(t, held, "A's worker called spawn for B")
	recv(t, hB.Done(), "B ran on a worker of its own")
	recv(t, bWorkerGone, "B's worker exited")
	probe := newWaitingCtx()
	probed := shutdown(probe)
	select {
	case <-probe.asked: // it waits for the group
	case r := <-probed:
		check(r)
		probed = nil
	case <-time.After(hangGuard):
		t.Fatalf("the second Shutdown neither waited nor returned: not within %v", hangGuard)
	}
	close(hold)
	check(recv(t, shut, "Shutdown returned once A's worker went on"))
	if probed != nil {
		check(recv(t, probed, "the second Shutdown returned once A's worker went on"))
	}
	recv(t, chA, "A's Done channel closed")
	if r := wait(t, hB); r.Status != executor.Success {
		t.Fatalf("B: %v", r.Status)
	}
}

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
