package otel_test

import (
	"context"
	"strings"
	"testing"

	"github.com/groupexec/groupexec/executor"
	gotel "github.com/groupexec/groupexec/metrics/otel"
	"github.com/groupexec/groupexec/policy"
)

// A group key longer than MaxGroupLen, which every export would repeat in
// each point of its group, is counted under OtherGroup and takes none of
// the MaxGroups places, as in prom.
func TestLongGroupKeyCountedUnderOtherGroup(t *testing.T) {
	mp, reader := newProvider()
	c, err := gotel.New(mp, gotel.Options{MaxGroups: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Unregister()
	p, _ := policy.New()
	ex, _ := executor.New(p, executor.WithListener(c))
	defer ex.Close()
	c.Observe(ex)
	long := strings.Repeat("k", gotel.MaxGroupLen+1)
	longest := strings.Repeat("k", gotel.MaxGroupLen)
	for _, g := range []string{long, longest, "a"} {
		if err := ex.Do(context.Background(), g, func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	r := collect(t, reader)
	if _, ok := r.int("group_completed_total", map[string]string{"group": long, "status": "success"}); ok {
		t.Errorf("a group key of %d bytes has series of its own", len(long))
	}
	for _, g := range []string{longest, "a", gotel.OtherGroup} {
		if got, _ := r.int("group_completed_total", map[string]string{"group": g, "status": "success"}); got != 1 {
			t.Errorf("group_completed_total{group=%.12q...} = %d, want 1", g, got)
		}
	}
}
