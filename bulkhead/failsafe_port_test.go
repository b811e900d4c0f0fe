package bulkhead_test

// failsafe-go's bulkhead tests, ported to the bulkhead.
//
// Source: github.com/failsafe-go/failsafe-go (MIT License, Copyright (c)
// 2023-present Jonathan Halterman and contributors), commit 5759a5e6:
// bulkhead/bulkhead_test.go, and the bulkhead cases of test/bulkhead_test.go,
// test/cancellation_test.go (TestBulkhead_Cancellation),
// test/listeners_test.go (TestListenersForBulkhead) and
// test/policy_composition_test.go ("with Bulkhead"). The scripts of the
// cases are ported; no upstream code is.
//
// What was adapted, and why:
//   - failsafe-go's permits are anonymous (ReleasePermit gives back any
//     one); here every acquire returns a Permit, released by value.
//   - AcquirePermit waits without bound; here it is Acquire on a bulkhead
//     with a queue (WithQueue) whose maximum wait no case reaches. The
//     maximum wait of AcquirePermitWithMaxWait and WithMaxWaitTime is the
//     queue's; a maximum wait of 0 (refuse at once) is no queue.
//   - ErrFull is two errors here: ErrAtCapacity for a refusal at once and
//     ErrQueueTimeout for one after the maximum wait (errors.go), so that a
//     caller can tell shedding from slowness.
//   - OnFull is a Listener counting EventAtCapacity; an execution through
//     failsafe.With(bh) is Submit, whose Handle has the result.
//   - Time is a clock.Fake and "waiting" is the queue's depth: upstream's
//     sleeps (a release after 200 ms, a cancel after 100 ms) and its bounds
//     on elapsed time become steps taken once the request is queued, so no
//     outcome depends on the machine's speed.
//   - The cases of bulkhead/bulkhead_test.go run both on a bulkhead with
//     nothing observing it (the lock-free paths) and on one with a listener
//     (every decision under the mutex), since the two paths decide apart.
//
// Left out: the interface assertion (var _ Bulkhead[any]) and the
// benchmarks, which test no behaviour; the bulkhead cases of failsafehttp
// and failsafegrpc, which test transports this package does not have.
// "with Timeout during Bulkhead delay" composes failsafe-go's Timeout
// policy, which the bulkhead has no counterpart of: it is ported as the
// deadline of the caller's context.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/groupexec/groupexec/bulkhead"
	"github.com/groupexec/groupexec/clock"
)

// failsafeModes runs f on a bulkhead with nothing observing it and on one
// with a listener: extra options for New.
func failsafeModes(t *testing.T, f func(t *testing.T, extra ...bulkhead.Option)) {
	t.Run("unobserved", func(t *testing.T) { f(t) })
	t.Run("observed", func(t *testing.T) { f(t, bulkhead.WithListener(&recorder{})) })
}

// submitted is a Submit running on its own goroutine: it may wait in the
// queue before it returns.
type submitted struct {
	done chan struct{}
	h    *bulkhead.Handle[string]
	err  error
}

func submitAsync(ctx context.Context, b *bulkhead.Bulkhead, fn func(context.Context) (string, error)) *submitted {
	s := &submitted{done: make(chan struct{})}
	go func() {
		defer close(s.done)
		s.h, s.err = bulkhead.Submit(b, ctx, fn)
	}()
	return s
}

func (s *submitted) wait(t testing.TB) (*bulkhead.Handle[string], error) {
	t.Helper()
	select {
	case <-s.done:
		return s.h, s.err
	case <-time.After(10 * time.Second):
		t.Fatal("Submit did not return")
		return nil, nil
	}
}

// mustNotRun is a function that a refused Submit must never call.
func mustNotRun(t testing.TB) func(context.Context) (string, error) {
	return func(context.Context) (string, error) {
		t.Error("a refused Submit ran its function")
		return "", errors.New("ran")
	}
}

// countCodes counts the events of each code.
func countCodes(es []bulkhead.Event) map[string]int {
	n := map[string]int{}
	for _, e := range es {
		n[e.Code]++
	}
	return n
}

func (r *recorder) counts() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return countCodes(r.events)
}

