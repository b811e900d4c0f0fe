package prom

import (
	"fmt"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/metrics/internal/metricnames"
)

// Breakers exports the state and current counts of circuit breakers, under
// the label breaker=Name(), read at scrape time, with the names and
// meanings of metrics/otel's ObserveBreakers:
//
//	breaker_state{breaker}                  0 closed, 1 open, 2 half-open
//	breaker_requests{breaker}               requests let through in the current period
//	breaker_successes{breaker}              successes recorded in the current period
//	breaker_failures{breaker}               failures recorded in the current period
//	breaker_consecutive_failures{breaker}   failures since the last success
//
// (a period is breaker.Counts's: since the last change of state or
// clearing). The executor's group breakers are not among them: Collector's
// group_breaker_state gives their states, and BreakerTransitions counts
// their changes of state. It is a prometheus.Collector, safe for concurrent
// use.
type Breakers struct {
	cbs                             []*breaker.CircuitBreaker
	state, reqs, succ, fail, consec *prometheus.Desc
}

var _ prometheus.Collector = (*Breakers)(nil)

// NewBreakers returns a Collector of cbs; namespace, when set, prefixes the
// names. Register it once with every breaker it is to export: a second
// Breakers under the same namespace is refused by the registry, as any
// collector of metrics already registered. It panics if a breaker is nil,
// or if two have the same name or one a name that is not valid UTF-8, as
// every scrape would otherwise fail.
func NewBreakers(namespace string, cbs ...*breaker.CircuitBreaker) *Breakers {
	seen := make(map[string]bool, len(cbs))
	for i, cb := range cbs {
		if cb == nil {
			panic(fmt.Errorf("prom: NewBreakers: breaker %d is nil", i))
		}
		if !utf8.ValidString(cb.Name()) {
			panic(fmt.Errorf("prom: NewBreakers: breaker %d's name %q: must be valid UTF-8", i, cb.Name()))
		}
		if seen[cb.Name()] {
			panic(fmt.Errorf("prom: NewBreakers: two breakers named %q: their series would be one", cb.Name()))
		}
		seen[cb.Name()] = true
	}
	desc := func(m metricnames.Metric) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(namespace, "", m.Name), m.Help, []string{"breaker"}, nil)
	}
	return &Breakers{cbs: append([]*breaker.CircuitBreaker(nil), cbs...),
		state: desc(metricnames.BreakerState), reqs: desc(metricnames.BreakerRequests),
		succ: desc(metricnames.BreakerSuccesses), fail: desc(metricnames.BreakerFailures),
		consec: desc(metricnames.BreakerConsecutiveFailures)}
}

// Describe sends the descriptions of every metric.
func (b *Breakers) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{b.state, b.reqs, b.succ, b.fail, b.consec} {
		ch <- d
	}
}

// Collect sends each breaker's state and counts.
func (b *Breakers) Collect(ch chan<- prometheus.Metric) {
	for _, cb := range b.cbs {
		st, n := cb.State(), cb.Counts()
		gauge := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, cb.Name())
		}
		gauge(b.state, float64(st))
		gauge(b.reqs, float64(n.Requests))
		gauge(b.succ, float64(n.TotalSuccesses))
		gauge(b.fail, float64(n.TotalFailures))
		gauge(b.consec, float64(n.ConsecutiveFailures))
	}
}

// BreakerTransitions counts every change of state of the breakers whose
// breaker.Settings.OnStateChange (or executor.WithGroupBreaker's) is its
// OnStateChange, with the name and meaning of metrics/otel's
// BreakerTransitions:
//
//	breaker_transitions_total{breaker,from,to}
//
// Group keys name group breakers, so the breaker label has as many values
// as there are groups that ever changed state: use it where groups are a
// bounded set. A name that is not valid UTF-8, which no label value may
// hold, or longer than MaxGroupLen bytes is counted under OtherGroup. The
// from and to labels are closed, open or half-open, and other for a State
// that is none of them (which a breaker never reports). It is a
// prometheus.Collector, safe for concurrent use.
type BreakerTransitions struct {
	c    *prometheus.CounterVec
	next func(name string, from, to breaker.State)
}

var _ prometheus.Collector = (*BreakerTransitions)(nil)

// NewBreakerTransitions returns a BreakerTransitions whose OnStateChange
// calls next, when not nil, after counting; namespace, when set, prefixes
// the name. Register it, and pass its OnStateChange to the breakers.
func NewBreakerTransitions(namespace string, next func(name string, from, to breaker.State)) *BreakerTransitions {
	m := metricnames.BreakerTransitions
	return &BreakerTransitions{next: next, c: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace,
		Name: m.Name, Help: m.Help}, []string{"breaker", "from", "to"})}
}

// OnStateChange counts the change, then calls next.
func (t *BreakerTransitions) OnStateChange(name string, from, to breaker.State) {
	t.c.WithLabelValues(metricnames.BreakerLabel(name), metricnames.StateLabel(from), metricnames.StateLabel(to)).Inc()
	if t.next != nil {
		t.next(name, from, to)
	}
}

// Describe sends the description of the counter.
func (t *BreakerTransitions) Describe(ch chan<- *prometheus.Desc) { t.c.Describe(ch) }

// Collect sends the counts.
func (t *BreakerTransitions) Collect(ch chan<- prometheus.Metric) { t.c.Collect(ch) }
