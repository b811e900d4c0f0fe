package bulkhead_test

// One test per acceptance criterion of the remote-bulkhead spec
// (shared/seeds/remote-bulkhead-spec.md), named after it.

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/groupexec/groupexec/bulkhead"
	"github.com/groupexec/groupexec/clock"
)

// AC1, INV-RB-CAPPED: no permit is issued at or beyond the limit, by count
// or by weight.
func TestAC1NeverIssuesBeyondTheLimit(t *testing.T) {
	b := newBH(t, 3)
	var ps []bulkhead.Permit
	for range 3 {
		ps = append(ps, acquire(t, b, 1))
	}
	if _, err := b.TryAcquire(bg, 1); err == nil {
		t.Fatal("a fourth permit was issued under limit 3")
	}
	release(t, b, ps[0])
	if _, err := b.TryAcquire(bg, 2); err == nil {
		t.Fatal("a permit of weight 2 was issued with 1 free")
	}
	p := acquire(t, b, 1)
	if b.InFlight() != 3 || b.Available() != 0 {
		t.Fatalf("in flight %d available %d, want 3 and 0", b.InFlight(), b.Available())
	}
	if p.Limit() != 3 || p.Weight() != 1 {
		t.Fatalf("permit limit %d weight %d", p.Limit(), p.Weight())
	}
}

// AC2: without a queue, a request at capacity fails at once with
// ErrAtCapacity, naming the limit and in-flight.
func TestAC2RejectAtCapacity(t *testing.T) {
	b := newBH(t, 2)
	acquire(t, b, 2)
	before := stateOf(b)
	for name, try := range map[string]func() error{
		"TryAcquire": func() error { _, err := b.TryAcquire(bg, 1); return err },
		"Acquire":    func() error { _, err := b.Acquire(bg, 1); return err },
		"Submit": func() error {
			_, err := bulkhead.Submit(b, bg, func(context.Context) (int, error) {
				t.Error("a refused Submit ran its function")
				return 0, nil
			})
			return err
		},
	} {
		err := try()
		wantErr(t, err, bulkhead.ErrAtCapacity)
		var rej *bulkhead.RejectedError
		if !errors.As(err, &rej) || rej.Limit != 2 || rej.InFlight != 2 || rej.Weight != 1 {
			t.Fatalf("%s: %#v", name, rej)
		}
		if got := stateOf(b); got != before {
			t.Fatalf("%s: a refusal changed the state from %+v to %+v", name, before, got)
		}
	}
}

// AC3: with a queue, requests at capacity wait up to its depth, FIFO;
// deeper ones fail with ErrQueueSaturated.
func TestAC3QueueUpToDepth(t *testing.T) {
	b := newBH(t, 1, bulkhead.WithQueue(2, time.Hour))
	held := acquire(t, b, 1)
	q := queueWith(t, bg, b, 2)

	_, err := b.Acquire(bg, 1)
	wantErr(t, err, bulkhead.ErrQueueSaturated)
	var rej *bulkhead.RejectedError
	if !errors.As(err, &rej) || rej.MaxDepth != 2 || rej.QueueDepth != 2 {
		t.Fatalf("saturated error %#v", rej)
	}
	// TryAcquire never waits, and never jumps the queue.
	_, err = b.TryAcquire(bg, 1)
	wantErr(t, err, bulkhead.ErrAtCapacity)

	release(t, b, held)
	p1, err := q[0].wait(t)
	if err != nil {
		t.Fatal(err)
	}
	if q[1].returned() {
		t.Fatal("the second waiter was served before the first released")
	}
	release(t, b, p1)
	p2, err := q[1].wait(t)
	if err != nil {
		t.Fatal(err)
	}
	if p2.ID() <= p1.ID() {
		t.Fatalf("IDs not increasing in issue order: %d then %d", p1.ID(), p2.ID())
	}
	release(t, b, p2)
}

