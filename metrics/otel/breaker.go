package otel

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/metrics/internal/metricnames"
)

// ObserveBreakers exports the state and current counts of each breaker,
// under the attribute breaker=Name(), read when the reader collects:
//
//	breaker_state{breaker}                  0 closed, 1 open, 2 half-open
//	breaker_requests{breaker}               requests let through in the current period
//	breaker_successes{breaker}              successes recorded in the current period
//	breaker_failures{breaker}               failures recorded in the current period
//	breaker_consecutive_failures{breaker}   failures since the last success
//
// (a period is breaker.Counts's: since the last change of state or clearing).
// namespace, when set, prefixes the names. Unregister the returned
// registration to stop, and to free the breakers' names. The executor's
// group breakers are exported by Collector's group_breaker_state instead.
//
// It fails if a breaker is nil, or its name is not valid UTF-8, which an
// exporter cannot send (every export would fail), as metrics/prom's
// NewBreakers refuses them; if the provider refuses an instrument; and,
// with an error matching ErrNameInUse, if two of cbs have the same name, or
// a registration on mp with the same namespace that has not been
// unregistered observes a breaker of that name: their series would be one,
// showing whichever observation came last. A provider that is not a
// pointer is not checked; one that is is not kept for that check: a
// provider the program drops is collected with its registrations.
func ObserveBreakers(mp metric.MeterProvider, namespace string, cbs ...*breaker.CircuitBreaker) (metric.Registration, error) {
	if nilProvider(mp) {
		return nil, invalid("otel: ObserveBreakers: nil MeterProvider")
	}
	m := mp.Meter(ScopeName)
	in := instruments{m: m, ns: namespace, opt: "ObserveBreakers: namespace"}
	state := in.gauge(metricnames.BreakerState.Name, metricnames.BreakerState.Help, "")
	reqs := in.level(metricnames.BreakerRequests.Name, metricnames.BreakerRequests.Help, "{request}")
	succ := in.level(metricnames.BreakerSuccesses.Name, metricnames.BreakerSuccesses.Help, "{request}")
	fail := in.level(metricnames.BreakerFailures.Name, metricnames.BreakerFailures.Help, "{request}")
	consec := in.level(metricnames.BreakerConsecutiveFailures.Name, metricnames.BreakerConsecutiveFailures.Help, "{request}")
	if in.err != nil {
		return nil, in.err
	}
	cbs = slices.Clone(cbs) // the callback reads them later: not the caller's slice
	attrs := make([]metric.MeasurementOption, len(cbs))
	seen := make(map[string]bool, len(cbs))
	r := &breakersRegistration{}
	for i, cb := range cbs {
		if cb == nil {
			return nil, invalid("otel: ObserveBreakers: breaker %d is nil", i)
		}
		if !utf8.ValidString(cb.Name()) {
			return nil, invalid("otel: ObserveBreakers: breaker %d's name %q: must be valid UTF-8", i, cb.Name())
		}
		if seen[cb.Name()] {
			return nil, fmt.Errorf("otel: ObserveBreakers: two breakers named %q: their series would be one: %w", cb.Name(), ErrNameInUse)
		}
		seen[cb.Name()] = true
		attrs[i] = metric.WithAttributeSet(attribute.NewSet(attribute.String("breaker", cb.Name())))
		if k, ok := keyOf(mp, namespace, "breaker", cb.Name()); ok {
			r.claims = append(r.claims, k)
		}
	}
	if k, ok := take(r, r.claims...); !ok {
		return nil, fmt.Errorf("otel: ObserveBreakers: breaker %q: a live registration on this MeterProvider observes a breaker of that name in namespace %q, and the two would mix (Unregister it first, or observe each breaker once): %w", k.Name, namespace, ErrNameInUse)
	}
	names, err := shareNames(mp, r, fmt.Sprintf("ObserveBreakers: namespace %q", namespace), &in,
		fmt.Sprintf("an ObserveBreakers registration of namespace %q", namespace))
	if err != nil {
		free(r, r.claims...)
		return nil, err
	}
	r.claims = append(r.claims, names...)
	r.cbs, r.attrs = cbs, attrs
	r.state, r.reqs, r.succ, r.fail, r.consec = state, reqs, succ, fail, consec
	// The callback is r's: the provider, which holds it, keeps r and its
	// claims while it is registered, whether or not the caller keeps the
	// registration.
	reg, err := m.RegisterCallback(r.observe, state, reqs, succ, fail, consec)
	if err != nil {
		free(r, r.claims...)
		return nil, err
	}
	r.Registration = reg
	return r, nil
}

// breakersRegistration is ObserveBreakers' registration, which frees the
// breakers' names once the callback is unregistered.
type breakersRegistration struct {
	metric.Registration
	claims []claimKey

	cbs                      []*breaker.CircuitBreaker
	attrs                    []metric.MeasurementOption
	state                    metric.Int64ObservableGauge
	reqs, succ, fail, consec metric.Int64ObservableUpDownCounter // counts of the current period, summed over breakers
}

