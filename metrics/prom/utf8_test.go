package prom_test

import (
	"context"
	"testing"

	"github.com/groupexec/groupexec/metrics/prom"
)

// Group keys come from clients, and a key need not be valid UTF-8, which no
// Prometheus label value may hold: the scrape must neither panic nor fail.
func TestGroupKeyNotUTF8KeepsTheScrapeValid(t *testing.T) {
	ex, _, reg := setup(t, prom.Options{})
	if err := ex.Do(context.Background(), "a\xff", func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Gather(); err != nil {
		t.Fatalf("Gather: %v", err)
	}
}
