package prom_test

import (
	"context"
	"testing"

	"github.com/groupexec/groupexec/metrics/prom"
)

// A group whose key is the OtherGroup label (a tenant header can name it)
// must not break the scrape: every series must stay unique.
func TestGroupNamedLikeOtherGroupKeepsTheScrapeValid(t *testing.T) {
	ex, _, reg := setup(t, prom.Options{})
	if err := ex.Do(context.Background(), prom.OtherGroup, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := ex.Do(context.Background(), "a", func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Gather(); err != nil {
		t.Fatalf("Gather: %v", err)
	}
}
