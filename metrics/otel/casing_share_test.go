package otel_test

import (
	"testing"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/bulkhead"
	gotel "github.com/groupexec/groupexec/metrics/otel"
)

// Namespaces that differ only in case are one namespace in what they let
// share too: a Bulkhead of another name, or a registration of
// ObserveBreakers of another breaker, in Pool beside one in pool is
// accepted, as in one spelling, its series told apart by their attribute
// in the instruments the two share.
func TestNamespacesDifferingInCaseShareAsOne(t *testing.T) {
	mp, reader := newProvider()
	db, err := gotel.NewBulkhead(mp, "db", "Pool")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Unregister()
	cache, err := gotel.NewBulkhead(mp, "cache", "pool")
	if err != nil {
		t.Fatalf("a Bulkhead cache of namespace pool beside db of Pool: %v; want it accepted, as in one spelling", err)
	}
	defer cache.Unregister()
	for name, b := range map[string]*gotel.Bulkhead{"db": db, "cache": cache} {
		bh, err := bulkhead.New(len(name))
		if err != nil {
			t.Fatal(err)
		}
		b.Observe(bh)
	}

	first, err := gotel.ObserveBreakers(mp, "Cb", newBreaker(t, "a"))
	if err != nil {
		t.Fatal(err)
	}
	defer first.Unregister()
	second, err := gotel.ObserveBreakers(mp, "cb", newBreaker(t, "b"))
	if err != nil {
		t.Fatalf("ObserveBreakers of breaker b in namespace cb beside a in Cb: %v; want it accepted, as in one spelling", err)
	}
	defer second.Unregister()

	r := collect(t, reader)
	for name, want := range map[string]int64{"db": 2, "cache": 5} {
		if got := r.value("Pool_bulkhead_limit_permits", map[string]string{"bulkhead": name}); got != want {
			t.Errorf("Pool_bulkhead_limit_permits{bulkhead=%s} = %d, want %d", name, got, want)
		}
	}
	for _, name := range []string{"a", "b"} {
		if got := r.value("Cb_breaker_state", map[string]string{"breaker": name}); got != int64(breaker.StateClosed) {
			t.Errorf("Cb_breaker_state{breaker=%s} = %d, want closed", name, got)
		}
	}
}

func newBreaker(t *testing.T, name string) *breaker.CircuitBreaker {
	t.Helper()
	cb, err := breaker.New(breaker.Settings{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return cb
}
