package otel

import (
	"context"
	"fmt"
	"sync/atomic"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/groupexec/groupexec/bulkhead"
	"github.com/groupexec/groupexec/metrics/internal/metricnames"
)

// Bulkhead exports one bulkhead's numbers, under the attribute
// bulkhead=name:
//
//	bulkhead_in_flight_permits{bulkhead}        permits out
//	bulkhead_limit_permits{bulkhead}            the limit in force
//	bulkhead_queue_depth{bulkhead}              requests waiting
//	bulkhead_acquired_total{bulkhead}           acquires granted, whatever their weight
//	bulkhead_queued_total{bulkhead}             acquires that had to wait
//	bulkhead_rejected_total{bulkhead,code}      acquires refused, by code
//
// The code of a refusal is the bulkhead's error code (RB_ERR_AT_CAPACITY,
// RB_ERR_QUEUE_SATURATED, RB_ERR_QUEUE_TIMEOUT, RB_ERR_DRAINING,
// RB_ERR_NO_REMOTECAP, RB_ERR_GOEXIT); "cancelled" or "deadline_exceeded"
// for a request whose context ended, while it waited or before it asked;
// "other" for anything else, so that the codes are a fixed set.
//
// Each request is counted once, under acquired or rejected. A waiter issued
// a permit just as its context ended (or its goroutine exited) gives the
// permit back and fails, but it is counted under acquired only: the permit
// was issued, and counted, before the request gave up, and a counter cannot
// take that back (its rejection event carries the permit's ID).
//
// It is a bulkhead.Listener, for the counters, and reads the bulkhead's
// accessors for the observable instruments when the reader collects. It is
// one bulkhead's, the listener of that bulkhead alone: its counters would
// sum the events of every bulkhead it listens to, under one name, and its
// levels read one; Observe refuses a second. It is safe for concurrent
// use.
type Bulkhead struct {
	attrs    metric.MeasurementOption
	b        atomic.Pointer[bulkhead.Bulkhead]
	reg      metric.Registration
	claim    *claimKey   // the name b holds; nil for a provider that is not a pointer
	names    []claimKey  // its instruments' names, shared with the Bulkheads of its namespace only
	stopped  atomic.Bool // set by Unregister: the name is free for another Bulkhead, whose series are these
	acquired metric.Int64Counter
	queued   metric.Int64Counter
	rejected metric.Int64Counter
	byCode   map[string]metric.MeasurementOption // {bulkhead, code}, by code; read-only

	inFlight, depth metric.Int64ObservableUpDownCounter // levels, summed over bulkheads
	limit           metric.Int64ObservableGauge
}

var _ bulkhead.Listener = (*Bulkhead)(nil)

// NewBulkhead returns the instruments of the bulkhead called name; namespace,
// when set, prefixes their names. Pass it to bulkhead.WithListener, then call
// Observe with the bulkhead. It fails if name is not valid UTF-8, which an
// exporter cannot send (every export would fail), as metrics/prom's
// NewBulkhead refuses it; if the provider refuses an instrument; and, with
// an error matching ErrNameInUse, if a Bulkhead on mp with the same
// namespace and name has not been unregistered: the two bulkheads would
// report into the same series. A provider that is not a pointer is not
// checked; one that is is not kept for that check: a provider the program
// drops is collected with its Bulkheads.
func NewBulkhead(mp metric.MeterProvider, name, namespace string) (*Bulkhead, error) {
	if nilProvider(mp) {
		return nil, invalid("otel: NewBulkhead: nil MeterProvider")
	}
	if !utf8.ValidString(name) {
		return nil, invalid("otel: NewBulkhead: name %q: must be valid UTF-8", name)
	}
	m := mp.Meter(ScopeName)
	in := instruments{m: m, ns: namespace, opt: "NewBulkhead: namespace"}
	b := &Bulkhead{attrs: metric.WithAttributeSet(attribute.NewSet(attribute.String("bulkhead", name))),
		byCode: make(map[string]metric.MeasurementOption)}
	for _, code := range metricnames.RejectionCodes() {
		b.byCode[code] = metric.WithAttributeSet(attribute.NewSet(
			attribute.String("bulkhead", name), attribute.String("code", code)))
	}
	b.acquired = in.counterUnit(metricnames.BulkheadAcquired.Name, metricnames.BulkheadAcquired.Help, "{request}")
	b.queued = in.counterUnit(metricnames.BulkheadQueued.Name, metricnames.BulkheadQueued.Help, "{request}")
	b.rejected = in.counterUnit(metricnames.BulkheadRejected.Name, metricnames.BulkheadRejected.Help, "{request}")
	b.inFlight = in.level(metricnames.BulkheadInFlight.Name, metricnames.BulkheadInFlight.Help, "{permit}")
	b.limit = in.gauge(metricnames.BulkheadLimit.Name, metricnames.BulkheadLimit.Help, "{permit}")
	b.depth = in.level(metricnames.BulkheadQueueDepth.Name, metricnames.BulkheadQueueDepth.Help, "{request}")
	if in.err != nil {
		return nil, in.err
	}
	if k, ok := keyOf(mp, namespace, "bulkhead", name); ok {
		if _, ok := take(b, k); !ok {
			return nil, fmt.Errorf("otel: NewBulkhead: name %q: a live Bulkhead on this MeterProvider has it in namespace %q, and two bulkheads' numbers would mix (Unregister it first, or give each bulkhead its own name): %w", name, namespace, ErrNameInUse)
		}
		b.claim = &k
	}
	names, err := shareNames(mp, b, fmt.Sprintf("NewBulkhead: name %q, namespace %q", name, namespace), &in,
		fmt.Sprintf("a Bulkhead of namespace %q", namespace))
	if err != nil {
		b.unclaim()
		return nil, err
	}
	b.names = names
	reg, err := m.RegisterCallback(b.observe, b.inFlight, b.limit, b.depth)
	if err != nil {
		b.unclaim()
		return nil, err
	}
	b.reg = reg
	return b, nil
}

