package prom_test

import (
	"context"
	"errors"
	"testing"

	"github.com/groupexec/groupexec/executor"
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

// A task with an empty group key is refused as invalid before it has a
// group: its refusal is counted under OtherGroup, and the empty key takes
// none of the MaxGroups places, which go to real groups.
func TestEmptyGroupKeyTakesNoLabelledPlace(t *testing.T) {
	ex, _, reg := setup(t, prom.Options{MaxGroups: 1})
	ctx := context.Background()
	if err := ex.Do(ctx, "", func(context.Context) error { return nil }); !errors.Is(err, executor.ErrInvalidTask) {
		t.Fatalf("Do with an empty group: %v, want ErrInvalidTask", err)
	}
	if err := ex.Do(ctx, "a", func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if metricOf(t, reg, "group_completed_total", "a") == nil {
		t.Error(`group "a" has no series of its own: the empty group key took its place`)
	}
	if m := metricOf(t, reg, "group_rejected_total", prom.OtherGroup); m == nil || m.GetCounter().GetValue() != 1 {
		t.Errorf("group_rejected_total{group=%q}: %v, want the refusal of the empty group key", prom.OtherGroup, m)
	}
}