// bulkhead_test.go: TestAcquirePermit. Two permits are free, the third
// acquire waits until a permit is released (upstream: a release after
// 200 ms, and at least 200 ms elapsed).
//
// Adapted: upstream passes a nil ctx ("ctx may be nil"). A waiting Acquire
// needs a context to wait on, and the doc makes a nil one a *ConfigError
// (ErrInvalidConfig) that takes nothing; without a queue, where Acquire is
// TryAcquire and reads ctx only for a capability, nil is accepted.
func TestFailsafeAcquirePermit(t *testing.T) {
	failsafeModes(t, func(t *testing.T, extra ...bulkhead.Option) {
		clk := clock.NewFake(t0)
		b := newBH(t, 2, append(extra, bulkhead.WithQueue(1, time.Hour), bulkhead.WithClock(clk))...)
		var nilCtx context.Context // upstream's "ctx may be nil"
		if _, err := b.Acquire(nilCtx, 1); !errors.Is(err, bulkhead.ErrInvalidConfig) {
			t.Fatalf("Acquire(nil) on a bulkhead with a queue: %v, want ErrInvalidConfig", err)
		}
		p1, err := b.Acquire(bg, 1) // waits 0
		if err != nil {
			t.Fatal(err)
		}
		p2, err := b.Acquire(bg, 1) // waits 0
		if err != nil {
			t.Fatal(err)
		}
		third := queueWith(t, bg, b, 1)[0]
		clk.Advance(time.Hour - 1) // as long as it may wait, less a tick
		if third.returned() {
			t.Fatal("the third acquire returned with no permit free")
		}
		release(t, b, p1)
		p3, err := third.wait(t)
		if err != nil {
			t.Fatalf("the third acquire after a release: %v", err)
		}
		release(t, b, p2)
		release(t, b, p3)
		if s := stateOf(b); s.inFlight != 0 || s.queued != 0 {
			t.Fatalf("after every release: %+v", s)
		}

		nq := newBH(t, 1, extra...)
		p, err := nq.Acquire(nilCtx, 1)
		if err != nil {
			t.Fatalf("Acquire(nil) on a bulkhead without a queue: %v", err)
		}
		release(t, nq, p)
	})
}

// bulkhead_test.go: TestAcquirePermitWithMaxWaitTime. With the one permit
// out, an acquire that may wait 100 ms fails after 100 ms.
//
// Adapted: ErrFull after the maximum wait is ErrQueueTimeout, and the
// request holds nothing.
func TestFailsafeAcquirePermitWithMaxWaitTime(t *testing.T) {
	failsafeModes(t, func(t *testing.T, extra ...bulkhead.Option) {
		clk := clock.NewFake(t0)
		b := newBH(t, 1, append(extra, bulkhead.WithQueue(1, 100*time.Millisecond), bulkhead.WithClock(clk))...)
		held, err := b.Acquire(bg, 1) // waits 0
		if err != nil {
			t.Fatal(err)
		}
		r := queueWith(t, bg, b, 1)[0] // waits 100 ms
		armed(t, clk, 1)
		clk.Advance(100*time.Millisecond - 1)
		if r.returned() {
			t.Fatal("the acquire gave up before its maximum wait")
		}
		clk.Advance(1)
		_, err = r.wait(t)
		wantErr(t, err, bulkhead.ErrQueueTimeout)
		var rej *bulkhead.RejectedError
		// QueueDepth counts the requests still waiting: the one timed out
		// has left.
		if !errors.As(err, &rej) || rej.MaxWait != 100*time.Millisecond || rej.InFlight != 1 || rej.Limit != 1 ||
			rej.Weight != 1 || rej.QueueDepth != 0 || rej.MaxDepth != 1 {
			t.Fatalf("timeout error %#v", rej)
		}
		if s := stateOf(b); s.inFlight != 1 || s.queued != 0 {
			t.Fatalf("after the timeout: %+v", s)
		}
		release(t, b, held)
		if b.InFlight() != 0 {
			t.Fatal("the timed-out acquire holds a permit")
		}
	})
}

// bulkhead_test.go: TestTryAcquirePermitAndReleasePermit. TryAcquire takes
// what is free and refuses (ErrAtCapacity) what is not; every release makes
// room for one more.
func TestFailsafeTryAcquirePermitAndReleasePermit(t *testing.T) {
	failsafeModes(t, func(t *testing.T, extra ...bulkhead.Option) {
		b := newBH(t, 2, extra...)
		try := func(want bool) bulkhead.Permit {
			t.Helper()
			p, err := b.TryAcquire(bg, 1)
			if got := err == nil; got != want {
				t.Fatalf("TryAcquire with %d of 2 out: %v, want success %t", b.InFlight(), err, want)
			}
			if err != nil {
				wantErr(t, err, bulkhead.ErrAtCapacity)
			}
			return p
		}
		p1 := try(true)
		p2 := try(true)
		try(false)

		release(t, b, p1)
		p3 := try(true)
		try(false)

		release(t, b, p2)
		release(t, b, p3)
		p4 := try(true)
		p5 := try(true)
		try(false)

		release(t, b, p4)
		release(t, b, p5)
		// Upstream's ReleasePermit on an empty bulkhead blocks; here a
		// permit already given back is refused and changes nothing.
		wantErr(t, b.Release(p1), bulkhead.ErrUnknownPermit)
		if s := stateOf(b); s.inFlight != 0 || s.available != 2 {
			t.Fatalf("after every release: %+v", s)
		}
	})
}

