package otel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/bulkhead"
	gotel "github.com/groupexec/groupexec/metrics/otel"
)

// The bulkhead's instruments equal its accessors and what its callers saw.
func TestBulkheadEqualsItsNumbers(t *testing.T) {
	mp, reader := newProvider()
	m, err := gotel.NewBulkhead(mp, "payments", "")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Unregister()
	b, err := bulkhead.New(2, bulkhead.WithListener(m), bulkhead.WithQueue(1, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	m.Observe(b)
	ctx := context.Background()
	p1, _ := b.TryAcquire(ctx, 1)
	p2, _ := b.TryAcquire(ctx, 1)
	refused := 0
	for range 3 {
		if _, err := b.TryAcquire(ctx, 1); errors.Is(err, bulkhead.ErrAtCapacity) {
			refused++
		}
	}
	b.Release(p1)
	b.Release(p2)
	p3, _ := b.TryAcquire(ctx, 1)
	attrs := map[string]string{"bulkhead": "payments"}
	r := collect(t, reader)
	for name, want := range map[string]int{"bulkhead_in_flight_permits": b.InFlight(), "bulkhead_limit_permits": b.Limit(),
		"bulkhead_queue_depth": b.QueueDepth(), "bulkhead_acquired_total": 3} {
		if got := r.value(name, attrs); got != int64(want) {
			t.Errorf("%s = %d, want %d", name, got, want)
		}
	}
	if got := r.value("bulkhead_rejected_total", map[string]string{"bulkhead": "payments", "code": "RB_ERR_AT_CAPACITY"}); got != int64(refused) || refused != 3 {
		t.Errorf("rejected %d, callers saw %d", got, refused)
	}
	b.Release(p3)
}

// The breakers' gauges equal State and Counts; transitions are counted.
func TestBreakersEqualTheirNumbers(t *testing.T) {
	mp, reader := newProvider()
	tr, err := gotel.NewBreakerTransitions(mp, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Unregister()
	cb, _ := breaker.New(breaker.Settings{Name: "db", OnStateChange: tr.OnStateChange,
		ReadyToTrip: func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 2 }})
	ok, _ := breaker.New(breaker.Settings{Name: "cache"})
	reg, err := gotel.ObserveBreakers(mp, "", cb, ok)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Unregister()
	fail := func() (int, error) { return 0, errors.New("down") }
	breaker.Execute(ok, func() (int, error) { return 1, nil })
	breaker.Execute(ok, fail)
	breaker.Execute(cb, fail)
	r := collect(t, reader)
	for _, b := range []*breaker.CircuitBreaker{cb, ok} {
		attrs := map[string]string{"breaker": b.Name()}
		n := b.Counts()
		for name, want := range map[string]uint64{"breaker_state": uint64(b.State()), "breaker_requests": n.Requests,
			"breaker_successes": n.TotalSuccesses, "breaker_failures": n.TotalFailures, "breaker_consecutive_failures": n.ConsecutiveFailures} {
			if got := r.value(name, attrs); uint64(got) != want {
				t.Errorf("%s{%s} = %d, want %d", name, b.Name(), got, want)
			}
		}
	}
	breaker.Execute(cb, fail) // opens
	r = collect(t, reader)
	if got := r.value("breaker_state", map[string]string{"breaker": "db"}); got != int64(breaker.StateOpen) {
		t.Errorf("state %d, want open", got)
	}
	if got := r.value("breaker_transitions_total", map[string]string{"breaker": "db", "from": "closed", "to": "open"}); got != 1 {
		t.Errorf("transitions %d, want 1", got)
	}
	if _, err := gotel.ObserveBreakers(mp, "", nil); err == nil {
		t.Error("a nil breaker was accepted")
	}
}

// queuedSignal passes events on to a Bulkhead and tells when a request
// begins to wait.
type queuedSignal struct {
	*gotel.Bulkhead
	queued chan struct{}
}

func (q queuedSignal) OnEvent(e bulkhead.Event) {
	q.Bulkhead.OnEvent(e)
	if e.Code == bulkhead.EventRequestQueued {
		q.queued <- struct{}{}
	}
}

// deadlineContext is a context whose deadline passes when the test says:
// its Err is context.DeadlineExceeded once expire is called.
type deadlineContext struct {
	context.Context
	done chan struct{}
}

func newDeadlineContext() deadlineContext {
	return deadlineContext{context.Background(), make(chan struct{})}
}

func (c deadlineContext) expire() { close(c.done) }

func (c deadlineContext) Done() <-chan struct{} { return c.done }

func (c deadlineContext) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// A waiter whose context ends is counted under a stable code, never under
// its error's text; so is a rejection whose detail no code names.
func TestBulkheadRejectedCodesAreStable(t *testing.T) {
	mp, reader := newProvider()
	m, err := gotel.NewBulkhead(mp, "payments", "")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Unregister()
	l := queuedSignal{m, make(chan struct{}, 1)}
	b, err := bulkhead.New(1, bulkhead.WithListener(l), bulkhead.WithQueue(1, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	p, err := b.TryAcquire(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release(p)

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := b.Acquire(ctx, 1); errc <- err }()
	<-l.queued
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire: %v, want context.Canceled", err)
	}
	// The deadline passes once the request waits: a real one could pass
	// before Acquire is called on a slow machine, and the request would
	// fail without ever queueing.
	dctx := newDeadlineContext()
	go func() { _, err := b.Acquire(dctx, 1); errc <- err }()
	<-l.queued
	dctx.expire()
	if err := <-errc; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire: %v, want context.DeadlineExceeded", err)
	}
	m.OnEvent(bulkhead.Event{Code: bulkhead.EventRequestRejected, Detail: "a custom context's error"})
	m.OnEvent(bulkhead.Event{Code: bulkhead.EventRequestRejected, Detail: bulkhead.ErrGoexit.Error()})

	r := collect(t, reader)
	want := map[string]int64{"cancelled": 1, "deadline_exceeded": 1, "other": 1, bulkhead.ErrGoexit.Code(): 1}
	rejected, _ := r.find("bulkhead_rejected_total")
	for _, pt := range rejected.Data.(metricdata.Sum[int64]).DataPoints {
		code, _ := pt.Attributes.Value("code")
		if want[code.AsString()] != pt.Value {
			t.Errorf("code %q counted %d", code.AsString(), pt.Value)
		}
		delete(want, code.AsString())
	}
	for code := range want {
		t.Errorf("no rejection counted under %q", code)
	}
}

// bulkhead_acquired_total counts acquires, whatever their weight, and its
// unit says so, as the queued and rejected counters' do.
func TestBulkheadAcquiredCountsRequests(t *testing.T) {
	mp, reader := newProvider()
	m, err := gotel.NewBulkhead(mp, "payments", "")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Unregister()
	b, err := bulkhead.New(5, bulkhead.WithListener(m))
	if err != nil {
		t.Fatal(err)
	}
	p, err := b.TryAcquire(context.Background(), 3)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release(p)
	r := collect(t, reader)
	if got := r.value("bulkhead_acquired_total", map[string]string{"bulkhead": "payments"}); got != 1 {
		t.Errorf("acquired %d after one acquire of 3 permits, want 1", got)
	}
	for _, name := range []string{"bulkhead_acquired_total", "bulkhead_queued_total", "bulkhead_rejected_total"} {
		if m, ok := r.find(name); ok && m.Unit != "{request}" {
			t.Errorf("%s: unit %q, want {request}", name, m.Unit)
		}
	}
}

// queueGate passes events on to a Bulkhead and holds a request that begins
// to wait in its listener call, before it waits, until proceed.
type queueGate struct {
	*gotel.Bulkhead
	queued, proceed chan struct{}
}

func (g queueGate) OnEvent(e bulkhead.Event) {
	g.Bulkhead.OnEvent(e)
	if e.Code == bulkhead.EventRequestQueued {
		g.queued <- struct{}{}
		<-g.proceed
	}
}

// A waiter granted a permit as its context ended gives the permit back and
// fails; its request is counted once, under acquired: the permit was
// issued, and a counter cannot take back the acquire it counted then.
func TestBulkheadGivenBackPermitCountedOnce(t *testing.T) {
	mp, reader := newProvider()
	m, err := gotel.NewBulkhead(mp, "payments", "")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Unregister()
	g := queueGate{m, make(chan struct{}), make(chan struct{})}
	b, err := bulkhead.New(1, bulkhead.WithListener(g), bulkhead.WithQueue(1, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	held, err := b.TryAcquire(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := b.Acquire(ctx, 1); errc <- err }()
	<-g.queued
	if err := b.Release(held); err != nil { // issues the permit to the waiter
		t.Fatal(err)
	}
	cancel() // before the waiter looks: it finds both its permit and its context ended
	close(g.proceed)
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire: %v, want context.Canceled", err)
	}
	if n := b.InFlight(); n != 0 {
		t.Fatalf("%d in flight after the permit was given back", n)
	}

	r := collect(t, reader)
	acquired := r.value("bulkhead_acquired_total", map[string]string{"bulkhead": "payments"})
	var rejected int64
	if m, ok := r.find("bulkhead_rejected_total"); ok {
		for _, pt := range m.Data.(metricdata.Sum[int64]).DataPoints {
			rejected += pt.Value
		}
	}
	if acquired != 2 || rejected != 0 {
		t.Errorf("two requests counted as %d acquired and %d rejected, want 2 and 0", acquired, rejected)
	}
}

// ObserveBreakers observes the breakers it was given: a caller that reuses
// its slice afterwards changes nothing.
func TestObserveBreakersKeepsItsBreakers(t *testing.T) {
	mp, reader := newProvider()
	db, _ := breaker.New(breaker.Settings{Name: "db"})
	cbs := []*breaker.CircuitBreaker{db}
	reg, err := gotel.ObserveBreakers(mp, "", cbs...)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Unregister()
	other, _ := breaker.New(breaker.Settings{Name: "other"})
	cbs[0] = other
	breaker.Execute(db, func() (int, error) { return 1, nil })
	r := collect(t, reader)
	if got, ok := r.int("breaker_requests", map[string]string{"breaker": "db"}); !ok || got != 1 {
		t.Errorf("breaker_requests{db} = %d (%v), want 1", got, ok)
	}
	if _, ok := r.int("breaker_requests", map[string]string{"breaker": "other"}); ok {
		t.Error("a breaker put in the caller's slice afterwards is observed")
	}
}
