package otel_test

import (
	"context"
	"errors"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/internal/adaptertest"
	gotel "github.com/groupexec/groupexec/metrics/otel"
	"github.com/groupexec/groupexec/policy"
)

// runningIn returns an executor observed by a collector with one task of
// group key running until the test ends, and the collector's reader.
func runningIn(t *testing.T, key string) (*executor.Executor, *sdkmetric.ManualReader) {
	t.Helper()
	mp, r := newProvider()
	c, err := gotel.New(mp, gotel.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Unregister() })
	p, _ := policy.New()
	ex, err := executor.New(p, executor.WithListener(c))
	if err != nil {
		t.Fatal(err)
	}
	c.Observe(ex)
	free := adaptertest.FillSlot(t, ex, key)
	t.Cleanup(func() { free(); ex.Close() })
	return ex, r
}

// A group whose key is the OtherGroup attribute (a tenant header can name
// it) must not hide its running tasks: the group_running_tasks point of
// OtherGroup counts them.
func TestGroupNamedLikeOtherGroupIsCounted(t *testing.T) {
	ex, reader := runningIn(t, gotel.OtherGroup)
	if s, _ := ex.GroupStats(gotel.OtherGroup); s.RunningTasks != 1 {
		t.Fatalf("GroupStats running %d, want 1", s.RunningTasks)
	}
	r := collect(t, reader)
	if got := r.value("group_running_tasks", group(gotel.OtherGroup)); got != 1 {
		t.Fatalf("group_running_tasks{group=%q} = %d, want 1 (the task of group %q runs)", gotel.OtherGroup, got, gotel.OtherGroup)
	}
}

// A group whose key is not valid UTF-8, which an exporter cannot send as an
// attribute value, is counted under OtherGroup, as in prom.
func TestGroupKeyNotUTF8IsCountedUnderOtherGroup(t *testing.T) {
	const bad = "a\xff"
	_, reader := runningIn(t, bad)
	r := collect(t, reader)
	if got := r.value("group_running_tasks", group(gotel.OtherGroup)); got != 1 {
		t.Errorf("group_running_tasks{group=%q} = %d, want 1 (the task of group %q runs)", gotel.OtherGroup, got, bad)
	}
	if got, ok := r.int("group_running_tasks", group(bad)); ok {
		t.Errorf("group_running_tasks{group=%q} = %d: a series of its own", bad, got)
	}
}

// A task with an empty group key is refused as invalid before it has a
// group: its refusal is counted under OtherGroup, and the empty key takes
// none of the MaxGroups places, which go to real groups.
func TestEmptyGroupKeyTakesNoLabelledPlace(t *testing.T) {
	mp, reader := newProvider()
	c, err := gotel.New(mp, gotel.Options{MaxGroups: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Unregister()
	p, _ := policy.New()
	ex, err := executor.New(p, executor.WithListener(c))
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	c.Observe(ex)
	ctx := context.Background()
	if err := ex.Do(ctx, "", func(context.Context) error { return nil }); !errors.Is(err, executor.ErrInvalidTask) {
		t.Fatalf("Do with an empty group: %v, want ErrInvalidTask", err)
	}
	if err := ex.Do(ctx, "a", func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	r := collect(t, reader)
	if got := r.sum("group_completed_total", "a"); got != 1 {
		t.Errorf(`group_completed_total{group="a"} = %d, want 1: the empty group key took its place`, got)
	}
	if got := r.sum("group_rejected_total", gotel.OtherGroup); got != 1 {
		t.Errorf("group_rejected_total{group=%q} = %d, want the refusal of the empty group key", gotel.OtherGroup, got)
	}
	if got := r.sum("group_rejected_total", ""); got != 0 {
		t.Errorf(`group_rejected_total{group=""} = %d, want none`, got)
	}
}
