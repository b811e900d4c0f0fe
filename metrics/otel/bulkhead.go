package otel

import (
	"context"
	"errors"
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
// accessors for the gauges when the reader collects. It is safe for
// concurrent use.
type Bulkhead struct {
	attrs    metric.MeasurementOption
	b        atomic.Pointer[bulkhead.Bulkhead]
	reg      metric.Registration
	acquired metric.Int64Counter
	queued   metric.Int64Counter
	rejected metric.Int64Counter
	byCode   map[string]metric.MeasurementOption // {bulkhead, code}, by code; read-only

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
	b := &Bulkhead{attrs: metric.WithAttributeSet(attribute.NewSet(attribute.String("bulkhead", name))),
		byCode: make(map[string]metric.MeasurementOption)}
	for _, code := range rejectionCodes {
		b.byCode[code] = metric.WithAttributeSet(attribute.NewSet(
			attribute.String("bulkhead", name), attribute.String("code", code)))
	}
	b.acquired = in.counterUnit("bulkhead_acquired_total", "Acquires granted, whatever their weight.", "{request}")
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
		if e.PermitID != 0 {
			// A waiter gave back the permit it was issued as it gave up:
			// its request is already counted under acquired.
			return
		}
		b.rejected.Add(ctx, 1, b.byCode[rejectionCode(e.Detail)])
	}
}

// The codes a refusal is counted under.
const (
	codeCancelled = "cancelled"
	codeDeadline  = "deadline_exceeded"
	codeOther     = "other"
)

// refusals are the bulkhead's errors an acquire can fail with.
var refusals = []*bulkhead.Error{bulkhead.ErrAtCapacity, bulkhead.ErrQueueSaturated, bulkhead.ErrQueueTimeout,
	bulkhead.ErrDraining, bulkhead.ErrCapabilityRequired, bulkhead.ErrGoexit}

// rejectionCodes are every code a refusal can be counted under.
var rejectionCodes = func() []string {
	codes := []string{codeCancelled, codeDeadline, codeOther}
	for _, e := range refusals {
		codes = append(codes, e.Code())
	}
	return codes
}()

// rejectionCode maps the Detail of a rejection event to its code. Detail is
// the error's code, but the error's text for a request whose context ended:
// the text of a context's error is not a stable code, and a custom
// context's is unbounded.
func rejectionCode(detail string) string {
	switch detail {
	case context.Canceled.Error():
		return codeCancelled
	case context.DeadlineExceeded.Error():
		return codeDeadline
	}
	for _, e := range refusals {
		if detail == e.Code() || detail == e.Error() {
			return e.Code()
		}
	}
	return codeOther
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