// test/bulkhead_test.go: TestBulkHead.
func TestFailsafeBulkhead(t *testing.T) {
	// The bulkhead is full; both permits come back while the execution
	// waits (upstream: 200 ms into its 1 s maximum wait), and it runs.
	t.Run("should AcquirePermit after wait", func(t *testing.T) {
		clk := clock.NewFake(t0)
		b := newBH(t, 2, bulkhead.WithQueue(1, time.Second), bulkhead.WithClock(clk))
		p1 := acquire(t, b, 1)
		p2 := acquire(t, b, 1) // full
		s := submitAsync(bg, b, func(context.Context) (string, error) { return "test", nil })
		eventually(t, "the execution to queue", func() bool { return b.QueueDepth() == 1 })
		clk.Advance(200 * time.Millisecond)
		release(t, b, p1)
		release(t, b, p2) // empty
		h, err := s.wait(t)
		if err != nil {
			t.Fatalf("Submit after the permits came back: %v", err)
		}
		if r := result(t, h); r.Status != bulkhead.Success || r.Value != "test" {
			t.Fatalf("result %+v", r)
		}
		if b.InFlight() != 0 {
			t.Fatalf("in flight %d after the execution", b.InFlight())
		}
	})

	// Adapted: upstream's stats count OnFull, none here, and one success:
	// the permit taken and given back.
	t.Run("when not full", func(t *testing.T) {
		rec := &recorder{}
		b := newBH(t, 2, bulkhead.WithListener(rec))
		h, err := bulkhead.Submit(b, bg, func(context.Context) (string, error) { return "test", nil })
		if err != nil {
			t.Fatal(err)
		}
		if r := result(t, h); r.Status != bulkhead.Success || r.Value != "test" {
			t.Fatalf("result %+v", r)
		}
		n := rec.counts()
		if n[bulkhead.EventAtCapacity] != 0 || n[bulkhead.EventPermitAcquired] != 1 || n[bulkhead.EventPermitReleased] != 1 {
			t.Fatalf("events %v", n)
		}
	})

	// Adapted: ErrFull is ErrAtCapacity (no queue), the OnFull count is the
	// count of EventAtCapacity, and the function never runs.
	t.Run("when full", func(t *testing.T) {
		rec := &recorder{}
		b := newBH(t, 2, bulkhead.WithListener(rec))
		acquire(t, b, 1)
		acquire(t, b, 1) // full
		before := stateOf(b)
		_, err := bulkhead.Submit(b, bg, mustNotRun(t))
		wantErr(t, err, bulkhead.ErrAtCapacity)
		n := rec.counts()
		if n[bulkhead.EventAtCapacity] != 1 || n[bulkhead.EventRequestRejected] != 1 {
			t.Fatalf("events %v, want one %s and one %s", n, bulkhead.EventAtCapacity, bulkhead.EventRequestRejected)
		}
		if got := stateOf(b); got != before {
			t.Fatalf("the refusal changed the state from %+v to %+v", before, got)
		}
	})

	// Adapted: ErrFull after the maximum wait is ErrQueueTimeout.
	t.Run("with maxWaitTime exceeded", func(t *testing.T) {
		clk := clock.NewFake(t0)
		b := newBH(t, 2, bulkhead.WithQueue(1, 20*time.Millisecond), bulkhead.WithClock(clk))
		acquire(t, b, 1)
		acquire(t, b, 1) // full
		s := submitAsync(bg, b, mustNotRun(t))
		eventually(t, "the execution to queue", func() bool { return b.QueueDepth() == 1 })
		armed(t, clk, 1)
		clk.Advance(20 * time.Millisecond)
		_, err := s.wait(t)
		wantErr(t, err, bulkhead.ErrQueueTimeout)
		if st := stateOf(b); st.inFlight != 2 || st.queued != 0 {
			t.Fatalf("after the timeout: %+v", st)
		}
	})

	// A maximum wait of 1 ns does not stop a free permit from being taken.
	t.Run("with short maxWaitTime", func(t *testing.T) {
		failsafeModes(t, func(t *testing.T, extra ...bulkhead.Option) {
			b := newBH(t, 1, append(extra, bulkhead.WithQueue(1, time.Nanosecond))...)
			h, err := bulkhead.Submit(b, bg, func(context.Context) (string, error) { return "", nil })
			if err != nil {
				t.Fatalf("Submit with a permit free and a 1 ns maximum wait: %v", err)
			}
			if r := result(t, h); r.Status != bulkhead.Success {
				t.Fatalf("result %+v", r)
			}
		})
	})
}

