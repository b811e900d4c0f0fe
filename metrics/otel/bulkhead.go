package otel

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/groupexec/groupexec/bulkhead"
)

// Bulkhead exports one bulkhead's numbers, under the attribute
// bulkhead=name:
//
//	bulkhead_in_flight_permits{bulkhead}        permits out
//	bulkhead_limit_permits{bulkhead}            the limit in force
//	bulkhead_queue_depth{bulkhead}              requests waiting
//	bulkhead_acquired_total{bulkhead}           permits issued
//	bulkhead_queued_total{bulkhead}             acquires that had to wait
//	bulkhead_rejected_total{bulkhead,code}      acquires refused, by error code (RB_ERR_AT_CAPACITY, ...)
//
// It is a bulkhead.Listener, for the counters, and reads the bulkhead's
// accessors for the gauges when the reader collects. It is safe for
// concurrent use.
type Bulkhead struct {
	name     string
	attrs    metric.MeasurementOption
	b        atomic.Pointer[bulkhead.Bulkhead]
	reg      metric.Registration
	acquired metric.Int64Counter
	queued   metric.Int64Counter
	rejected metric.Int64Counter
	byCode   sync.Map // code -> metric.MeasurementOption

	inFlight, limit, depth metric.Int64ObservableGauge
}

var _ bulkhead.Listener = (*Bulkhead)(nil)

// NewBulkhead returns the instruments of the bulkhead called name; namespace,
// when set, prefixes their names. Pass it to bulkhead.WithListener, then call
// Observe with the bulkhead.
func NewBulkhead(mp metric.MeterProvider, name, namespace string) (*Bulkhead, error) {
	if mp == nil {
		return nil, errors.New("otel: NewBulkhead: nil MeterProvider")
	}
	m := mp.Meter(ScopeName)
	in := instruments{m: m, ns: namespace}
	b := &Bulkhead{name: name, attrs: metric.WithAttributeSet(attribute.NewSet(attribute.String("bulkhead", name)))}
	b.acquired = in.counterUnit("bulkhead_acquired_total", "Permits issued.", "{permit}")
	b.queued = in.counterUnit("bulkhead_queued_total", "Acquires that had to wait in the queue.", "{request}")
	b.rejected = in.counterUnit("bulkhead_rejected_total", "Acquires refused, by error code.", "{request}")
	b.inFlight = in.gauge("bulkhead_in_flight_permits", "Permits out.", "{permit}")
	b.limit = in.gauge("bulkhead_limit_permits", "The limit in force.", "{permit}")
	b.depth = in.gauge("bulkhead_queue_depth", "Requests waiting for a permit.", "{request}")
	if in.err != nil {
		return nil, in.err
	}
	reg, err := m.RegisterCallback(b.observe, b.inFlight, b.limit, b.depth)
	if err != nil {
		return nil, err
	}
	b.reg = reg
	return b, nil
}

// Observe sets the bulkhead the gauges read.
func (b *Bulkhead) Observe(bh *bulkhead.Bulkhead) { b.b.Store(bh) }

// Unregister stops the gauges' callback.
func (b *Bulkhead) Unregister() error { return b.reg.Unregister() }

// OnEvent counts permits issued, waits and refusals.
func (b *Bulkhead) OnEvent(e bulkhead.Event) {
	ctx := context.Background()
	switch e.Code {
	case bulkhead.EventPermitAcquired:
		b.acquired.Add(ctx, 1, b.attrs)
	case bulkhead.EventRequestQueued:
		b.queued.Add(ctx, 1, b.attrs)
	case bulkhead.EventRequestRejected:
		b.rejected.Add(ctx, 1, b.codeAttrs(e.Detail))
	}
}

func (b *Bulkhead) codeAttrs(code string) metric.MeasurementOption {
	if o, ok := b.byCode.Load(code); ok {
		return o.(metric.MeasurementOption)
	}
	o, _ := b.byCode.LoadOrStore(code, metric.WithAttributeSet(attribute.NewSet(
		attribute.String("bulkhead", b.name), attribute.String("code", code))))
	return o.(metric.MeasurementOption)
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
