package otel_test

import (
	"errors"
	"math"
	"testing"

	"go.opentelemetry.io/otel/metric"

	"github.com/groupexec/groupexec/breaker"
	gotel "github.com/groupexec/groupexec/metrics/otel"
)

// Every invalid argument or option a constructor refuses gives an error
// matching ErrInvalidOption, as policy's, bulkhead's and breaker's do with
// theirs: a program can tell a mistake in its configuration from a name
// another exporter holds (ErrNamespaceInUse, ErrNameInUse) without
// reading the message.
func TestInvalidArgumentsMatchErrInvalidOption(t *testing.T) {
	mp, _ := newProvider()
	var none metric.MeterProvider // nil: the input under test
	named := func(name string) *breaker.CircuitBreaker {
		cb, err := breaker.New(breaker.Settings{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		return cb
	}
	for name, f := range map[string]func() error{
		"New nil provider":        func() error { _, err := gotel.New(none, gotel.Options{}); return err },
		"New MaxGroups":           func() error { _, err := gotel.New(mp, gotel.Options{MaxGroups: -1}); return err },
		"New Buckets order":       func() error { _, err := gotel.New(mp, gotel.Options{Buckets: []float64{2, 1}}); return err },
		"New Buckets +Inf alone":  func() error { _, err := gotel.New(mp, gotel.Options{Buckets: []float64{math.Inf(+1)}}); return err },
		"New Namespace":           func() error { _, err := gotel.New(mp, gotel.Options{Namespace: "a b"}); return err },
		"NewBulkhead nil":         func() error { _, err := gotel.NewBulkhead(none, "b", ""); return err },
		"NewBulkhead name":        func() error { _, err := gotel.NewBulkhead(mp, "\xff", ""); return err },
		"NewBulkhead namespace":   func() error { _, err := gotel.NewBulkhead(mp, "b", "a b"); return err },
		"ObserveBreakers nil":     func() error { _, err := gotel.ObserveBreakers(none, ""); return err },
		"ObserveBreakers breaker": func() error { _, err := gotel.ObserveBreakers(mp, "", nil); return err },
		"ObserveBreakers name":    func() error { _, err := gotel.ObserveBreakers(mp, "", named("\xff")); return err },
		"ObserveBreakers namespace": func() error {
			_, err := gotel.ObserveBreakers(mp, "a b", named("cb"))
			return err
		},
		"NewBreakerTransitions nil":       func() error { _, err := gotel.NewBreakerTransitions(none, "", nil); return err },
		"NewBreakerTransitions namespace": func() error { _, err := gotel.NewBreakerTransitions(mp, "a b", nil); return err },
	} {
		err := f()
		if !errors.Is(err, gotel.ErrInvalidOption) {
			t.Errorf("%s: %v; want an error matching ErrInvalidOption", name, err)
		}
		if errors.Is(err, gotel.ErrNamespaceInUse) || errors.Is(err, gotel.ErrNameInUse) {
			t.Errorf("%s: %v matches an in-use error too", name, err)
		}
	}
}
