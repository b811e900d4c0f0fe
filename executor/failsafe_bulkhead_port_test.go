package executor_test

// failsafe-go's bulkhead tests, ported to Do with a per-group limit.
//
// Source: github.com/failsafe-go/failsafe-go (MIT License, Copyright (c)
// 2023-present Jonathan Halterman and contributors), commit 5759a5e6:
// bulkhead/bulkhead_test.go, and the bulkhead cases of test/bulkhead_test.go,
// test/cancellation_test.go (TestBulkhead_Cancellation),
// test/listeners_test.go (TestListenersForBulkhead) and
// test/policy_composition_test.go ("with Bulkhead"). The scripts of the
// cases are ported; no upstream code is. bulkhead/failsafe_port_test.go
// ports the same cases to package bulkhead.
//
// What was adapted, and why:
//   - A failsafe-go bulkhead of maxConcurrency n is a group's limits: the
//     group's concurrency limit n, and its in-flight limit (its bulkhead:
//     waiting plus running) n, so that nothing waits, or n plus the requests
//     that may wait. Its maxWaitTime is the policy's queue timeout, on a
//     fake clock; a wait without bound is no queue timeout. A maxWaitTime
//     of 0 means "do not wait" there, but a queue timeout of 0 means "no
//     timeout" here (policy.WithQueueTimeout): "do not wait" is the
//     in-flight limit n.
//   - A permit is a Do whose function is running: TryAcquirePermit is a Do
//     whose function blocks until the case lets it return (ReleasePermit).
//   - ErrFull is a *RejectedError matching ErrRejected: by the group's
//     in-flight limit when refused at once, with ErrQueueTimeout after the
//     maximum wait. OnFull is the listener's OnRejected.
//   - Upstream's sleeps (a release after 200 ms, a cancel after 100 ms) and
//     bounds on elapsed time become steps taken once the call waits in its
//     group's queue (GroupStats.Waiting), so no outcome depends on the
//     machine's speed.
//
// Left out: the interface assertion and the benchmarks, which test no
// behaviour; the failsafehttp and failsafegrpc cases, which test
// transports. "with Timeout during Bulkhead delay" composes failsafe-go's
// Timeout policy: it is ported as the deadline of Do's context.

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// fsGroup is the group every case here uses.
const fsGroup = "g"

// fsLimits are the policy options of a failsafe-go bulkhead of
// maxConcurrency n under which up to waiting calls may wait.
func fsLimits(n, waiting int, more ...policy.Option) []policy.Option {
	return append([]policy.Option{
		policy.WithGroupMaxConcurrency(fsGroup, n),
		policy.WithGroupMaxInFlight(fsGroup, n+waiting),
	}, more...)
}

// heldDo is a Do whose function runs until released: a permit held.
type heldDo struct {
	release chan struct{}
	done    <-chan error
}

// tryDo starts a Do and reports whether its function started at once
// (TryAcquirePermit), or returns the refusal. With no room to wait, a Do
// either starts or is refused before it returns.
func tryDo(t *testing.T, ex *executor.Executor) (*heldDo, error) {
	t.Helper()
	started := make(chan struct{})
	h := &heldDo{release: make(chan struct{})}
	h.done = doIn(ex, bg, fsGroup, func(context.Context) error {
		close(started)
		<-h.release
		return nil
	})
	select {
	case <-started:
		return h, nil
	case err := <-h.done:
		if err == nil {
			t.Fatal("Do returned nil without running its function")
		}
		return nil, err
	case <-time.After(10 * time.Second): // a hang guard
		t.Fatal("Do neither started nor returned")
		return nil, nil
	}
}

// holdDo is tryDo that must start.
func holdDo(t *testing.T, ex *executor.Executor) *heldDo {
	t.Helper()
	h, err := tryDo(t, ex)
	if err != nil {
		t.Fatalf("Do with room: %v", err)
	}
	return h
}

// finish lets the function return (ReleasePermit) and waits for its Do.
func (h *heldDo) finish(t *testing.T) {
	t.Helper()
	close(h.release)
	if err := waitErr(t, h.done); err != nil {
		t.Fatalf("a held Do: %v", err)
	}
}