// AC4: a queued request that waits its maximum fails with ErrQueueTimeout
// and holds nothing: on its timer, and, should the timer be late, on the
// next acquire or release.
func TestAC4QueueTimeout(t *testing.T) {
	t.Run("timer", func(t *testing.T) {
		clk := clock.NewFake(t0)
		b := newBH(t, 1, bulkhead.WithQueue(4, time.Second), bulkhead.WithClock(clk))
		held := acquire(t, b, 1)
		q := queueWith(t, bg, b, 1)
		armed(t, clk, 1)
		clk.Advance(time.Second - 1)
		if q[0].returned() {
			t.Fatal("the request timed out early")
		}
		clk.Advance(1)
		_, err := q[0].wait(t)
		wantErr(t, err, bulkhead.ErrQueueTimeout)
		if b.QueueDepth() != 0 || b.InFlight() != 1 {
			t.Fatalf("after the timeout: %+v", stateOf(b))
		}
		release(t, b, held)
		if b.InFlight() != 0 {
			t.Fatal("the timed-out request holds a permit")
		}
	})
	for name, next := range map[string]func(*bulkhead.Bulkhead, bulkhead.Permit) func(){
		"next acquire": func(b *bulkhead.Bulkhead, _ bulkhead.Permit) func() {
			ctx, cancel := context.WithCancel(bg)
			r := acquireAsync(ctx, b, 1) // evicts the expired, then waits itself
			return func() {
				cancel()
				_, err := r.wait(t)
				if !errors.Is(err, context.Canceled) {
					t.Errorf("the next acquire: %v", err)
				}
			}
		},
		"release": func(b *bulkhead.Bulkhead, p bulkhead.Permit) func() {
			release(t, b, p)
			return func() {}
		},
	} {
		t.Run(name, func(t *testing.T) {
			clk := stuckClock{clock.NewFake(t0)}
			b := newBH(t, 1, bulkhead.WithQueue(4, time.Second), bulkhead.WithClock(clk))
			held := acquire(t, b, 1)
			q := queueWith(t, bg, b, 2)
			clk.Advance(time.Second)
			cleanup := next(b, held)
			for _, r := range q {
				_, err := r.wait(t)
				wantErr(t, err, bulkhead.ErrQueueTimeout)
			}
			cleanup()
		})
	}
}

// AC5, INV-RB-GATED: without the required capability, every acquire fails
// at once with ErrCapabilityRequired and changes nothing, not even the next
// permit ID.
func TestAC5CapabilityGate(t *testing.T) {
	b := newBH(t, 1, bulkhead.WithRequiredCapability("remote"), bulkhead.WithQueue(1, time.Second))
	before := stateOf(b)
	other := bulkhead.WithCapability(bg, "local")
	for _, ctx := range []context.Context{bg, other} {
		_, err := b.TryAcquire(ctx, 1)
		wantErr(t, err, bulkhead.ErrCapabilityRequired)
		_, err = b.Acquire(ctx, 1)
		wantErr(t, err, bulkhead.ErrCapabilityRequired)
		_, err = bulkhead.Submit(b, ctx, func(context.Context) (int, error) { return 0, nil })
		wantErr(t, err, bulkhead.ErrCapabilityRequired)
	}
	if got := stateOf(b); got != before {
		t.Fatalf("refusals changed the state from %+v to %+v", before, got)
	}
	both := bulkhead.WithCapability(other, "remote")
	p := acquire(t, b, 1) // helper's context carries "remote"
	if p.ID() != 1 {
		t.Fatalf("first permit after refusals has ID %d, want 1", p.ID())
	}
	release(t, b, p)
	if _, err := b.TryAcquire(both, 1); err != nil {
		t.Fatalf("a context with several capabilities: %v", err)
	}
}

