package prom_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/internal/adaptertest"
	"github.com/groupexec/groupexec/metrics/prom"
	"github.com/groupexec/groupexec/policy"
)

// A task that ran and was cancelled is in group_run_seconds even if it ran
// for a measured 0 s (the clock stands still); one cancelled while it
// waited, or whose context had ended by its start, never ran and is not.
func TestRunSecondsOfCancelledTasks(t *testing.T) {
	ex, reg := stillExecutor(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)})
	bg := context.Background()
	if err := ex.Do(bg, "a", func(context.Context) error { return context.Canceled }); err != context.Canceled {
		t.Fatalf("Do: %v, want Canceled", err)
	}
	if n, _ := histogram(t, reg, "group_run_seconds", "a"); n != 1 {
		t.Errorf("after a run cancelled in 0 s: %d samples, want 1", n)
	}

	release := holdOne(t, ex, "a")
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
	release()
	if err := <-doErr; err != context.Canceled {
		t.Fatalf("Do: %v, want Canceled", err)
	}
	close(late.done)
	if n, _ := histogram(t, reg, "group_run_seconds", "a"); n != 2 {
		t.Errorf("after a task that ran and two that never did: %d samples, want 2", n)
	}
	if got := counter(t, reg, "group_completed_total", "a", "cancelled"); got != 3 {
		t.Errorf("cancelled: %v, want 3", got)
	}
}

// counter returns the value of the counter name{group, status}.
func counter(t *testing.T, reg *prometheus.Registry, name, group, status string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.Metric {
			if label(m, "group") == group && label(m, "status") == status {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
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

// A task run by its caller (CallerRuns, RunInCaller) and cancelled in a
// measured 0 s ran too: it is in group_run_seconds.
func TestRunSecondsOfCancelledTasksRunByTheCaller(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []executor.Option
	}{
		{"CallerRuns", nil},
		{"RunInCaller", []executor.Option{executor.WithRejectionHandler(func(r *executor.Rejection) error { r.RunInCaller(); return nil })}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ex, reg := stillExecutor(t, []policy.Option{policy.WithDefaultMaxConcurrency(1), policy.WithDefaultMaxInFlight(1),
				policy.WithRejectionPolicy(policy.CallerRuns)}, tc.opts...)
			bg := context.Background()
			release := holdOne(t, ex, "a")
			h, _ := executor.Submit(ex, bg, executor.Task[int]{Group: "a", Fn: func(context.Context) (int, error) { return 0, context.Canceled }})
			doErr := ex.Do(bg, "a", func(context.Context) error { return context.Canceled })
			release()
			if r, _ := h.Wait(bg); r.Status != executor.Cancelled || doErr != context.Canceled {
				t.Fatalf("run by the caller: %v and %v, want Cancelled", r.Status, doErr)
			}
			if n, _ := histogram(t, reg, "group_run_seconds", "a"); n != 3 {
				t.Errorf("%d samples, want 3: the held task and the two run by their caller", n)
			}
		})
	}
}

// heldWatchCtx is a context whose context.AfterFunc registration (the
// executor's watcher of a waiting task) waits, once entered, until the
// test lets it go: the task can start, and the context end, before the
// watcher is armed.
type heldWatchCtx struct {
	errOnlyCtx
	entered, proceed chan struct{}
}

func (c *heldWatchCtx) AfterFunc(func()) func() bool {
	close(c.entered)
	<-c.proceed
	return func() bool { return true }
}

// A Submit task whose context has ended by its start never runs: it is not
// in group_run_seconds, though its worker took it.
func TestRunSecondsOfSubmitEndedAtStart(t *testing.T) {
	ex, reg := stillExecutor(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)})
	bg := context.Background()
	release := holdOne(t, ex, "a")
	ctx := &heldWatchCtx{errOnlyCtx: errOnlyCtx{Context: bg, done: make(chan struct{})},
		entered: make(chan struct{}), proceed: make(chan struct{})}
	submitted := make(chan *executor.Handle[int], 1)
	go func() {
		h, _ := executor.Submit(ex, ctx, executor.Task[int]{Group: "a", Fn: func(context.Context) (int, error) { return 0, nil }})
		submitted <- h
	}()
	<-ctx.entered // queued, its watcher not armed yet
	ctx.ended.Store(true)
	release()
	adaptertest.Eventually(t, "the task started", func() bool { s, _ := ex.GroupStats("a"); return s.Waiting == 0 })
	close(ctx.proceed)
	if r, _ := (<-submitted).Wait(bg); r.Status != executor.Cancelled {
		t.Fatalf("the task: %v, want Cancelled", r.Status)
	}
	close(ctx.done)
	if n, _ := histogram(t, reg, "group_run_seconds", "a"); n != 1 {
		t.Errorf("%d samples, want 1: the held task only", n)
	}
	if s, _ := ex.GroupStats("a"); s.Started != 1 {
		t.Errorf("%d started, want 1", s.Started)
	}
}

// stillExecutor returns an executor of policy opts and exOpts whose clock
// stands still (every run lasts a measured 0 s), told to a collector
// registered in the registry returned.
func stillExecutor(t *testing.T, opts []policy.Option, exOpts ...executor.Option) (*executor.Executor, *prometheus.Registry) {
	t.Helper()
	p, err := policy.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	c := prom.New(prom.Options{})
	ex, err := executor.New(p, append([]executor.Option{executor.WithListener(c), executor.WithClock(clock.NewFake(time.Unix(0, 0)))}, exOpts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ex.Close() })
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	return ex, reg
}

// holdOne starts a task of group that runs until the function returned is
// called, which returns once the task has completed.
func holdOne(t *testing.T, ex *executor.Executor, group string) (release func()) {
	t.Helper()
	done, started := make(chan struct{}), make(chan struct{})
	held, err := executor.Submit(ex, context.Background(), executor.Task[int]{Group: group, Fn: func(context.Context) (int, error) {
		close(started)
		<-done
		return 0, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	<-started
	return func() {
		close(done)
		held.Wait(context.Background())
	}
}
