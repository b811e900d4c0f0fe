package otel_test

import (
	"fmt"
	"strings"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	gotel "github.com/groupexec/groupexec/metrics/otel"
)

// A nil *sdkmetric.MeterProvider, a provider variable never set, is
// refused as a nil MeterProvider is, with an error naming the
// constructor: it is not nil as an interface, and its Meter panicked with
// a nil pointer dereference.
func TestConstructorsRefuseANilProviderPointer(t *testing.T) {
	var mp *sdkmetric.MeterProvider // nil: the input under test
	for name, f := range map[string]func() error{
		"New":                   func() error { _, err := gotel.New(mp, gotel.Options{}); return err },
		"NewBulkhead":           func() error { _, err := gotel.NewBulkhead(mp, "b", ""); return err },
		"ObserveBreakers":       func() error { _, err := gotel.ObserveBreakers(mp, ""); return err },
		"NewBreakerTransitions": func() error { _, err := gotel.NewBreakerTransitions(mp, "", nil); return err },
	} {
		var err error
		func() {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("panic: %v", r)
				}
			}()
			err = f()
		}()
		if err == nil || !strings.Contains(err.Error(), "otel: "+name+": nil MeterProvider") {
			t.Errorf("%s with a nil *sdkmetric.MeterProvider: %v; want an error naming %s and the nil MeterProvider", name, err, name)
		}
	}
}
