package bulkhead_test

// Regression tests: each covers a bug that was found and fixed.

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/bulkhead"
	"github.com/groupexec/groupexec/clock"
)

// A waiter evicted past its deadline (its timer late) must not strand a
// lighter waiter behind it that fits: the acquire that evicts it serves the
// queue, in order, before itself.
func TestEvictionServesTheWaitersBehind(t *testing.T) {
	clk := stuckClock{clock.NewFake(t0)}
	b := newBH(t, 3, bulkhead.WithQueue(4, time.Second), bulkhead.WithClock(clk))
	held := acquire(t, b, 2) // 1 free
	w1 := acquireAsync(bg, b, 2)
	eventually(t, "w1 to queue", func() bool { return b.QueueDepth() == 1 })
	clk.Advance(time.Millisecond)
	w2 := acquireAsync(bg, b, 1) // fits, but FIFO: behind w1
	eventually(t, "w2 to queue", func() bool { return b.QueueDepth() == 2 })

	clk.Advance(time.Second - time.Millisecond) // w1's deadline, not w2's
	_, err := b.TryAcquire(bg, 1)
	wantErr(t, err, bulkhead.ErrAtCapacity) // w2 was ahead of it and took the free permit
	if _, err := w1.wait(t); !errors.Is(err, bulkhead.ErrQueueTimeout) {
		t.Fatalf("w1: %v", err)
	}
	p2, err := w2.wait(t)
	if err != nil {
		t.Fatalf("w2 stranded: %v (%+v)", err, stateOf(b))
	}
	if err := b.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	release(t, b, p2)
	release(t, b, held)
}

// A queued request heavier than a lowered limit keeps waiting (queued
// waiters keep waiting unless their wait expires) without holding up the
// requests behind it, and is served when the limit is raised again.
func TestWaiterTooHeavyForALoweredLimit(t *testing.T) {
	b := newBH(t, 3, bulkhead.WithQueue(4, time.Hour))
	held := acquire(t, b, 3)
	w1 := acquireAsync(bg, b, 3)
	eventually(t, "w1 to queue", func() bool { return b.QueueDepth() == 1 })
	w2 := acquireAsync(bg, b, 1)
	eventually(t, "w2 to queue", func() bool { return b.QueueDepth() == 2 })
	if err := b.SetLimit(2); err != nil {
		t.Fatal(err)
	}
	release(t, b, held)
	p2, err := w2.wait(t)
	if err != nil {
		t.Fatalf("w2 behind a request too heavy for the new limit: %v", err)
	}
	p3 := acquire(t, b, 1) // room, and no servable waiter ahead: TryAcquire is not held up either
	if w1.returned() {
		t.Fatal("the heavy waiter was dropped")
	}
	if err := b.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	_, err = b.Acquire(bg, 3) // a new one that heavy is refused at once
	wantErr(t, err, bulkhead.ErrAtCapacity)
	release(t, b, p2)
	release(t, b, p3)
	if err := b.SetLimit(3); err != nil {
		t.Fatal(err)
	}
	p1, err := w1.wait(t)
	if err != nil || p1.Weight() != 3 {
		t.Fatalf("the heavy waiter after the raise: %v", err)
	}
	release(t, b, p1)
}

// Fn is invoked only with a permit: a handle cancelled before its goroutine
// starts never runs its function, and its permit is back at once. The
// goroutine is started after Cancel, in that order, every time: with
// Submit's own goroutine the order is the scheduler's, and a Cancel that
// lands after the goroutine looked, but before fn began, is a cancel of a
// running fn, which fn may well see.
func TestCancelledBeforeStartNeverRuns(t *testing.T) {
	b := newBH(t, 1)
	for i := range 100 {
		var ran atomic.Int32
		h, start, err := bulkhead.SubmitUnstarted(b, bg, func(context.Context) (int, error) {
			ran.Add(1)
			return 0, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if !h.Cancel() {
			t.Fatalf("iteration %d: Cancel of a handle whose goroutine has not started did nothing", i)
		}
		if n := b.InFlight(); n != 0 {
			t.Fatalf("iteration %d: %d in flight after Cancel", i, n)
		}
		<-start()
		if n := ran.Load(); n != 0 {
			t.Fatalf("iteration %d: the function ran %d times after Cancel had released its permit", i, n)
		}
		if r := result(t, h); r.Status != bulkhead.Cancelled {
			t.Fatalf("iteration %d: status %v, want Cancelled", i, r.Status)
		}
		if err := b.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
	}
}

// A permit freed just after a waiter gave up goes to the next waiter, not
// to the one that gave up. The race is not forced
// (TestAcquireCancelledBeforeGrantFails forces it); every outcome must leave
// the books right.
func TestGiveUpAsGrantedHandsThePermitOn(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	b := newBH(t, 1, bulkhead.WithQueue(4, time.Hour))
	for i := range 300 {
		held := acquire(t, b, 1)
		ctx1, cancel1 := context.WithCancel(bg)
		w1 := acquireAsync(ctx1, b, 1)
		eventually(t, "w1 to queue", func() bool { return b.QueueDepth() == 1 })
		w2 := acquireAsync(bg, b, 1)
		eventually(t, "w2 to queue", func() bool { return b.QueueDepth() == 2 })
		cancel1()
		release(t, b, held)
		if p1, err := w1.wait(t); !errors.Is(err, context.Canceled) {
			t.Fatalf("iteration %d: w1, cancelled before the release: (permit %d, %v)", i, p1.ID(), err)
		}
		p2, err := w2.wait(t)
		if err != nil {
			t.Fatalf("iteration %d: w2: %v", i, err)
		}
		release(t, b, p2)
		if s := stateOf(b); s.inFlight != 0 || s.queued != 0 {
			t.Fatalf("iteration %d: %+v", i, s)
		}
		if err := b.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
	}
}

// Cancel racing the function's return: one result, the permit back once.
func TestCancelRacesCompletion(t *testing.T) {
	b := newBH(t, 8, bulkhead.WithListener(bulkhead.ListenerFunc(func(bulkhead.Event) {})))
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for range 200 {
				h, err := bulkhead.Submit(b, bg, func(context.Context) (int, error) { return 1, nil })
				if err != nil {
					continue
				}
				go h.Cancel()
				if r := result(t, h); r.Status != bulkhead.Success && r.Status != bulkhead.Cancelled {
					t.Errorf("status %v", r.Status)
				}
			}
		})
	}
	wg.Wait()
	eventually(t, "all permits back", func() bool { return b.InFlight() == 0 })
	if err := b.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}
