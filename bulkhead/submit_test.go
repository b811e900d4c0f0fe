package bulkhead_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/groupexec/groupexec/bulkhead"
	"github.com/groupexec/groupexec/clock"
)

func submit[T any](t testing.TB, b *bulkhead.Bulkhead, fn func(context.Context) (T, error)) *bulkhead.Handle[T] {
	t.Helper()
	h, err := bulkhead.Submit(b, bg, fn)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func result[T any](t testing.TB, h *bulkhead.Handle[T]) bulkhead.Result[T] {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	r, err := h.Wait(ctx)
	if err != nil {
		t.Fatal("handle did not complete:", err)
	}
	return r
}

func TestSubmitOutcomes(t *testing.T) {
	errBoom := errors.New("boom")
	tests := []struct {
		name string
		fn   func(context.Context) (int, error)
		want bulkhead.Status
		val  int
		err  func(error) bool
	}{
		{"success", func(context.Context) (int, error) { return 7, nil }, bulkhead.Success, 7,
			func(err error) bool { return err == nil }},
		{"failure", func(context.Context) (int, error) { return 7, errBoom }, bulkhead.Failed, 0,
			func(err error) bool { return err == errBoom }},
		{"deadline is a failure", func(context.Context) (int, error) { return 0, context.DeadlineExceeded }, bulkhead.Failed, 0,
			func(err error) bool { return err == context.DeadlineExceeded }},
		{"wrapped cancellation", func(context.Context) (int, error) {
			return 0, fmt.Errorf("rpc: %w", fmt.Errorf("call: %w", context.Canceled))
		}, bulkhead.Cancelled, 0, func(err error) bool { return errors.Is(err, context.Canceled) }},
		{"panic", func(context.Context) (int, error) { panic(errBoom) }, bulkhead.Failed, 0,
			func(err error) bool {
				var pe *bulkhead.PanicError
				return errors.As(err, &pe) && errors.Is(err, errBoom) && len(pe.Stack) > 0
			}},
		{"goexit", func(context.Context) (int, error) { runtime.Goexit(); return 0, nil }, bulkhead.Failed, 0,
			func(err error) bool { return err == bulkhead.ErrGoexit }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newBH(t, 1)
			r := result(t, submit(t, b, tc.fn))
			if r.Status != tc.want || r.Value != tc.val || !tc.err(r.Err) {
				t.Fatalf("result %+v (%v), want status %v value %d", r, r.Status, tc.want, tc.val)
			}
			// The handle completed after its permit came back.
			if b.InFlight() != 0 {
				t.Fatalf("%d in flight after the handle completed", b.InFlight())
			}
		})
	}
}

// A caller that saw the result can count on the capacity: with limit 1,
// every Submit right after the previous result is admitted.
func TestHandleCompletesAfterRelease(t *testing.T) {
	b := newBH(t, 1)
	for i := range 2000 {
		h, err := bulkhead.Submit(b, bg, func(context.Context) (int, error) { return i, nil })
		if err != nil {
			t.Fatalf("submission %d refused after the previous result: %v", i, err)
		}
		if r := result(t, h); r.Value != i {
			t.Fatalf("result %d, want %d", r.Value, i)
		}
	}
}

// Cancel releases the permit at once and cancels the function's context,
// which carries ErrCancelled as its cause; the function's own result is
// dropped.
func TestCancelReleasesAtOnce(t *testing.T) {
	b := newBH(t, 1)
	started, cause, finish := make(chan struct{}), make(chan error, 1), make(chan struct{})
	h := submit(t, b, func(ctx context.Context) (int, error) {
		close(started)
		<-ctx.Done()
		cause <- context.Cause(ctx)
		<-finish
		return 1, nil
	})
	<-started
	if !h.Cancel() {
		t.Fatal("Cancel of a running operation reported false")
	}
	if b.InFlight() != 0 {
		t.Fatal("Cancel did not release the permit at once")
	}
	r := result(t, h)
	if r.Status != bulkhead.Cancelled || !errors.Is(r.Err, context.Canceled) {
		t.Fatalf("cancelled handle's result %+v", r)
	}
	if got := <-cause; got != bulkhead.ErrCancelled {
		t.Fatalf("function's context cause %v", got)
	}
	// The capacity is the caller's again, while the function still runs.
	p := acquire(t, b, 1)
	close(finish)
	if h.Cancel() {
		t.Fatal("second Cancel reported true")
	}
	release(t, b, p)
	if r2 := result(t, h); r2 != r {
		t.Fatalf("the function's late return changed the result to %+v", r2)
	}
}

