package otel_test

import (
	"errors"
	"runtime"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/bulkhead"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/internal/adaptertest"
	gotel "github.com/groupexec/groupexec/metrics/otel"
)

// A second live Collector on one MeterProvider with the same Namespace is
// refused, naming the namespace: the two would report into the same
// instruments, their counters summed and their gauges the last callback's.
// Unregister frees the pair, and only the Collector that holds it can.
func TestNewRefusesALiveNamespace(t *testing.T) {
	mp, reader := newProvider()
	first, err := gotel.New(mp, gotel.Options{Namespace: "api"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = gotel.New(mp, gotel.Options{Namespace: "api"})
	if !errors.Is(err, gotel.ErrNamespaceInUse) || !strings.Contains(err.Error(), `Options.Namespace "api"`) {
		t.Fatalf("a second Collector of namespace api: %v; want ErrNamespaceInUse naming it", err)
	}
	other, err := gotel.New(mp, gotel.Options{Namespace: "jobs"})
	if err != nil {
		t.Fatalf("another namespace: %v", err)
	}
	defer other.Unregister()
	mp2, _ := newProvider()
	elsewhere, err := gotel.New(mp2, gotel.Options{Namespace: "api"})
	if err != nil {
		t.Fatalf("another provider: %v", err)
	}
	defer elsewhere.Unregister()

	first.OnCompleted(executor.Event{Group: "a", Status: executor.Success})
	if err := first.Unregister(); err != nil {
		t.Fatal(err)
	}
	second, err := gotel.New(mp, gotel.Options{Namespace: "api"})
	if err != nil {
		t.Fatalf("after Unregister: %v", err)
	}
	defer second.Unregister()
	if err := first.Unregister(); err != nil { // again: second keeps the pair
		t.Fatal(err)
	}
	if _, err := gotel.New(mp, gotel.Options{Namespace: "api"}); !errors.Is(err, gotel.ErrNamespaceInUse) {
		t.Errorf("a second Unregister of the first freed the pair of the second: %v", err)
	}
	// The counters are the provider's: the second goes on from the first's.
	second.OnCompleted(executor.Event{Group: "a", Status: executor.Success})
	if got := collect(t, reader).value("api_group_completed_total", map[string]string{"group": "a", "status": "success"}); got != 2 {
		t.Errorf("completed %d, want the two Collectors' 2", got)
	}
}

// A no-op provider, a value that records nothing, is not claimed.
func TestNewOnNoopProviderIsNotClaimed(t *testing.T) {
	mp := noop.NewMeterProvider()
	for range 2 {
		c, err := gotel.New(mp, gotel.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Unregister()
	}
}

// A second live Bulkhead on one MeterProvider with the same namespace and
// name is refused, naming both: the two bulkheads' counters would sum and
// their gauges show the last callback's. Another name, namespace or
// provider is free, and Unregister frees the name.
func TestNewBulkheadRefusesALiveName(t *testing.T) {
	mp, reader := newProvider()
	first, err := gotel.NewBulkhead(mp, "payments", "app")
	if err != nil {
		t.Fatal(err)
	}
	_, err = gotel.NewBulkhead(mp, "payments", "app")
	if !errors.Is(err, gotel.ErrNameInUse) || !strings.Contains(err.Error(), `name "payments"`) || !strings.Contains(err.Error(), `namespace "app"`) {
		t.Fatalf("a second Bulkhead payments in app: %v; want ErrNameInUse naming both", err)
	}
	mp2, _ := newProvider()
	for _, o := range []struct {
		mp       *sdkmetric.MeterProvider
		name, ns string
	}{{mp, "search", "app"}, {mp, "payments", "jobs"}, {mp2, "payments", "app"}} {
		b, err := gotel.NewBulkhead(o.mp, o.name, o.ns)
		if err != nil {
			t.Fatalf("%s in %s: %v", o.name, o.ns, err)
		}
		defer b.Unregister()
	}
	first.OnEvent(bulkhead.Event{Code: bulkhead.EventPermitAcquired})
	if err := first.Unregister(); err != nil {
		t.Fatal(err)
	}
	second, err := gotel.NewBulkhead(mp, "payments", "app")
	if err != nil {
		t.Fatalf("after Unregister: %v", err)
	}
	defer second.Unregister()
	if err := first.Unregister(); err != nil { // again: second keeps the name
		t.Fatal(err)
	}
	if _, err := gotel.NewBulkhead(mp, "payments", "app"); !errors.Is(err, gotel.ErrNameInUse) {
		t.Errorf("a second Unregister of the first freed the name of the second: %v", err)
	}
	second.OnEvent(bulkhead.Event{Code: bulkhead.EventPermitAcquired})
	if got := collect(t, reader).value("app_bulkhead_acquired_total", map[string]string{"bulkhead": "payments"}); got != 2 {
		t.Errorf("acquired %d, want the two Bulkheads' 2", got)
	}
}

// ObserveBreakers refuses a breaker name that a live registration on the
// same MeterProvider and namespace observes, or that two of its breakers
// share: their series would be one. A refused call takes no name, and
// Unregister frees the names.
func TestObserveBreakersRefusesALiveName(t *testing.T) {
	mp, _ := newProvider()
	db, _ := breaker.New(breaker.Settings{Name: "db"})
	db2, _ := breaker.New(breaker.Settings{Name: "db"})
	cache, _ := breaker.New(breaker.Settings{Name: "cache"})
	queue, _ := breaker.New(breaker.Settings{Name: "queue"})
	if _, err := gotel.ObserveBreakers(mp, "app", db, db2); !errors.Is(err, gotel.ErrNameInUse) || !strings.Contains(err.Error(), `"db"`) {
		t.Fatalf("two breakers named db: %v; want ErrNameInUse naming it", err)
	}
	first, err := gotel.ObserveBreakers(mp, "app", db, cache)
	if err != nil {
		t.Fatal(err)
	}
	_, err = gotel.ObserveBreakers(mp, "app", queue, db2)
	if !errors.Is(err, gotel.ErrNameInUse) || !strings.Contains(err.Error(), `breaker "db"`) || !strings.Contains(err.Error(), `namespace "app"`) {
		t.Fatalf("db observed twice in app: %v; want ErrNameInUse naming both", err)
	}
	// The refused call took no name: queue is free.
	q, err := gotel.ObserveBreakers(mp, "app", queue)
	if err != nil {
		t.Fatalf("queue after a refused call: %v", err)
	}
	defer q.Unregister()
	other, err := gotel.ObserveBreakers(mp, "jobs", db2)
	if err != nil {
		t.Fatalf("another namespace: %v", err)
	}
	defer other.Unregister()
	if err := first.Unregister(); err != nil {
		t.Fatal(err)
	}
	second, err := gotel.ObserveBreakers(mp, "app", db2, cache)
	if err != nil {
		t.Fatalf("after Unregister: %v", err)
	}
	defer second.Unregister()
	if err := first.Unregister(); err != nil { // again: second keeps the names
		t.Fatal(err)
	}
	if _, err := gotel.ObserveBreakers(mp, "app", cache); !errors.Is(err, gotel.ErrNameInUse) {
		t.Errorf("a second Unregister of the first freed the names of the second: %v", err)
	}
}

// A no-op provider is not claimed by NewBulkhead or ObserveBreakers either.
func TestPoliciesOnNoopProviderAreNotClaimed(t *testing.T) {
	mp := noop.NewMeterProvider()
	db, _ := breaker.New(breaker.Settings{Name: "db"})
	for range 2 {
		b, err := gotel.NewBulkhead(mp, "payments", "")
		if err != nil {
			t.Fatal(err)
		}
		defer b.Unregister()
		r, err := gotel.ObserveBreakers(mp, "", db)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Unregister()
	}
}

// A MeterProvider the program drops without unregistering what it
// observed (a provider per test, or one replaced as its configuration
// changes) is collected with everything it holds: the claims that refuse
// a second live Collector, Bulkhead, breaker name or BreakerTransitions
// must not keep it, nor
// the Collector whose registration keeps its pipelines, for the life of
// the process.
func TestClaimsDoNotKeepADroppedProvider(t *testing.T) {
	db, _ := breaker.New(breaker.Settings{Name: "db"})
	for _, tc := range []struct {
		name     string
		register func(metric.MeterProvider) error
	}{
		{"Collector", func(mp metric.MeterProvider) error {
			_, err := gotel.New(mp, gotel.Options{Namespace: "api"})
			return err
		}},
		{"Bulkhead", func(mp metric.MeterProvider) error { _, err := gotel.NewBulkhead(mp, "payments", "app"); return err }},
		{"ObserveBreakers", func(mp metric.MeterProvider) error { _, err := gotel.ObserveBreakers(mp, "app", db); return err }},
		{"BreakerTransitions", func(mp metric.MeterProvider) error { _, err := gotel.NewBreakerTransitions(mp, "app", nil); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			collected := make(chan struct{})
			func() {
				mp, _ := newProvider()
				runtime.AddCleanup(mp, func(ch chan struct{}) { close(ch) }, collected)
				if err := tc.register(mp); err != nil {
					t.Fatal(err)
				}
			}()
			adaptertest.Eventually(t, "the dropped provider collected", func() bool {
				runtime.GC()
				select {
				case <-collected:
					return true
				default:
					return false
				}
			})
		})
	}
}

// A registration the caller drops without unregistering it still reports,
// its callback held by the provider: its claim stays, and a second one of
// the same name is refused after any number of collections.
func TestClaimsOfADroppedRegistrationStay(t *testing.T) {
	db, _ := breaker.New(breaker.Settings{Name: "db"})
	mp, _ := newProvider()
	for _, tc := range []struct {
		name     string
		register func() error
		want     error
	}{
		{"Collector", func() error { _, err := gotel.New(mp, gotel.Options{Namespace: "api"}); return err }, gotel.ErrNamespaceInUse},
		{"Bulkhead", func() error { _, err := gotel.NewBulkhead(mp, "payments", "app"); return err }, gotel.ErrNameInUse},
		{"ObserveBreakers", func() error { _, err := gotel.ObserveBreakers(mp, "app", db); return err }, gotel.ErrNameInUse},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.register(); err != nil {
				t.Fatal(err)
			}
			for range 3 {
				runtime.GC()
			}
			if err := tc.register(); !errors.Is(err, tc.want) {
				t.Errorf("a second registration after the first was dropped: %v, want %v", err, tc.want)
			}
		})
	}
	runtime.KeepAlive(mp)
}

// A second live BreakerTransitions on one MeterProvider with the same
// namespace is refused, naming it, as a second Collector is: two executors'
// group breakers of the same key would count into one series. Unregister
// stops the counting and frees the namespace.
func TestNewBreakerTransitionsRefusesALiveNamespace(t *testing.T) {
	mp, reader := newProvider()
	first, err := gotel.NewBreakerTransitions(mp, "api", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gotel.NewBreakerTransitions(mp, "api", nil); !errors.Is(err, gotel.ErrNamespaceInUse) || !strings.Contains(err.Error(), `namespace "api"`) {
		t.Fatalf("a second BreakerTransitions of namespace api: %v; want ErrNamespaceInUse naming it", err)
	}
	other, err := gotel.NewBreakerTransitions(mp, "jobs", nil)
	if err != nil {
		t.Fatalf("another namespace: %v", err)
	}
	defer other.Unregister()
	mp2, _ := newProvider()
	elsewhere, err := gotel.NewBreakerTransitions(mp2, "api", nil)
	if err != nil {
		t.Fatalf("another provider: %v", err)
	}
	defer elsewhere.Unregister()

	first.OnStateChange("db", breaker.StateClosed, breaker.StateOpen)
	if err := first.Unregister(); err != nil {
		t.Fatal(err)
	}
	var next int
	first.OnStateChange("db", breaker.StateClosed, breaker.StateOpen) // not counted: unregistered
	second, err := gotel.NewBreakerTransitions(mp, "api", func(string, breaker.State, breaker.State) { next++ })
	if err != nil {
		t.Fatalf("after Unregister: %v", err)
	}
	defer second.Unregister()
	if err := first.Unregister(); err != nil { // again: second keeps the namespace
		t.Fatal(err)
	}
	if _, err := gotel.NewBreakerTransitions(mp, "api", nil); !errors.Is(err, gotel.ErrNamespaceInUse) {
		t.Errorf("a second Unregister of the first freed the namespace of the second: %v", err)
	}
	second.OnStateChange("db", breaker.StateClosed, breaker.StateOpen)
	attrs := map[string]string{"breaker": "db", "from": "closed", "to": "open"}
	if got := collect(t, reader).value("api_breaker_transitions_total", attrs); got != 2 {
		t.Errorf("%d transitions, want 2: one before the first's Unregister, one of the second", got)
	}
	if next != 1 {
		t.Errorf("next called %d times, want 1", next)
	}
}

// Exporters of different kinds or namespaces that would make instruments of
// one name on a MeterProvider are refused, naming the name and the other
// exporter: the SDK exports both instruments, of different descriptions and
// attributes, under the one name. Unregister frees the names; the exporters
// of one kind and namespace share theirs.
func TestExportersRefuseOneAnothersInstrumentNames(t *testing.T) {
	mp, _ := newProvider()
	c, err := gotel.New(mp, gotel.Options{Namespace: "bulkhead"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = gotel.NewBulkhead(mp, "payments", "")
	if !errors.Is(err, gotel.ErrNamespaceInUse) || !strings.Contains(err.Error(), "bulkhead_queue_depth") ||
		!strings.Contains(err.Error(), `Collector of namespace "bulkhead"`) {
		t.Fatalf("a Bulkhead of namespace \"\" beside a Collector of namespace bulkhead: %v; want ErrNamespaceInUse naming bulkhead_queue_depth and the Collector", err)
	}
	if err := c.Unregister(); err != nil {
		t.Fatal(err)
	}
	b, err := gotel.NewBulkhead(mp, "payments", "")
	if err != nil {
		t.Fatalf("after the Collector's Unregister: %v", err)
	}
	b2, err := gotel.NewBulkhead(mp, "search", "") // the Bulkheads of a namespace share the names
	if err != nil {
		t.Fatalf("a second bulkhead of namespace \"\": %v", err)
	}
	_, err = gotel.New(mp, gotel.Options{Namespace: "bulkhead"})
	if !errors.Is(err, gotel.ErrNamespaceInUse) || !strings.Contains(err.Error(), `Bulkhead of namespace ""`) {
		t.Fatalf("a Collector of namespace bulkhead beside Bulkheads of namespace \"\": %v; want ErrNamespaceInUse naming them", err)
	}
	b.Unregister()
	if _, err = gotel.New(mp, gotel.Options{Namespace: "bulkhead"}); !errors.Is(err, gotel.ErrNamespaceInUse) {
		t.Errorf("one Bulkhead's Unregister freed the names another holds: %v", err)
	}
	b2.Unregister()

	g, err := gotel.New(mp, gotel.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Unregister()
	cb, _ := breaker.New(breaker.Settings{Name: "db"})
	_, err = gotel.ObserveBreakers(mp, "group", cb)
	if !errors.Is(err, gotel.ErrNamespaceInUse) || !strings.Contains(err.Error(), "group_breaker_state") ||
		!strings.Contains(err.Error(), `Collector of namespace ""`) {
		t.Fatalf("ObserveBreakers of namespace group beside a Collector of namespace \"\": %v; want ErrNamespaceInUse naming group_breaker_state and the Collector", err)
	}
	r, err := gotel.ObserveBreakers(mp, "", cb) // the refused call took nothing
	if err != nil {
		t.Fatal(err)
	}
	r.Unregister()
	r, err = gotel.ObserveBreakers(mp, "group", cb)
	if err == nil {
		r.Unregister()
		t.Fatal("the refused call freed the Collector's names")
	}
}