// test/cancellation_test.go: TestBulkhead_Cancellation. An execution that
// waits for a permit ends with its caller's interest: it fails with the
// context's error, holds nothing and leaves the queue.
func TestFailsafeBulkheadCancellation(t *testing.T) {
	// wantGone checks that the request that gave up left the queue and holds
	// nothing: once the two permits held come back, both are free.
	wantGone := func(t *testing.T, b *bulkhead.Bulkhead, held ...bulkhead.Permit) {
		t.Helper()
		if s := stateOf(b); s.inFlight != 2 || s.queued != 0 {
			t.Fatalf("after giving up: %+v", s)
		}
		for _, p := range held {
			release(t, b, p)
		}
		if s := stateOf(b); s.inFlight != 0 || s.available != 2 {
			t.Fatalf("after every release: %+v", s)
		}
	}

	// Upstream cancels the context 100 ms into a 200 ms maximum wait.
	t.Run("with context during Bulkhead delay", func(t *testing.T) {
		rec := &recorder{}
		clk := clock.NewFake(t0)
		b := newBH(t, 2, bulkhead.WithQueue(1, 200*time.Millisecond), bulkhead.WithClock(clk), bulkhead.WithListener(rec))
		p1 := acquire(t, b, 1)
		p2 := acquire(t, b, 1) // full
		ctx, cancel := context.WithCancel(bg)
		defer cancel()
		s := submitAsync(ctx, b, mustNotRun(t))
		eventually(t, "the execution to queue", func() bool { return b.QueueDepth() == 1 })
		clk.Advance(100 * time.Millisecond)
		cancel()
		if _, err := s.wait(t); !errors.Is(err, context.Canceled) {
			t.Fatalf("Submit whose context ended while it waited: %v, want context.Canceled", err)
		}
		// The rejection names the context's error, not a bulkhead code.
		var detail string
		rec.mu.Lock()
		for _, e := range rec.events {
			if e.Code == bulkhead.EventRequestRejected {
				detail = e.Detail
			}
		}
		rec.mu.Unlock()
		if detail != context.Canceled.Error() {
			t.Fatalf("rejection detail %q, want %q", detail, context.Canceled.Error())
		}
		wantGone(t, b, p1, p2)
	})

	// Upstream's AcquirePermitWithMaxWait looks at the context before it
	// waits, and fails with its error if it has ended. Here too (Acquire's
	// doc), and the request is a rejection like any other that fails: the
	// log and the listener are told of it (EventRequestRejected, "an
	// acquire failed"), with the context's error as its detail, so that an
	// observer counting requests misses none.
	t.Run("with context ended before Bulkhead delay", func(t *testing.T) {
		rec := &recorder{}
		clk := clock.NewFake(t0)
		b := newBH(t, 2, bulkhead.WithQueue(1, time.Second), bulkhead.WithClock(clk),
			bulkhead.WithListener(rec), bulkhead.WithEventLog(16))
		p1 := acquire(t, b, 1)
		p2 := acquire(t, b, 1) // full
		ctx, cancel := context.WithCancel(bg)
		cancel()
		if _, err := b.Acquire(ctx, 1); !errors.Is(err, context.Canceled) {
			t.Fatalf("Acquire with an ended context: %v, want context.Canceled", err)
		}
		if _, err := bulkhead.Submit(b, ctx, mustNotRun(t)); !errors.Is(err, context.Canceled) {
			t.Fatalf("Submit with an ended context: %v, want context.Canceled", err)
		}
		rec.mu.Lock()
		told := append([]bulkhead.Event(nil), rec.events...)
		rec.mu.Unlock()
		for name, es := range map[string][]bulkhead.Event{"log": b.Events(), "listener": told} {
			var rejected []string
			for _, e := range es {
				if e.Code == bulkhead.EventRequestRejected {
					rejected = append(rejected, e.Detail)
				}
			}
			if len(rejected) != 2 || rejected[0] != context.Canceled.Error() || rejected[1] != context.Canceled.Error() {
				t.Errorf("%s: rejections %q for two acquires that failed with an ended context, want two %q (all: %v)",
					name, rejected, context.Canceled.Error(), codes(es))
			}
		}
		wantGone(t, b, p1, p2)
	})

	// Adapted: upstream composes its Timeout policy (10 ms) around the
	// bulkhead (100 ms maximum wait) and expects timeout.ErrExceeded. The
	// bulkhead has no Timeout policy: its counterpart is the deadline of the
	// caller's context, whose error Acquire and Submit return. The fake clock
	// never moves, so the queue's maximum wait cannot come first.
	t.Run("with deadline during Bulkhead delay", func(t *testing.T) {
		clk := clock.NewFake(t0)
		b := newBH(t, 2, bulkhead.WithQueue(1, 100*time.Millisecond), bulkhead.WithClock(clk))
		p1 := acquire(t, b, 1)
		p2 := acquire(t, b, 1) // full
		ctx, cancel := context.WithTimeout(bg, 10*time.Millisecond)
		defer cancel()
		if _, err := bulkhead.Submit(b, ctx, mustNotRun(t)); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Submit whose deadline passed while it waited: %v, want context.DeadlineExceeded", err)
		}
		wantGone(t, b, p1, p2)
	})

	// Adapted: upstream cancels the execution's result (RunAsync, then
	// Cancel) while it waits for a permit. Submit returns its Handle only
	// once admitted, so a waiting Submit is cancelled through its context;
	// the function is never called.
	t.Run("with ExecutionResult during Bulkhead delay", func(t *testing.T) {
		clk := clock.NewFake(t0)
		b := newBH(t, 2, bulkhead.WithQueue(1, time.Second), bulkhead.WithClock(clk))
		p1 := acquire(t, b, 1)
		p2 := acquire(t, b, 1) // full
		ctx, cancel := context.WithCancel(bg)
		s := submitAsync(ctx, b, mustNotRun(t))
		eventually(t, "the execution to queue", func() bool { return b.QueueDepth() == 1 })
		select {
		case <-s.done:
			t.Fatal("Submit returned while the bulkhead was full")
		default:
		}
		cancel()
		h, err := s.wait(t)
		if !errors.Is(err, context.Canceled) || h != nil {
			t.Fatalf("Submit cancelled while it waited: (%v, %v), want (nil, context.Canceled)", h, err)
		}
		wantGone(t, b, p1, p2)
	})
}