// Observe sets the bulkhead the observable instruments read: the one whose
// listener b is. A Bulkhead is one bulkhead's: Observe panics if bh is
// nil, or if b observes another bulkhead already, whose levels its
// counters would be mixed with; observing the same one again does nothing.
func (b *Bulkhead) Observe(bh *bulkhead.Bulkhead) {
	if bh == nil {
		panic("otel: Bulkhead.Observe(nil): a Bulkhead needs the bulkhead whose listener it is")
	}
	if !b.b.CompareAndSwap(nil, bh) && b.b.Load() != bh {
		panic("otel: Bulkhead.Observe: the Bulkhead observes another bulkhead already; " +
			"a Bulkhead is one bulkhead's: make one per bulkhead, each with its own name")
	}
}

// Unregister stops the observable instruments' callback, for a Bulkhead
// no longer used, and frees its name for another Bulkhead. From then on it
// counts nothing: its bulkhead's events would otherwise be counted into the
// series a later Bulkhead of the name reports for its own. The counters are
// the provider's: a later Bulkhead with the same name goes on from their
// totals.
func (b *Bulkhead) Unregister() error {
	if err := b.reg.Unregister(); err != nil {
		return err // the callback may still run: the name stays taken
	}
	b.stopped.Store(true) // before the name is free for another
	b.unclaim()
	return nil
}

// unclaim frees b's name and its instruments' names, if b still holds them.
func (b *Bulkhead) unclaim() {
	if b.claim != nil {
		free(b, *b.claim)
	}
	free(b, b.names...)
}

// OnEvent counts permits issued, waits and refusals.
func (b *Bulkhead) OnEvent(e bulkhead.Event) {
	if b.stopped.Load() {
		return
	}
	ctx := context.Background()
	switch e.Code {
	case bulkhead.EventPermitAcquired:
		b.acquired.Add(ctx, 1, b.attrs)
	case bulkhead.EventRequestQueued:
		b.queued.Add(ctx, 1, b.attrs)
	case bulkhead.EventRequestRejected:
		if e.PermitID != 0 {
			// A waiter gave back the permit it was issued as it gave up:
			// its request is already counted under acquired.
			return
		}
		b.rejected.Add(ctx, 1, b.byCode[metricnames.RejectionCode(e.Detail)])
	}
}

func (b *Bulkhead) observe(_ context.Context, o metric.Observer) error {
	bh := b.b.Load()
	if bh == nil {
		return nil
	}
	o.ObserveInt64(b.inFlight, int64(bh.InFlight()), b.attrs)
	o.ObserveInt64(b.limit, int64(bh.Limit()), b.attrs)
	o.ObserveInt64(b.depth, int64(bh.QueueDepth()), b.attrs)
	return nil
}
