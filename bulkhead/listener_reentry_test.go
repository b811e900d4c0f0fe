package bulkhead_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/bulkhead"
	"github.com/groupexec/groupexec/clock"
)

// A Listener is called "never under the bulkhead's locks (it may call the
// bulkhead)": from every place that delivers events. The listener here calls
// the methods that take the bulkhead's mutex (QueueDepth, Draining, Events,
// an acquire and release, RecordLatency, SetLimit to the limit in force) on
// every event, and the scenario makes every event code happen, by every
// path that delivers one: an issue, a refusal (full, gated, ended context),
// queueing, a time-out on the clock's timer, a waiter giving up, a release
// serving a waiter, a drain started and completed by SetLimit and a
// release, a latency, and a Submit. An event delivered under the mutex
// would deadlock the scenario, which the bound on its run catches.
func TestListenerMayCallTheBulkheadFromEveryEvent(t *testing.T) {
	clk := clock.NewFake(t0)
	var b *bulkhead.Bulkhead
	var (
		heardMu sync.Mutex
		heard   = map[string]int{}
		nested  atomic.Bool // one re-entrant acquire at a time: its own events would recurse
	)
	b = newBH(t, 2, bulkhead.WithClock(clk), bulkhead.WithQueue(2, time.Second),
		bulkhead.WithRequiredCapability("remote"), bulkhead.WithEventLog(16),
		bulkhead.WithListener(bulkhead.ListenerFunc(func(e bulkhead.Event) {
			heardMu.Lock()
			heard[e.Code]++
			heardMu.Unlock()
			_ = b.QueueDepth()
			_ = b.Draining()
			_ = b.Events()
			if !nested.CompareAndSwap(false, true) {
				return
			}
			defer nested.Store(false)
			if p, err := b.TryAcquire(remote, 1); err == nil {
				_ = b.Release(p)
			}
			b.RecordLatency(time.Millisecond)
			_ = b.SetLimit(b.Limit()) // the same limit: changes nothing
		})))

	done := make(chan struct{})
	go func() {
		defer close(done)
		p1 := acquire(t, b, 1)
		p2, err := b.Acquire(remote, 1)
		if err != nil {
			t.Errorf("Acquire: %v", err)
			return
		}
		if _, err := b.TryAcquire(remote, 1); err == nil {
			t.Error("TryAcquire of a full bulkhead succeeded")
		}
		if _, err := b.TryAcquire(bg, 1); err == nil { // without the capability
			t.Error("TryAcquire without the capability succeeded")
		}
		ended, cancel := context.WithCancel(remote)
		cancel()
		if _, err := b.Acquire(ended, 1); err == nil {
			t.Error("Acquire with an ended context succeeded")
		}

		// Queued, then timed out by the clock's timer.
		timedOut := acquireAsync(remote, b, 1)
		armed(t, clk, 1)
		clk.Advance(time.Second)
		if _, err := timedOut.wait(t); err == nil {
			t.Error("a waiter past its maximum wait was granted")
		}
		// Queued, then giving up.
		gives, giveUp := context.WithCancel(remote)
		givingUp := acquireAsync(gives, b, 1)
		armed(t, clk, 1)
		giveUp()
		if _, err := givingUp.wait(t); err == nil {
			t.Error("a waiter that gave up was granted")
		}
		// Queued, then served by a release.
		served := acquireAsync(remote, b, 1)
		armed(t, clk, 1)
		release(t, b, p1)
		p3, err := served.wait(t)
		if err != nil {
			t.Errorf("a waiter was not served by a release: %v", err)
			return
		}
		// A drain, started by SetLimit and completed by releases.
		if err := b.SetLimit(1); err != nil {
			t.Error(err)
		}
		release(t, b, p2)
		release(t, b, p3)
		if err := b.SetLimit(2); err != nil {
			t.Error(err)
		}
		b.RecordLatency(time.Millisecond)
		h, err := bulkhead.Submit(b, remote, func(context.Context) (int, error) { return 1, nil })
		if err != nil {
			t.Errorf("Submit: %v", err)
			return
		}
		if _, err := h.Wait(bg); err != nil {
			t.Error(err)
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second): // only a deadlock takes this long
		t.Fatal("the scenario did not end: a listener called the bulkhead under its mutex")
	}

	if s := stateOf(b); s.inFlight != 0 || s.queued != 0 || b.Draining() {
		t.Fatalf("at the end: %+v, draining %v", s, b.Draining())
	}
	heardMu.Lock()
	defer heardMu.Unlock()
	for _, code := range []string{bulkhead.EventPermitAcquired, bulkhead.EventPermitReleased, bulkhead.EventAtCapacity,
		bulkhead.EventRequestQueued, bulkhead.EventRequestRejected, bulkhead.EventCapChanged,
		bulkhead.EventDrainActive, bulkhead.EventDrainComplete, bulkhead.EventLatencyReport} {
		if heard[code] == 0 {
			t.Errorf("the listener never heard %s: %v", code, heard)
		}
	}
}