// Submit's context reaches the function; its cancellation ends the run as
// the function reports it.
func TestSubmitContextReachesFunction(t *testing.T) {
	b := newBH(t, 1)
	type key struct{}
	ctx, cancel := context.WithCancel(context.WithValue(bg, key{}, "v"))
	h, err := bulkhead.Submit(b, ctx, func(ctx context.Context) (string, error) {
		<-ctx.Done()
		return ctx.Value(key{}).(string), ctx.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if r := result(t, h); r.Status != bulkhead.Cancelled {
		t.Fatalf("result %+v", r)
	}
}

func TestSubmitWaitsInTheQueue(t *testing.T) {
	clk := clock.NewFake(t0)
	b := newBH(t, 1, bulkhead.WithQueue(1, time.Second), bulkhead.WithClock(clk))
	held := acquire(t, b, 1)
	type sub struct {
		h   *bulkhead.Handle[int]
		err error
	}
	done := make(chan sub, 1)
	go func() {
		h, err := bulkhead.Submit(b, bg, func(context.Context) (int, error) { return 3, nil })
		done <- sub{h, err}
	}()
	eventually(t, "Submit to queue", func() bool { return b.QueueDepth() == 1 })
	release(t, b, held)
	s := <-done
	if s.err != nil || result(t, s.h).Value != 3 {
		t.Fatalf("queued Submit: %v", s.err)
	}

	held = acquire(t, b, 1)
	go func() {
		h, err := bulkhead.Submit(b, bg, func(context.Context) (int, error) {
			t.Error("a timed-out Submit ran")
			return 0, nil
		})
		done <- sub{h, err}
	}()
	eventually(t, "Submit to queue", func() bool { return b.QueueDepth() == 1 })
	armed(t, clk, 1)
	clk.Advance(time.Second)
	s = <-done
	wantErr(t, s.err, bulkhead.ErrQueueTimeout)
	release(t, b, held)
}

// Submit records each run's latency by the bulkhead's clock.
func TestSubmitRecordsLatency(t *testing.T) {
	clk := clock.NewFake(t0)
	b := newBH(t, 1, bulkhead.WithClock(clk), bulkhead.WithLatencyTarget(time.Second))
	result(t, submit(t, b, func(context.Context) (int, error) {
		clk.Advance(1500 * time.Millisecond)
		return 0, nil
	}))
	if p, ok := b.P99(); !ok || p != 1500*time.Millisecond || b.WithinTarget() {
		t.Fatalf("P99 %v %v within %v", p, ok, b.WithinTarget())
	}
}

func TestWaitContextEnds(t *testing.T) {
	b := newBH(t, 1)
	release := make(chan struct{})
	h := submit(t, b, func(context.Context) (int, error) { <-release; return 1, nil })
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if _, err := h.Wait(ctx); err != context.Canceled {
		t.Fatalf("Wait with a done context: %v", err)
	}
	select {
	case <-h.Done():
		t.Fatal("done before the function returned")
	default:
	}
	close(release)
	if r := result(t, h); r.Value != 1 || h.Permit().ID() != 1 {
		t.Fatalf("result %+v permit %d", r, h.Permit().ID())
	}
}

// A Wait whose context's Done closes while its Err reports nil has ended
// all the same: it returns an error (matching context.Canceled), not the
// zero Result with a nil error, which a caller would take for the
// operation's outcome.
func TestWaitDoneWithoutErr(t *testing.T) {
	b := newBH(t, 1)
	release := make(chan struct{})
	h := submit(t, b, func(context.Context) (int, error) { <-release; return 1, nil })
	ctx := &doneNoErrContext{Context: bg, done: make(chan struct{})}
	close(ctx.done)
	if r, err := h.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait with a context done without an error: (%+v, %v), want context.Canceled", r, err)
	}
	close(release)
	if r := result(t, h); r.Status != bulkhead.Success || r.Value != 1 {
		t.Fatalf("result %+v", r)
	}
}

// Submit derives fn's context from ctx once it holds the permit, which
// reads ctx (its Done, and its Err once it has ended): a context whose Err
// panics there makes Submit panic, but the permit it took must go back.
// Without a queue, the admission itself reads no context.
func TestSubmitPanickingContextLeaksNoPermit(t *testing.T) {
	b := newBH(t, 1)
	inner, cancel := context.WithCancel(bg)
	cancel()
	ctx := &brokenContext{Context: inner}
	ctx.broken.Store(true)
	ran := false
	func() {
		defer func() {
			if recover() == nil {
				t.Errorf("Submit with a context whose Err panics did not panic (ran %v)", ran)
			}
		}()
		_, _ = bulkhead.Submit(b, ctx, func(context.Context) (int, error) { ran = true; return 0, nil })
	}()
	if n := b.InFlight(); n != 0 {
		t.Fatalf("%d permits out after Submit panicked, want none", n)
	}
	release(t, b, acquire(t, b, 1))
	if err := b.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}
