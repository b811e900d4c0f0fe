package bulkhead_test

import (
	"context"
	"testing"
	"time"

	"github.com/groupexec/groupexec/bulkhead"
	"github.com/groupexec/groupexec/clock"
)

// A handle that completed before Wait's context ended returns its result:
// the context did not end first.
func TestWaitReturnsResultOfCompletedHandle(t *testing.T) {
	b := newBH(t, 1)
	for i := range 200 {
		h := submit(t, b, func(context.Context) (int, error) { return 7, nil })
		<-h.Done()
		ctx, cancel := context.WithCancel(bg)
		cancel()
		r, err := h.Wait(ctx)
		if err != nil || r.Value != 7 || r.Status != bulkhead.Success {
			t.Fatalf("run %d: Wait after completion = %+v, %v; want the result", i, r, err)
		}
	}
}

// A caller that has seen Submit's result finds its latency recorded.
func TestSubmitLatencyRecordedBeforeResult(t *testing.T) {
	for i := range 2000 {
		clk := clock.NewFake(t0)
		b := newBH(t, 1, bulkhead.WithClock(clk))
		r := result(t, submit(t, b, func(context.Context) (int, error) {
			clk.Advance(time.Millisecond)
			return 0, nil
		}))
		if r.Status != bulkhead.Success {
			t.Fatalf("result %+v", r)
		}
		if p, ok := b.P99(); !ok || p != time.Millisecond {
			t.Fatalf("run %d: P99 = %v, %v after the result; want 1ms", i, p, ok)
		}
	}
}

// Raising a lowered limit that still leaves in-flight above it keeps the
// drain going, but the limit was not lowered again.
func TestDrainActiveDetailOnRaise(t *testing.T) {
	b := newBH(t, 8, bulkhead.WithEventLog(16))
	for range 8 {
		acquire(t, b, 1)
	}
	if err := b.SetLimit(2); err != nil {
		t.Fatal(err)
	}
	if err := b.SetLimit(4); err != nil {
		t.Fatal(err)
	}
	es := b.Events()
	last := es[len(es)-1]
	if last.Code != bulkhead.EventDrainActive || last.Detail == "lowered again" {
		t.Fatalf("after a raise that keeps the drain: %s %q", last.Code, last.Detail)
	}
	if err := b.SetLimit(3); err != nil {
		t.Fatal(err)
	}
	if es = b.Events(); es[len(es)-1].Detail != "lowered again" {
		t.Fatalf("after lowering again: %+v", es[len(es)-1])
	}
}

// A queued request whose context ends as its permit is issued fails with
// the context's error; the log records the rejection, and the permit comes
// back. The gate holds the request between its queueing and its wait, so
// that the grant and the cancel both land before it looks, every time.
func TestWaiterGivingUpOnGrantIsRejectedEvent(t *testing.T) {
	g := newGate()
	b := newBH(t, 1, bulkhead.WithQueue(1, time.Hour), bulkhead.WithEventLog(64), bulkhead.WithListener(g))
	held := acquire(t, b, 1)
	ctx, cancel := context.WithCancel(bg)
	w := acquireAsync(ctx, b, 1)
	<-g.queued
	release(t, b, held) // issues the permit to the waiting request
	cancel()
	g.proceed <- struct{}{}
	p, err := w.wait(t)
	if err == nil {
		release(t, b, p)
		t.Fatal("Acquire returned a permit although its context ended before it looked")
	}
	if err != context.Canceled {
		t.Fatalf("Acquire: %v", err)
	}
	if b.InFlight() != 0 {
		t.Fatalf("%d in flight", b.InFlight())
	}
	n := 0
	for _, e := range b.Events() {
		if e.Code == bulkhead.EventRequestRejected {
			n++
			if e.Detail != context.Canceled.Error() {
				t.Fatalf("rejection detail %q", e.Detail)
			}
		}
	}
	if n != 1 {
		t.Fatalf("%d rejection events for an acquire that failed, want 1: %v", n, codes(b.Events()))
	}
}
