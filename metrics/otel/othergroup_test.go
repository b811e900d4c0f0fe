package otel_test

import (
	"context"
	"testing"

	"github.com/groupexec/groupexec/executor"
	gotel "github.com/groupexec/groupexec/metrics/otel"
	"github.com/groupexec/groupexec/policy"
)

// A group whose key is the OtherGroup attribute (a tenant header can name
// it) must not hide its running tasks: the group_running_tasks point of
// OtherGroup counts them.
func TestGroupNamedLikeOtherGroupIsCounted(t *testing.T) {
	mp, reader := newProvider()
	c, err := gotel.New(mp, gotel.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Unregister()
	p, _ := policy.New()
	ex, err := executor.New(p, executor.WithListener(c))
	if err != nil {
		t.Fatal(err)
	}
	c.Observe(ex)
	hold, in, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(hold); <-done; ex.Close() })
	go func() {
		defer close(done)
		ex.Do(context.Background(), gotel.OtherGroup, func(context.Context) error { close(in); <-hold; return nil })
	}()
	<-in
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
	mp, reader := newProvider()
	c, err := gotel.New(mp, gotel.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Unregister()
	p, _ := policy.New()
	ex, err := executor.New(p, executor.WithListener(c))
	if err != nil {
		t.Fatal(err)
	}
	c.Observe(ex)
	const bad = "a\xff"
	hold, in, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(hold); <-done; ex.Close() })
	go func() {
		defer close(done)
		ex.Do(context.Background(), bad, func(context.Context) error { close(in); <-hold; return nil })
	}()
	<-in
	r := collect(t, reader)
	if got := r.value("group_running_tasks", group(gotel.OtherGroup)); got != 1 {
		t.Errorf("group_running_tasks{group=%q} = %d, want 1 (the task of group %q runs)", gotel.OtherGroup, got, bad)
	}
	if got, ok := r.int("group_running_tasks", group(bad)); ok {
		t.Errorf("group_running_tasks{group=%q} = %d: a series of its own", bad, got)
	}
}
