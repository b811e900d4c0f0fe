package prom_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/groupexec/groupexec/bulkhead"
	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/metrics/prom"
)

// valueOf gathers reg and returns the value of the counter or gauge name
// whose labels are exactly labels, and whether there is one.
func valueOf(t *testing.T, reg prometheus.Gatherer, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.Metric {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; !ok || v != l.GetValue() {
					continue metrics
				}
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				return m.GetCounter().GetValue(), true
			case dto.MetricType_GAUGE:
				return m.GetGauge().GetValue(), true
			}
			t.Fatalf("%s is a %v", name, mf.GetType())
		}
	}
	return 0, false
}

// mustValue is valueOf of a series that must exist.
func mustValue(t *testing.T, reg prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	v, ok := valueOf(t, reg, name, labels)
	if !ok {
		t.Fatalf("no %s%v", name, labels)
	}
	return v
}

// queueSignal passes events on to a Bulkhead and tells when a request
// begins to wait: its timer is armed by then.
type queueSignal struct {
	*prom.Bulkhead
	queued chan struct{}
}

func (q queueSignal) OnEvent(e bulkhead.Event) {
	q.Bulkhead.OnEvent(e)
	if e.Code == bulkhead.EventRequestQueued {
		q.queued <- struct{}{}
	}
}

// outcomes counts what callers saw, by the code bulkhead_rejected_total
// gives it, "" for a permit.
type outcomes struct {
	mu sync.Mutex
	n  map[string]int
}

func (o *outcomes) add(err error) {
	code := ""
	var be interface{ Code() string }
	switch {
	case err == nil:
	case errors.Is(err, context.Canceled):
		code = "cancelled"
	case errors.Is(err, context.DeadlineExceeded):
		code = "deadline_exceeded"
	case errors.As(err, &be):
		code = be.Code()
	default:
		code = "other"
	}
	o.mu.Lock()
	o.n[code]++
	o.mu.Unlock()
}

