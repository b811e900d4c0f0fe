package otel_test

import (
	"fmt"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/groupexec/groupexec/breaker"
	gotel "github.com/groupexec/groupexec/metrics/otel"
)

// badNamespaces make instrument names that OpenTelemetry refuses: one must
// start with an ASCII letter, hold only letters, digits and _.-/, and be at
// most 255 characters long.
var badNamespaces = []string{"1app", "my app", "ä", "app:x", strings.Repeat("a", 240)}

// A namespace that makes an invalid instrument name is refused by every
// constructor, with an error naming the option and its value, whatever the
// provider: the SDK's own error names neither, and a no-op provider, as a
// program uses until its exporter is set up, takes any name, so the error
// would come only once the real provider is passed.
func TestInvalidNamespacesAreRefused(t *testing.T) {
	constructors := []struct {
		option string
		make   func(mp metric.MeterProvider, ns string) (unregister func() error, err error)
	}{
		{"Options.Namespace", func(mp metric.MeterProvider, ns string) (func() error, error) {
			c, err := gotel.New(mp, gotel.Options{Namespace: ns})
			if err != nil {
				return nil, err
			}
			return c.Unregister, nil
		}},
		{"namespace", func(mp metric.MeterProvider, ns string) (func() error, error) {
			b, err := gotel.NewBulkhead(mp, "b", ns)
			if err != nil {
				return nil, err
			}
			return b.Unregister, nil
		}},
		{"namespace", func(mp metric.MeterProvider, ns string) (func() error, error) {
			r, err := gotel.ObserveBreakers(mp, ns)
			if err != nil {
				return nil, err
			}
			return r.Unregister, nil
		}},
		{"namespace", func(mp metric.MeterProvider, ns string) (func() error, error) {
			tr, err := gotel.NewBreakerTransitions(mp, ns, nil)
			if err != nil {
				return nil, err
			}
			return tr.Unregister, nil
		}},
	}
	sdk, _ := newProvider()
	for i, c := range constructors {
		for _, mp := range []metric.MeterProvider{sdk, noop.NewMeterProvider()} {
			for _, ns := range badNamespaces {
				unregister, err := c.make(mp, ns)
				if err == nil {
					unregister()
					t.Errorf("constructor %d, %T: namespace %q accepted", i, mp, ns)
					continue
				}
				if msg := err.Error(); !strings.Contains(msg, c.option+" "+fmt.Sprintf("%q", ns)) || !strings.HasPrefix(msg, "otel: ") {
					t.Errorf("constructor %d, %T: namespace %q: %v; want an error naming %s and the value", i, mp, ns, err, c.option)
				}
			}
		}
	}
	// Names OpenTelemetry takes are taken, dots and slashes among them.
	for _, ns := range []string{"app", "my.app", "my-app/v2", "A_1", strings.Repeat("a", 200)} {
		c, err := gotel.New(sdk, gotel.Options{Namespace: ns})
		if err != nil {
			t.Errorf("namespace %q: %v", ns, err)
			continue
		}
		c.Unregister()
	}
}

// A nil breaker is refused naming its place among the breakers, as
// metrics/prom's NewBreakers names it, so that a caller passing a list
// knows which one was never set.
func TestObserveBreakersNamesTheNilBreaker(t *testing.T) {
	mp, _ := newProvider()
	cb, _ := breaker.New(breaker.Settings{Name: "db"})
	r, err := gotel.ObserveBreakers(mp, "", cb, nil)
	if err == nil {
		r.Unregister()
		t.Fatal("a nil breaker was accepted")
	}
	if !strings.Contains(err.Error(), "breaker 1 is nil") {
		t.Errorf("%v; want an error naming breaker 1", err)
	}
}