// AC6 and AC7, INV-RB-SAFE-DRAIN: lowering the limit below in-flight starts
// a drain that refuses new acquires (ErrDraining) until in-flight drops below
// the new limit; permits out are kept.
func TestAC6AC7Drain(t *testing.T) {
	b := newBH(t, 4)
	var ps []bulkhead.Permit
	for range 4 {
		ps = append(ps, acquire(t, b, 1))
	}
	if err := b.SetLimit(2); err != nil {
		t.Fatal(err)
	}
	if !b.Draining() || b.InFlight() != 4 || b.Limit() != 2 || b.Available() != 0 {
		t.Fatalf("after lowering: draining %v %+v", b.Draining(), stateOf(b))
	}
	for i, in := range []int{3, 2} { // 3 and 2 in flight: not below 2 yet
		release(t, b, ps[i])
		_, err := b.TryAcquire(bg, 1)
		wantErr(t, err, bulkhead.ErrDraining)
		var rej *bulkhead.RejectedError
		if !errors.As(err, &rej) || rej.InFlight != in || rej.Limit != 2 {
			t.Fatalf("draining error %#v, want in-flight %d target 2", rej, in)
		}
	}
	release(t, b, ps[2]) // 1 in flight: below
	if b.Draining() {
		t.Fatal("still draining below the new limit")
	}
	p := acquire(t, b, 1)
	if p.Limit() != 2 {
		t.Fatalf("permit issued after the drain carries limit %d", p.Limit())
	}
	_, err := b.TryAcquire(bg, 1)
	wantErr(t, err, bulkhead.ErrAtCapacity) // full again, but not draining
	release(t, b, p)
	release(t, b, ps[3])
}

// Queued requests keep waiting through a drain, and are served once
// in-flight is below the new limit.
func TestDrainKeepsQueuedRequests(t *testing.T) {
	b := newBH(t, 2, bulkhead.WithQueue(4, time.Hour))
	p1, p2 := acquire(t, b, 1), acquire(t, b, 1)
	q := queueWith(t, bg, b, 1)
	if err := b.SetLimit(1); err != nil {
		t.Fatal(err)
	}
	_, err := b.Acquire(bg, 1)
	wantErr(t, err, bulkhead.ErrDraining)
	release(t, b, p1) // 1 in flight, limit 1: still no room
	if q[0].returned() || b.QueueDepth() != 1 {
		t.Fatal("the queued request left during the drain")
	}
	release(t, b, p2)
	p, err := q[0].wait(t)
	if err != nil || p.Limit() != 1 {
		t.Fatalf("queued request after the drain: %v, limit %d", err, p.Limit())
	}
	release(t, b, p)
}

// AC8: Release of a permit that is not outstanding fails closed with
// ErrUnknownPermit and changes nothing.
func TestAC8UnknownPermit(t *testing.T) {
	b, other := newBH(t, 2), newBH(t, 2)
	p := acquire(t, b, 1)
	q := acquire(t, other, 1)
	release(t, b, p)
	before := stateOf(b)
	for name, bad := range map[string]bulkhead.Permit{
		"double release":   p,
		"zero permit":      {},
		"other bulkhead's": q,
	} {
		err := b.Release(bad)
		wantErr(t, err, bulkhead.ErrUnknownPermit)
		var pe *bulkhead.PermitError
		if !errors.As(err, &pe) || pe.ID != bad.ID() {
			t.Fatalf("%s: %v", name, err)
		}
		if got := stateOf(b); got != before {
			t.Fatalf("%s changed the state from %+v to %+v", name, before, got)
		}
	}
	// A released slot reused by a new permit does not make the old one valid.
	p2 := acquire(t, b, 1)
	wantErr(t, b.Release(p), bulkhead.ErrUnknownPermit)
	release(t, b, p2)
	release(t, other, q)
}

