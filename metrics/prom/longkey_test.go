package prom_test

import (
	"context"
	"strings"
	"testing"

	"github.com/groupexec/groupexec/metrics/prom"
)

// A client can choose a group key as long as its transport allows, and a
// labelled group's key is repeated in each of its series on every scrape:
// a key longer than MaxGroupLen is counted under OtherGroup and takes none
// of the MaxGroups places, which go to keys of a sane length.
func TestLongGroupKeyCountedUnderOtherGroup(t *testing.T) {
	ex, _, reg := setup(t, prom.Options{MaxGroups: 2})
	ctx := context.Background()
	long := strings.Repeat("k", prom.MaxGroupLen+1)
	longest := strings.Repeat("k", prom.MaxGroupLen)
	for _, g := range []string{long, longest, "a"} {
		if err := ex.Do(ctx, g, func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if m := metricOf(t, reg, "group_completed_total", long); m != nil {
		t.Errorf("a group key of %d bytes has series of its own", len(long))
	}
	for _, g := range []string{longest, "a", prom.OtherGroup} {
		if m := metricOf(t, reg, "group_completed_total", g); m == nil || m.GetCounter().GetValue() != 1 {
			t.Errorf("group_completed_total{group=%.12q...} = %v, want 1", g, m)
		}
	}
}
