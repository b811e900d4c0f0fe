package otel_test

import (
	"context"
	"errors"
	"testing"

	gotel "github.com/groupexec/groupexec/metrics/otel"
)

// The SDK takes instrument names case-insensitively: App_x and app_x are
// one instrument, exported under the casing seen first. So namespaces that
// differ only in case are one namespace: a second Collector, Bulkhead of
// the same name or BreakerTransitions in it is refused, as in the same
// spelling, where it would count into the first one's instruments.
func TestNamespacesDifferingInCaseAreOne(t *testing.T) {
	mp, reader := newProvider()
	m := mp.Meter("premise")
	for _, n := range []string{"Premise_x", "premise_x"} {
		c, err := m.Int64Counter(n)
		if err != nil {
			t.Fatal(err)
		}
		c.Add(context.Background(), 1)
	}
	if got := collect(t, reader).value("Premise_x", nil); got != 2 {
		t.Fatalf("the SDK keeps Premise_x and premise_x apart (%d): the premise no longer holds", got)
	}

	c, err := gotel.New(mp, gotel.Options{Namespace: "App"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Unregister()
	if c2, err := gotel.New(mp, gotel.Options{Namespace: "app"}); !errors.Is(err, gotel.ErrNamespaceInUse) {
		if err == nil {
			c2.Unregister()
		}
		t.Errorf("a Collector of namespace app beside one of App: %v; want ErrNamespaceInUse", err)
	}

	b, err := gotel.NewBulkhead(mp, "db", "Pool")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Unregister()
	if b2, err := gotel.NewBulkhead(mp, "db", "pool"); err == nil {
		b2.Unregister()
		t.Error("a Bulkhead db of namespace pool beside one of Pool was accepted")
	}

	tr, err := gotel.NewBreakerTransitions(mp, "Cb", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Unregister()
	if tr2, err := gotel.NewBreakerTransitions(mp, "cb", nil); !errors.Is(err, gotel.ErrNamespaceInUse) {
		if err == nil {
			tr2.Unregister()
		}
		t.Errorf("a BreakerTransitions of namespace cb beside one of Cb: %v; want ErrNamespaceInUse", err)
	}
}