// AC9, INV-RB-DETERMINISTIC: P99 is the nearest-rank percentile of the
// samples, whatever their order.
func TestAC9P99Deterministic(t *testing.T) {
	b := newBH(t, 1)
	if _, ok := b.P99(); ok {
		t.Fatal("P99 with no samples")
	}
	samples := make([]time.Duration, 200)
	for i := range samples {
		samples[i] = time.Duration(i+1) * time.Millisecond
	}
	var got []time.Duration
	for seed := range uint64(5) {
		b := newBH(t, 1)
		s := slices.Clone(samples)
		rand.New(rand.NewPCG(seed, 1)).Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
		for _, d := range s {
			b.RecordLatency(d)
		}
		p, ok := b.P99()
		if !ok {
			t.Fatal("no P99")
		}
		got = append(got, p)
	}
	// ceil(0.99 * 200) = 198: the 198th smallest.
	for _, p := range got {
		if p != 198*time.Millisecond {
			t.Fatalf("P99 over shuffles %v, want 198ms each time", got)
		}
	}
	for _, tc := range []struct {
		n    int
		want time.Duration // nearest rank of 1..n ms
	}{{1, 1}, {2, 2}, {100, 99}, {101, 100}, {1000, 990}, {1024, 1014}} {
		b := newBH(t, 1)
		for i := range tc.n {
			b.RecordLatency(time.Duration(i+1) * time.Millisecond)
		}
		if p, _ := b.P99(); p != tc.want*time.Millisecond {
			t.Errorf("P99 of 1..%d ms = %v, want %v", tc.n, p, tc.want*time.Millisecond)
		}
	}
}

// The window is bounded: only the latest DefaultLatencyWindow samples count.
func TestP99WindowAndTarget(t *testing.T) {
	b := newBH(t, 1, bulkhead.WithLatencyTarget(10*time.Millisecond))
	if !b.WithinTarget() {
		t.Fatal("not within target with no samples")
	}
	for range 2000 {
		b.RecordLatency(time.Second) // pushed out below
	}
	if b.WithinTarget() {
		t.Fatal("within target at 1s")
	}
	for range bulkhead.DefaultLatencyWindow {
		b.RecordLatency(10 * time.Millisecond)
	}
	if p, _ := b.P99(); p != 10*time.Millisecond || !b.WithinTarget() {
		t.Fatalf("P99 %v after a full window of 10ms: older samples still count", p)
	}
	b.RecordLatency(-time.Second) // counts as 0
	if p, _ := b.P99(); p != 10*time.Millisecond {
		t.Fatalf("P99 %v", p)
	}
	if !newBH(t, 1).WithinTarget() {
		t.Fatal("no target is always within it")
	}
}