func waitErr(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second): // a hang guard
		t.Fatal("Do did not return")
		return nil
	}
}

// waitingIs waits until n calls wait in the group's queue.
func waitingIs(t *testing.T, ex *executor.Executor, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second) // a hang guard
	for groupStats(t, ex, fsGroup).Waiting != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d calls wait, want %d", groupStats(t, ex, fsGroup).Waiting, n)
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// mustNotRunDo is a function that a refused Do must never call.
func mustNotRunDo(t *testing.T) func(context.Context) error {
	return func(context.Context) error {
		t.Error("a refused Do ran its function")
		return nil
	}
}

// wantRejected checks a refusal by limit, and by cause when cause is set.
func wantRejected(t *testing.T, err error, limit executor.Limit, cause error) {
	t.Helper()
	var rej *executor.RejectedError
	if !errors.Is(err, executor.ErrRejected) || !errors.As(err, &rej) || rej.Limit != limit {
		t.Fatalf("error %v, want a refusal by %s", err, limit)
	}
	if cause != nil && !errors.Is(err, cause) {
		t.Fatalf("error %v, want it to match %v", err, cause)
	}
}

// fsCounts is a Listener that counts each kind of call.
type fsCounts struct{ submitted, started, completed, rejected atomic.Int32 }

func (c *fsCounts) listener() executor.Listener {
	return executor.ListenerFuncs{
		Submitted: func(executor.Event) { c.submitted.Add(1) },
		Started:   func(executor.Event) { c.started.Add(1) },
		Completed: func(executor.Event) { c.completed.Add(1) },
		Rejected:  func(executor.Event) { c.rejected.Add(1) },
	}
}

// bulkhead_test.go: TestAcquirePermit. Two calls run at once; the third
// waits until one returns (upstream: a release after 200 ms).
func TestFailsafeDoAcquirePermit(t *testing.T) {
	ex := newExec(t, fsLimits(2, 1))
	h1 := holdDo(t, ex) // waits 0
	h2 := holdDo(t, ex) // waits 0
	ran := make(chan struct{})
	third := doIn(ex, bg, fsGroup, func(context.Context) error { close(ran); return nil })
	waitingIs(t, ex, 1)
	select {
	case <-ran:
		t.Fatal("the third call ran with both running")
	default:
	}
	h1.finish(t)
	if err := waitErr(t, third); err != nil {
		t.Fatalf("the third call after a return: %v", err)
	}
	h2.finish(t)
}

// bulkhead_test.go: TestAcquirePermitWithMaxWaitTime. With the one permit
// held, a call that may wait 100 ms is refused after 100 ms, and never
// runs.
func TestFailsafeDoAcquirePermitWithMaxWaitTime(t *testing.T) {
	clk := fakeClock()
	ex := newExec(t, fsLimits(1, 1, policy.WithQueueTimeout(100*time.Millisecond)), executor.WithClock(clk))
	held := holdDo(t, ex)
	done := doIn(ex, bg, fsGroup, mustNotRunDo(t))
	waitingIs(t, ex, 1)
	clk.Advance(100*time.Millisecond - 1)
	select {
	case err := <-done:
		t.Fatalf("the call gave up before its maximum wait: %v", err)
	default:
	}
	clk.Advance(1)
	wantRejected(t, waitErr(t, done), executor.LimitQueueTimeout, executor.ErrQueueTimeout)
	if s := groupStats(t, ex, fsGroup); s.Waiting != 0 || s.Running != 1 {
		t.Fatalf("after the timeout: %+v", s)
	}
	held.finish(t)
}

