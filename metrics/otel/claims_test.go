package otel_test

import (
	"errors"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/metric/noop"

	"github.com/groupexec/groupexec/executor"
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