// AC10, INV-RB-AUDITABLE: every transition emits an event with a stable
// code, in order, with the state after it.
func TestAC10Events(t *testing.T) {
	clk := clock.NewFake(t0)
	rec := &recorder{}
	b := newBH(t, 2, bulkhead.WithQueue(1, time.Second), bulkhead.WithClock(clk),
		bulkhead.WithEventLog(64), bulkhead.WithListener(rec), bulkhead.WithRequiredCapability("remote"))

	p1 := acquire(t, b, 1)          // ACQUIRED
	p2 := acquire(t, b, 1)          // ACQUIRED
	q := queueWith(t, remote, b, 1) // AT_CAPACITY, QUEUED
	// The queued request's goroutine tells the listener once it is in the
	// queue and has armed its timer: the next events are made once the
	// listener has heard it.
	rec.waitHeard(t, 4)
	_, _ = b.Acquire(remote, 1) // AT_CAPACITY, REJECTED (saturated)
	_, _ = b.TryAcquire(bg, 1)  // REJECTED (no capability)
	armed(t, clk, 1)
	clk.Advance(time.Second) // REJECTED (queue timeout)
	_, _ = q[0].wait(t)
	// The timer's goroutine tells the listener after it wakes the waiter:
	// the events after it are made once the listener has heard it, so that
	// it hears them all in the log's order.
	rec.waitHeard(t, 8)
	_ = b.SetLimit(1)                     // CAP_CHANGED, DRAIN_ACTIVE
	_, _ = b.TryAcquire(remote, 1)        // DRAIN_ACTIVE, REJECTED (draining)
	release(t, b, p1)                     // RELEASED
	release(t, b, p2)                     // RELEASED, DRAIN_COMPLETE
	b.RecordLatency(5 * time.Millisecond) // LATENCY_REPORT

	want := []string{
		bulkhead.EventPermitAcquired, bulkhead.EventPermitAcquired,
		bulkhead.EventAtCapacity, bulkhead.EventRequestQueued,
		bulkhead.EventAtCapacity, bulkhead.EventRequestRejected,
		bulkhead.EventRequestRejected,
		bulkhead.EventRequestRejected,
		bulkhead.EventCapChanged, bulkhead.EventDrainActive,
		bulkhead.EventDrainActive, bulkhead.EventRequestRejected,
		bulkhead.EventPermitReleased,
		bulkhead.EventPermitReleased, bulkhead.EventDrainComplete,
		bulkhead.EventLatencyReport,
	}
	es := b.Events()
	if got := codes(es); !slices.Equal(got, want) {
		t.Fatalf("events\n got %v\nwant %v", got, want)
	}
	rec.mu.Lock()
	heard := codes(rec.events)
	rec.mu.Unlock()
	if !slices.Equal(heard, want) { // one goroutine made them all: same order
		t.Fatalf("listener heard %v", heard)
	}
	details := []string{"", "", "", "", "", "RB_ERR_QUEUE_SATURATED", "RB_ERR_NO_REMOTECAP", "RB_ERR_QUEUE_TIMEOUT",
		"from 2", "started", "refused an acquire", "RB_ERR_DRAINING", "", "", "", ""}
	for i, e := range es {
		if e.Detail != details[i] {
			t.Errorf("event %d %s detail %q, want %q", i, e.Code, e.Detail, details[i])
		}
	}
	if e := es[1]; e.InFlight != 2 || e.Limit != 2 || e.PermitID != p2.ID() || !e.Time.Equal(t0) {
		t.Fatalf("second acquire event %+v", e)
	}
	if e := es[8]; e.Limit != 1 || e.InFlight != 2 || !e.Time.Equal(t0.Add(time.Second)) {
		t.Fatalf("cap change event %+v", e)
	}
	if e := es[15]; e.Latency != 5*time.Millisecond {
		t.Fatalf("latency event %+v", e)
	}
}

// The event log keeps only the last N events.
func TestEventLogIsBounded(t *testing.T) {
	b := newBH(t, 1, bulkhead.WithEventLog(3))
	var ids []uint64
	for range 5 {
		p := acquire(t, b, 1)
		ids = append(ids, p.ID())
		release(t, b, p)
	}
	es := b.Events()
	if len(es) != 3 {
		t.Fatalf("%d events kept, want 3", len(es))
	}
	// The last three of ACQ1 REL1 ... ACQ5 REL5: REL4 ACQ5 REL5.
	if es[0].PermitID != ids[3] || es[1].PermitID != ids[4] || es[2].Code != bulkhead.EventPermitReleased {
		t.Fatalf("kept %+v", es)
	}
	if newBH(t, 1).Events() != nil {
		t.Fatal("events kept without an event log")
	}
}

// A listener may panic or call the bulkhead; neither changes its semantics.
func TestListenerPanicsAndReentry(t *testing.T) {
	var b *bulkhead.Bulkhead
	calls := 0
	b = newBH(t, 1, bulkhead.WithListener(bulkhead.ListenerFunc(func(e bulkhead.Event) {
		calls++
		_ = b.QueueDepth() // takes the mutex: would deadlock if called under it
		panic("listener bug")
	})))
	p := acquire(t, b, 1)
	_, err := b.TryAcquire(bg, 1)
	wantErr(t, err, bulkhead.ErrAtCapacity)
	release(t, b, p)
	if calls != 4 || b.InFlight() != 0 { // ACQUIRED, AT_CAPACITY, REJECTED, RELEASED
		t.Fatalf("%d listener calls, in flight %d", calls, b.InFlight())
	}
}