// bulkhead_test.go: TestTryAcquirePermitAndReleasePermit. A call starts
// while there is room and is refused at once when there is none; every
// return makes room for one more.
func TestFailsafeDoTryAcquirePermitAndReleasePermit(t *testing.T) {
	ex := newExec(t, fsLimits(2, 0))
	refused := func() {
		t.Helper()
		_, err := tryDo(t, ex)
		wantRejected(t, err, executor.LimitGroupInFlight, nil)
	}
	h1 := holdDo(t, ex)
	h2 := holdDo(t, ex)
	refused()

	h1.finish(t)
	h3 := holdDo(t, ex)
	refused()

	h2.finish(t)
	h3.finish(t)
	h4 := holdDo(t, ex)
	h5 := holdDo(t, ex)
	refused()

	h4.finish(t)
	h5.finish(t)
	if s := groupStats(t, ex, fsGroup); s.InFlight != 0 || s.Running != 0 || s.Rejected != 3 {
		t.Fatalf("after every return: %+v", s)
	}
}

// test/bulkhead_test.go: TestBulkHead.
func TestFailsafeDoBulkhead(t *testing.T) {
	// Both running calls return while a third waits (upstream: 200 ms into
	// its 1 s maximum wait), and it runs.
	t.Run("should AcquirePermit after wait", func(t *testing.T) {
		clk := fakeClock()
		ex := newExec(t, fsLimits(2, 1, policy.WithQueueTimeout(time.Second)), executor.WithClock(clk))
		h1 := holdDo(t, ex)
		h2 := holdDo(t, ex) // full
		var ran atomic.Bool
		done := doIn(ex, bg, fsGroup, func(context.Context) error { ran.Store(true); return nil })
		waitingIs(t, ex, 1)
		clk.Advance(200 * time.Millisecond)
		h1.finish(t)
		h2.finish(t) // empty
		if err := waitErr(t, done); err != nil || !ran.Load() {
			t.Fatalf("the waiting call: %v (ran %t)", err, ran.Load())
		}
	})

	// Upstream's stats count OnFull, none here, and one success.
	t.Run("when not full", func(t *testing.T) {
		var c fsCounts
		ex := newExec(t, fsLimits(2, 0), executor.WithListener(c.listener()))
		if err := ex.Do(bg, fsGroup, func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if c.rejected.Load() != 0 || c.started.Load() != 1 || c.completed.Load() != 1 {
			t.Fatalf("rejected %d started %d completed %d", c.rejected.Load(), c.started.Load(), c.completed.Load())
		}
		if s := groupStats(t, ex, fsGroup); s.Succeeded != 1 || s.InFlight != 0 {
			t.Fatalf("stats %+v", s)
		}
	})

	// Adapted: ErrFull is a refusal by the group's in-flight limit, and the
	// OnFull count the OnRejected count.
	t.Run("when full", func(t *testing.T) {
		var c fsCounts
		ex := newExec(t, fsLimits(2, 0), executor.WithListener(c.listener()))
		h1 := holdDo(t, ex)
		h2 := holdDo(t, ex) // full
		err := ex.Do(bg, fsGroup, mustNotRunDo(t))
		wantRejected(t, err, executor.LimitGroupInFlight, nil)
		var rej *executor.RejectedError
		if errors.As(err, &rej); rej.Group != fsGroup || rej.Used != 2 || rej.Max != 2 || rej.Weight != 1 {
			t.Fatalf("refusal %+v, want group %q, 2 of 2 used, weight 1", rej, fsGroup)
		}
		if c.rejected.Load() != 1 {
			t.Fatalf("%d OnRejected, want 1", c.rejected.Load())
		}
		h1.finish(t)
		h2.finish(t)
	})

	// Adapted: ErrFull after the maximum wait is ErrQueueTimeout.
	t.Run("with maxWaitTime exceeded", func(t *testing.T) {
		clk := fakeClock()
		ex := newExec(t, fsLimits(2, 1, policy.WithQueueTimeout(20*time.Millisecond)), executor.WithClock(clk))
		h1 := holdDo(t, ex)
		h2 := holdDo(t, ex) // full
		done := doIn(ex, bg, fsGroup, mustNotRunDo(t))
		waitingIs(t, ex, 1)
		clk.Advance(20 * time.Millisecond)
		wantRejected(t, waitErr(t, done), executor.LimitQueueTimeout, executor.ErrQueueTimeout)
		h1.finish(t)
		h2.finish(t)
	})

	// A maximum wait of 1 ns does not stop a call that fits from running.
	t.Run("with short maxWaitTime", func(t *testing.T) {
		ex := newExec(t, fsLimits(1, 1, policy.WithQueueTimeout(time.Nanosecond)))
		if err := ex.Do(bg, fsGroup, func(context.Context) error { return nil }); err != nil {
			t.Fatalf("Do with room and a 1 ns queue timeout: %v", err)
		}
	})
}

// test/cancellation_test.go: TestBulkhead_Cancellation. A call that waits
// for room ends with its caller's interest: it returns the context's error
// without running, and leaves the queue.
func TestFailsafeDoBulkheadCancellation(t *testing.T) {
	// wantGone checks that the call that gave up left the queue: only the
	// two held calls are in flight.
	wantGone := func(t *testing.T, ex *executor.Executor) {
		t.Helper()
		if s := groupStats(t, ex, fsGroup); s.Waiting != 0 || s.InFlight != 2 || s.Running != 2 {
			t.Fatalf("after giving up: %+v", s)
		}
	}

	// Upstream cancels the context 100 ms into a 200 ms maximum wait.
	t.Run("with context during Bulkhead delay", func(t *testing.T) {
		var c fsCounts
		clk := fakeClock()
		ex := newExec(t, fsLimits(2, 1, policy.WithQueueTimeout(200*time.Millisecond)),
			executor.WithClock(clk), executor.WithListener(c.listener()))
		h1 := holdDo(t, ex)
		h2 := holdDo(t, ex) // full
		ctx, cancel := context.WithCancel(bg)
		defer cancel()
		done := doIn(ex, ctx, fsGroup, mustNotRunDo(t))
		waitingIs(t, ex, 1)
		clk.Advance(100 * time.Millisecond)
		cancel()
		if err := waitErr(t, done); !errors.Is(err, context.Canceled) {
			t.Fatalf("Do whose context ended while it waited: %v, want context.Canceled", err)
		}
		wantGone(t, ex)
		// Cancelled while waiting is no refusal: OnCompleted alone.
		if c.rejected.Load() != 0 || c.completed.Load() != 1 {
			t.Fatalf("rejected %d completed %d, want 0 and 1", c.rejected.Load(), c.completed.Load())
		}
		h1.finish(t)
		h2.finish(t)
	})

	// Upstream's AcquirePermitWithMaxWait looks at the context before it
	// waits, and fails with its error if it has ended. So does Do, without
	// running fn, whether or not there is room; the listener hears of the
	// call as of one cancelled while it waits (OnSubmitted, then OnCompleted
	// alone), so that every call it is told of ends once.
	t.Run("with context ended before Bulkhead delay", func(t *testing.T) {
		var c fsCounts
		ex := newExec(t, fsLimits(2, 1), executor.WithListener(c.listener()))
		ctx, cancel := context.WithCancel(bg)
		cancel()
		if err := ex.Do(ctx, fsGroup, mustNotRunDo(t)); !errors.Is(err, context.Canceled) {
			t.Fatalf("Do with an ended context and room: %v, want context.Canceled", err)
		}
		h1 := holdDo(t, ex)
		h2 := holdDo(t, ex) // full
		if err := ex.Do(ctx, fsGroup, mustNotRunDo(t)); !errors.Is(err, context.Canceled) {
			t.Fatalf("Do with an ended context and no room: %v, want context.Canceled", err)
		}
		wantGone(t, ex)
		if c.submitted.Load() != 4 || c.rejected.Load() != 0 || c.completed.Load() != 2 {
			t.Fatalf("submitted %d completed %d rejected %d, want 4, 2, 0",
				c.submitted.Load(), c.completed.Load(), c.rejected.Load())
		}
		h1.finish(t)
		h2.finish(t)
	})

	// Adapted: upstream composes its Timeout policy (10 ms) around the
	// bulkhead (100 ms maximum wait) and expects timeout.ErrExceeded. Its
	// counterpart is the deadline of Do's context, whose error Do returns.
	// The fake clock never moves, so the queue timeout cannot come first.
	t.Run("with deadline during Bulkhead delay", func(t *testing.T) {
		clk := fakeClock()
		ex := newExec(t, fsLimits(2, 1, policy.WithQueueTimeout(100*time.Millisecond)), executor.WithClock(clk))
		h1 := holdDo(t, ex)
		h2 := holdDo(t, ex) // full
		ctx, cancel := context.WithTimeout(bg, 10*time.Millisecond)
		defer cancel()
		if err := ex.Do(ctx, fsGroup, mustNotRunDo(t)); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Do whose deadline passed while it waited: %v, want context.DeadlineExceeded", err)
		}
		wantGone(t, ex)
		h1.finish(t)
		h2.finish(t)
	})

	// Adapted: upstream cancels the result of an asynchronous execution
	// (RunAsync, then Cancel) while it waits for a permit. Do has no result
	// to cancel; its asynchronous counterpart, Submit, has: the waiting
	// task's Handle.Cancel removes it, and it completes Cancelled without
	// running.
	t.Run("with ExecutionResult during Bulkhead delay", func(t *testing.T) {
		ex := newExec(t, fsLimits(2, 1))
		h1 := holdDo(t, ex)
		h2 := holdDo(t, ex) // full
		h := submit(t, ex, executor.Task[any]{Group: fsGroup, Fn: func(context.Context) (any, error) {
			t.Error("a cancelled task ran")
			return nil, errors.New("invalid state")
		}})
		waitingIs(t, ex, 1)
		if isDone(h) {
			t.Fatal("the task completed while the group was full")
		}
		if !h.Cancel() {
			t.Fatal("Cancel of a waiting task did nothing")
		}
		r := wait(t, h)
		if r.Status != executor.Cancelled || r.Value != nil || !errors.Is(r.Err, context.Canceled) {
			t.Fatalf("result %+v, want Cancelled with context.Canceled", r)
		}
		wantGone(t, ex)
		h1.finish(t)
		h2.finish(t)
	})
}

