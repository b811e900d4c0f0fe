package otel_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/internal/adaptertest"
	gotel "github.com/groupexec/groupexec/metrics/otel"
	"github.com/groupexec/groupexec/policy"
)

// A task that ran and was cancelled is in group_run_seconds even if it ran
// for a measured 0 s (the clock stands still); one cancelled while it
// waited, or whose context had ended by its start, never ran and is not.
func TestRunSecondsOfCancelledTasks(t *testing.T) {
	mp, reader := newProvider()
	c, err := gotel.New(mp, gotel.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Unregister()
	p, err := policy.New(policy.WithDefaultMaxConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	ex, err := executor.New(p, executor.WithListener(c), executor.WithClock(clock.NewFake(time.Unix(0, 0))))
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	bg := context.Background()
	if err := ex.Do(bg, "a", func(context.Context) error { return context.Canceled }); err != context.Canceled {
		t.Fatalf("Do: %v, want Canceled", err)
	}
	if n, _ := collect(t, reader).histogram("group_run_seconds", group("a")); n != 1 {
		t.Errorf("after a run cancelled in 0 s: %d samples, want 1", n)
	}

	release, started := make(chan struct{}), make(chan struct{})
	held, err := executor.Submit(ex, bg, executor.Task[int]{Group: "a", Fn: func(context.Context) (int, error) {
		close(started)
		<-release
		return 0, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	<-started
	ctx, cancel := context.WithCancel(bg)
	waiting, err := executor.Submit(ex, ctx, executor.Task[int]{Group: "a", Fn: func(context.Context) (int, error) { return 0, nil }})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if r, _ := waiting.Wait(bg); r.Status != executor.Cancelled {
		t.Fatalf("the waiting task: %v, want Cancelled", r.Status)
	}
	// A Do call whose context has ended by its start, its Done not closed
	// yet: it leaves its queue started, and does not run.
	late := &errOnlyCtx{Context: bg, done: make(chan struct{})}
	doErr := make(chan error, 1)
	go func() { doErr <- ex.Do(late, "a", func(context.Context) error { return nil }) }()
	adaptertest.Eventually(t, "the Do call queued", func() bool { s, _ := ex.GroupStats("a"); return s.Waiting == 1 })
	late.ended.Store(true)
	close(release)
	held.Wait(bg)
	if err := <-doErr; err != context.Canceled {
		t.Fatalf("Do: %v, want Canceled", err)
	}
	close(late.done)
	r := collect(t, reader)
	if n, _ := r.histogram("group_run_seconds", group("a")); n != 2 {
		t.Errorf("after a task that ran and two that never did: %d samples, want 2", n)
	}
	if got := r.value("group_completed_total", map[string]string{"group": "a", "status": "cancelled"}); got != 3 {
		t.Errorf("cancelled: %v, want 3", got)
	}
}

// errOnlyCtx is a context whose Err says it ended once ended is set, while
// its Done stays open: as a context is seen between its end and its Done's
// close.
type errOnlyCtx struct {
	context.Context
	done  chan struct{}
	ended atomic.Bool
}

func (c *errOnlyCtx) Done() <-chan struct{} { return c.done }

func (c *errOnlyCtx) Err() error {
	if c.ended.Load() {
		return context.Canceled
	}
	return nil
}