// test/listeners_test.go: TestListenersForBulkhead. Two executions against
// a full bulkhead fail, and OnFull is called for each.
//
// Adapted: OnFull is EventAtCapacity; upstream's done and failure counts
// (2 and 2) are the rejections, and its success count (0) the permits
// acquired after the two that fill the bulkhead.
func TestFailsafeListenersForBulkhead(t *testing.T) {
	rec := &recorder{}
	b := newBH(t, 2, bulkhead.WithListener(rec))
	p1, err := b.Acquire(bg, 1)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := b.Acquire(bg, 1)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		_, err := bulkhead.Submit(b, bg, mustNotRun(t))
		wantErr(t, err, bulkhead.ErrAtCapacity)
	}
	release(t, b, p1)
	release(t, b, p2)

	n := rec.counts()
	want := map[string]int{
		bulkhead.EventPermitAcquired:  2, // the two that fill it, and no more
		bulkhead.EventAtCapacity:      2, // OnFull
		bulkhead.EventRequestRejected: 2,
		bulkhead.EventPermitReleased:  2,
	}
	for code, w := range want {
		if n[code] != w {
			t.Errorf("%d %s events, want %d (all: %v)", n[code], code, w, n)
		}
	}
}

// test/policy_composition_test.go: "with Bulkhead". A retry policy of 7
// attempts around a full bulkhead fails 7 times with ErrFull and never runs
// the function.
//
// Adapted: the bulkhead has no retry policy; the 7 attempts are a loop. A
// refusal changes nothing, so each attempt meets the same full bulkhead.
func TestFailsafeBulkheadUnderRetries(t *testing.T) {
	b := newBH(t, 2)
	acquire(t, b, 1)
	acquire(t, b, 1) // full
	before := stateOf(b)
	for range 7 {
		_, err := bulkhead.Submit(b, bg, mustNotRun(t))
		wantErr(t, err, bulkhead.ErrAtCapacity)
	}
	if got := stateOf(b); got != before {
		t.Fatalf("refusals changed the state from %+v to %+v", before, got)
	}
}