// test/listeners_test.go: TestListenersForBulkhead. Two calls against a
// full group are refused, and OnFull is called for each.
//
// Adapted: OnFull is OnRejected. Upstream's done and failure counts (2 and
// 2) are the two refusals, which never start.
func TestFailsafeDoListenersForBulkhead(t *testing.T) {
	var c fsCounts
	ex := newExec(t, fsLimits(2, 0), executor.WithListener(c.listener()))
	h1 := holdDo(t, ex)
	h2 := holdDo(t, ex)
	for range 2 {
		wantRejected(t, ex.Do(bg, fsGroup, mustNotRunDo(t)), executor.LimitGroupInFlight, nil)
	}
	h1.finish(t)
	h2.finish(t)
	if c.rejected.Load() != 2 || c.started.Load() != 2 || c.submitted.Load() != 4 || c.completed.Load() != 2 {
		t.Fatalf("submitted %d started %d completed %d rejected %d, want 4, 2, 2, 2",
			c.submitted.Load(), c.started.Load(), c.completed.Load(), c.rejected.Load())
	}
}

// test/policy_composition_test.go: "with Bulkhead". A retry policy of 7
// attempts around a full bulkhead fails 7 times with ErrFull and never runs
// the function.
//
// Adapted: the executor has no retry policy; the 7 attempts are a loop. A
// refusal changes nothing, so each attempt meets the same full group.
func TestFailsafeDoBulkheadUnderRetries(t *testing.T) {
	ex := newExec(t, fsLimits(2, 0))
	h1 := holdDo(t, ex)
	h2 := holdDo(t, ex) // full
	for range 7 {
		wantRejected(t, ex.Do(bg, fsGroup, mustNotRunDo(t)), executor.LimitGroupInFlight, nil)
	}
	if s := groupStats(t, ex, fsGroup); s.InFlight != 2 || s.Waiting != 0 || s.Rejected != 7 {
		t.Fatalf("after the refusals: %+v", s)
	}
	h1.finish(t)
	h2.finish(t)
}