func (r *breakersRegistration) observe(_ context.Context, o metric.Observer) error {
	for i, cb := range r.cbs {
		st, n := cb.State(), cb.Counts()
		o.ObserveInt64(r.state, int64(st), r.attrs[i])
		o.ObserveInt64(r.reqs, int64(n.Requests), r.attrs[i])
		o.ObserveInt64(r.succ, int64(n.TotalSuccesses), r.attrs[i])
		o.ObserveInt64(r.fail, int64(n.TotalFailures), r.attrs[i])
		o.ObserveInt64(r.consec, int64(n.ConsecutiveFailures), r.attrs[i])
	}
	return nil
}

// Unregister stops the callback and frees the breakers' names.
func (r *breakersRegistration) Unregister() error {
	if err := r.Registration.Unregister(); err != nil {
		return err // the callback may still run: the names stay taken
	}
	free(r, r.claims...)
	return nil
}

// BreakerTransitions counts every change of state of the breakers whose
// Settings.OnStateChange (or executor.WithGroupBreaker's) is its
// OnStateChange:
//
//	breaker_transitions_total{breaker,from,to}
//
// then calls next, when not nil. Group keys name group breakers, so the
// breaker attribute has as many values as there are groups that ever changed
// state: use it where groups are a bounded set. A name that is not valid
// UTF-8, which an exporter cannot send, or longer than MaxGroupLen bytes is
// counted under OtherGroup, as metrics/prom's BreakerTransitions counts it.
// The from and to attributes are closed, open or half-open, and other for
// a State that is none of them (which a breaker never reports). It is safe
// for concurrent use. Create it with NewBreakerTransitions.
type BreakerTransitions struct {
	next    func(name string, from, to breaker.State)
	c       metric.Int64Counter
	sets    sync.Map // transition -> metric.MeasurementOption
	stopped atomic.Bool
	claims  []claimKey // the namespace and the counter's name t holds; none for a provider that is not a pointer
}

// transition is a change of state of the breaker labelled name, by the
// labels of its states.
type transition struct{ name, from, to string }

// NewBreakerTransitions returns the counter of transitions; namespace, when
// set, prefixes its name. It fails if the provider refuses the instrument,
// and, with an error matching ErrNamespaceInUse, if a BreakerTransitions on
// mp with the same namespace has not been unregistered: the two would count
// into one counter, the same breaker name of two executors' group breakers
// summed, as two Collectors' counters would be. Use one BreakerTransitions
// for every breaker of a namespace. A provider that is not a pointer is not
// checked; one that is is not kept for that check: a provider the program
// drops is collected with its BreakerTransitions.
func NewBreakerTransitions(mp metric.MeterProvider, namespace string, next func(name string, from, to breaker.State)) (*BreakerTransitions, error) {
	if nilProvider(mp) {
		return nil, invalid("otel: NewBreakerTransitions: nil MeterProvider")
	}
	in := instruments{m: mp.Meter(ScopeName), ns: namespace, opt: "NewBreakerTransitions: namespace"}
	c := in.counterUnit(metricnames.BreakerTransitions.Name, metricnames.BreakerTransitions.Help, "{transition}")
	if in.err != nil {
		return nil, in.err
	}
	t := &BreakerTransitions{next: next, c: c}
	if k, ok := keyOf(mp, namespace, "transitions", ""); ok {
		if _, ok := take(t, k); !ok {
			return nil, fmt.Errorf("otel: NewBreakerTransitions: namespace %q: a live BreakerTransitions on this MeterProvider has it, and the two would count into one counter (Unregister it first, or give each its own namespace): %w", namespace, ErrNamespaceInUse)
		}
		t.claims = []claimKey{k}
	}
	names, err := shareNames(mp, t, fmt.Sprintf("NewBreakerTransitions: namespace %q", namespace), &in,
		fmt.Sprintf("a BreakerTransitions of namespace %q", namespace))
	if err != nil {
		free(t, t.claims...)
		return nil, err
	}
	t.claims = append(t.claims, names...)
	return t, nil
}

// OnStateChange counts the change of state of the breaker called name, then
// calls next; once t is unregistered, it only calls next.
func (t *BreakerTransitions) OnStateChange(name string, from, to breaker.State) {
	if !t.stopped.Load() {
		// Keyed by the label, not the name: a client-chosen key of any
		// length would otherwise be kept here, for good, as well.
		k := transition{metricnames.BreakerLabel(name), metricnames.StateLabel(from), metricnames.StateLabel(to)}
		o, ok := t.sets.Load(k)
		if !ok {
			o, _ = t.sets.LoadOrStore(k, metric.WithAttributeSet(attribute.NewSet(attribute.String("breaker", k.name),
				attribute.String("from", k.from), attribute.String("to", k.to))))
		}
		t.c.Add(context.Background(), 1, o.(metric.MeasurementOption))
	}
	if t.next != nil {
		t.next(name, from, to)
	}
}

// Unregister stops the counting, for a BreakerTransitions no longer used,
// and frees its namespace for another. The counter is the provider's: a
// later BreakerTransitions in the namespace goes on from its totals.
func (t *BreakerTransitions) Unregister() error {
	t.stopped.Store(true)
	free(t, t.claims...)
	return nil
}