// After a concurrent run with refusals (at capacity, queue saturated,
// draining), cancels, queue timeouts on an injected clock and permits
// issued to waiters, every counter equals what the callers saw and what
// the bulkhead's own event log holds, and the gauges equal its accessors.
func TestBulkheadEqualsItsNumbers(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	m := prom.NewBulkhead("payments", "")
	l := queueSignal{m, make(chan struct{}, 64)}
	const limit, depth = 2, 2
	b, err := bulkhead.New(limit, bulkhead.WithListener(l), bulkhead.WithQueue(depth, time.Minute),
		bulkhead.WithClock(clk), bulkhead.WithEventLog(1024))
	if err != nil {
		t.Fatal(err)
	}
	m.Observe(b)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	seen := outcomes{n: make(map[string]int)}
	ctx := context.Background()
	held := make([]bulkhead.Permit, limit)
	for i := range held {
		if held[i], err = b.TryAcquire(ctx, 1); err != nil {
			t.Fatal(err)
		}
		seen.add(nil)
	}

	// round starts n acquires at once, half TryAcquire, half Acquire with
	// ctx, waits until each has either returned or begun to wait, runs
	// end, which ends the waits, and waits for the waiters.
	round := func(ctx context.Context, n int, end func()) {
		t.Helper()
		type result struct {
			p   bulkhead.Permit
			err error
		}
		results := make(chan result, n)
		start := make(chan struct{})
		for i := range n {
			go func() {
				<-start
				var r result
				if i%2 == 0 {
					r.p, r.err = b.TryAcquire(ctx, 1)
				} else {
					r.p, r.err = b.Acquire(ctx, 1)
				}
				results <- r
			}()
		}
		close(start)
		var got []result
		queued := 0
		for len(got)+queued < n {
			select {
			case r := <-results:
				got = append(got, r)
			case <-l.queued:
				queued++
			}
		}
		if queued != depth {
			t.Fatalf("%d requests waited, want the queue's %d", queued, depth)
		}
		if v := mustValue(t, reg, "bulkhead_queue_depth", map[string]string{"bulkhead": "payments"}); v != float64(b.QueueDepth()) || v != depth {
			t.Errorf("bulkhead_queue_depth = %v, QueueDepth %d, want %d", v, b.QueueDepth(), depth)
		}
		end()
		for len(got) < n {
			got = append(got, <-results)
		}
		for _, r := range got {
			seen.add(r.err)
			if r.err == nil {
				if err := b.Release(r.p); err != nil {
					t.Fatal(err)
				}
			}
		}
	}

	cctx, cancel := context.WithCancel(ctx)
	round(cctx, 8, cancel)                             // the waiters' contexts end
	round(ctx, 8, func() { clk.Advance(time.Minute) }) // the waiters time out
	round(ctx, 8, func() {                             // the waiters are issued the held permits
		for _, p := range held {
			if err := b.Release(p); err != nil {
				t.Fatal(err)
			}
		}
	})
	ended, cancelEnded := context.WithCancel(ctx)
	cancelEnded()
	_, err = b.Acquire(ended, 1) // ended before it asked
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire with an ended context: %v", err)
	}
	seen.add(err)
	// Draining: the limit lowered below the permits out.
	p1, _ := b.TryAcquire(ctx, 1)
	p2, _ := b.TryAcquire(ctx, 1)
	seen.add(nil)
	seen.add(nil)
	if err := b.SetLimit(1); err != nil {
		t.Fatal(err)
	}
	_, err = b.TryAcquire(ctx, 1)
	if !errors.Is(err, bulkhead.ErrDraining) {
		t.Fatalf("TryAcquire while draining: %v", err)
	}
	seen.add(err)

	// The bulkhead's own numbers: its event log, and its accessors.
	logged := make(map[string]int)
	for _, e := range b.Events() {
		switch {
		case e.Code == bulkhead.EventPermitAcquired:
			logged[""]++
		case e.Code == bulkhead.EventRequestQueued:
			logged["queued"]++
		case e.Code == bulkhead.EventRequestRejected && e.PermitID == 0:
			logged["rejected"]++
		}
	}
	bh := map[string]string{"bulkhead": "payments"}
	if got := mustValue(t, reg, "bulkhead_acquired_total", bh); got != float64(seen.n[""]) || got != float64(logged[""]) {
		t.Errorf("bulkhead_acquired_total = %v; callers got %d permits, the log holds %d", got, seen.n[""], logged[""])
	}
	if got := mustValue(t, reg, "bulkhead_queued_total", bh); got != float64(logged["queued"]) || got != 3*depth {
		t.Errorf("bulkhead_queued_total = %v; the log holds %d, want %d", got, logged["queued"], 3*depth)
	}
	var rejected float64
	for code, n := range seen.n {
		if code == "" {
			continue
		}
		got := mustValue(t, reg, "bulkhead_rejected_total", map[string]string{"bulkhead": "payments", "code": code})
		if got != float64(n) {
			t.Errorf("bulkhead_rejected_total{code=%q} = %v, callers saw %d", code, got, n)
		}
		rejected += got
	}
	if rejected != float64(logged["rejected"]) {
		t.Errorf("%v rejections counted, the log holds %d", rejected, logged["rejected"])
	}
	for _, code := range []string{"cancelled", "RB_ERR_QUEUE_TIMEOUT", "RB_ERR_AT_CAPACITY", "RB_ERR_QUEUE_SATURATED", "RB_ERR_DRAINING"} {
		if seen.n[code] == 0 {
			t.Errorf("the run made no refusal %s", code)
		}
	}
	if got := mustValue(t, reg, "bulkhead_rejected_total", map[string]string{"bulkhead": "payments", "code": "RB_ERR_GOEXIT"}); got != 0 {
		t.Errorf("RB_ERR_GOEXIT counted %v, want a series at 0", got)
	}
	for name, want := range map[string]int{"bulkhead_in_flight_permits": b.InFlight(), "bulkhead_limit_permits": b.Limit(),
		"bulkhead_queue_depth": b.QueueDepth()} {
		if got := mustValue(t, reg, name, bh); got != float64(want) {
			t.Errorf("%s = %v, want %d", name, got, want)
		}
	}
	if b.InFlight() != 2 || b.Limit() != 1 {
		t.Errorf("in flight %d, limit %d: the run did not end as planned", b.InFlight(), b.Limit())
	}
	b.Release(p1)
	b.Release(p2)
}

// Before Observe only the counters are exported; two bulkheads register in
// one registry under their names, and the same name twice is refused.
func TestBulkheadRegistersBesideAnother(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	a, b := prom.NewBulkhead("a", "app"), prom.NewBulkhead("b", "app")
	if err := reg.Register(a); err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(b); err != nil {
		t.Fatalf("a second bulkhead: %v", err)
	}
	if err := reg.Register(prom.NewBulkhead("a", "app")); err == nil {
		t.Error("a second Bulkhead of the same name and namespace was registered")
	}
	if _, ok := valueOf(t, reg, "app_bulkhead_in_flight_permits", map[string]string{"bulkhead": "a"}); ok {
		t.Error("a gauge was exported before Observe")
	}
	if _, ok := valueOf(t, reg, "app_bulkhead_acquired_total", map[string]string{"bulkhead": "b"}); !ok {
		t.Error("no counter before the first event")
	}
}

func TestNewBulkheadRefusesInvalidUTF8(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("NewBulkhead accepted a name that is not UTF-8")
		}
	}()
	prom.NewBulkhead("\xff", "")
}
