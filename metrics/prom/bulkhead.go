package prom

import (
	"fmt"
	"sync/atomic"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groupexec/groupexec/bulkhead"
	"github.com/groupexec/groupexec/metrics/internal/metricnames"
)

// Bulkhead exports one bulkhead's numbers, under the label bulkhead=name,
// with the names and meanings of metrics/otel's Bulkhead:
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
// "other" for anything else. The codes are a fixed set, each exported from
// the start, at 0.
//
// Each request is counted once, under acquired or rejected. A waiter issued
// a permit just as its context ended (or its goroutine exited) gives the
// permit back and fails, but it is counted under acquired only: the permit
// was issued, and counted, before the request gave up.
//
// It is a bulkhead.Listener, for the counters, and a prometheus.Collector
// that reads the bulkhead's accessors for the gauges at scrape time. It is
// one bulkhead's, the listener of that bulkhead alone: its counters would
// sum the events of every bulkhead it listens to, under one name, and its
// gauges read one; Observe refuses a second. The Bulkheads of several
// bulkheads, each with its own name, register in one registry. It is safe
// for concurrent use.
type Bulkhead struct {
	b        atomic.Pointer[bulkhead.Bulkhead]
	acquired prometheus.Counter
	queued   prometheus.Counter
	rejected *prometheus.CounterVec
	byCode   map[string]prometheus.Counter // rejected's children, by code; read-only

	inFlight, limit, depth *prometheus.Desc
}

var _ bulkhead.Listener = (*Bulkhead)(nil)
var _ prometheus.Collector = (*Bulkhead)(nil)

// NewBulkhead returns the metrics of the bulkhead called name; namespace,
// when set, prefixes their names. Pass it to bulkhead.WithListener, call
// Observe with the bulkhead, then register it. It panics if name is not
// valid UTF-8, which no label value may hold: every scrape would fail.
func NewBulkhead(name, namespace string) *Bulkhead {
	if !utf8.ValidString(name) {
		panic(fmt.Errorf("prom: NewBulkhead: name %q: must be valid UTF-8", name))
	}
	labels := prometheus.Labels{"bulkhead": name}
	counter := func(m metricnames.Metric) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: m.Name, Help: m.Help, ConstLabels: labels})
	}
	desc := func(m metricnames.Metric) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(namespace, "", m.Name), m.Help, nil, labels)
	}
	b := &Bulkhead{
		acquired: counter(metricnames.BulkheadAcquired),
		queued:   counter(metricnames.BulkheadQueued),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: metricnames.BulkheadRejected.Name,
			Help: metricnames.BulkheadRejected.Help, ConstLabels: labels}, []string{"code"}),
		byCode:   make(map[string]prometheus.Counter),
		inFlight: desc(metricnames.BulkheadInFlight),
		limit:    desc(metricnames.BulkheadLimit),
		depth:    desc(metricnames.BulkheadQueueDepth),
	}
	// Made here, so that a refusal looks up no label values and every code
	// has a series before its first refusal.
	for _, code := range metricnames.RejectionCodes() {
		b.byCode[code] = b.rejected.WithLabelValues(code)
	}
	return b
}

// Observe sets the bulkhead the gauges read: the one whose listener b is.
// Until it is called, only the counters are exported. A Bulkhead is one
// bulkhead's: Observe panics if bh is nil, or if b observes another
// bulkhead already, whose levels its counters would be mixed with;
// observing the same one again does nothing.
func (b *Bulkhead) Observe(bh *bulkhead.Bulkhead) {
	if bh == nil {
		panic("prom: Bulkhead.Observe(nil): a Bulkhead needs the bulkhead whose listener it is")
	}
	if !b.b.CompareAndSwap(nil, bh) && b.b.Load() != bh {
		panic("prom: Bulkhead.Observe: the Bulkhead observes another bulkhead already; " +
			"a Bulkhead is one bulkhead's: make one per bulkhead, each with its own name")
	}
}

// OnEvent counts permits issued, waits and refusals.
func (b *Bulkhead) OnEvent(e bulkhead.Event) {
	switch e.Code {
	case bulkhead.EventPermitAcquired:
		b.acquired.Inc()
	case bulkhead.EventRequestQueued:
		b.queued.Inc()
	case bulkhead.EventRequestRejected:
		if e.PermitID != 0 {
			// A waiter gave back the permit it was issued as it gave up:
			// its request is already counted under acquired.
			return
		}
		b.byCode[metricnames.RejectionCode(e.Detail)].Inc()
	}
}

// Describe sends the descriptions of every metric.
func (b *Bulkhead) Describe(ch chan<- *prometheus.Desc) {
	b.acquired.Describe(ch)
	b.queued.Describe(ch)
	b.rejected.Describe(ch)
	ch <- b.inFlight
	ch <- b.limit
	ch <- b.depth
}

// Collect sends the counters, and the bulkhead's levels once Observe has
// been called.
func (b *Bulkhead) Collect(ch chan<- prometheus.Metric) {
	b.acquired.Collect(ch)
	b.queued.Collect(ch)
	b.rejected.Collect(ch)
	bh := b.b.Load()
	if bh == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(b.inFlight, prometheus.GaugeValue, float64(bh.InFlight()))
	ch <- prometheus.MustNewConstMetric(b.limit, prometheus.GaugeValue, float64(bh.Limit()))
	ch <- prometheus.MustNewConstMetric(b.depth, prometheus.GaugeValue, float64(bh.QueueDepth()))
}
