package executor_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

func TestCancelWaitingTask(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)})
	g := newGate()
	defer g.open()
	blocker := submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("blocker")})
	g.waitStarted(t, 1)
	h := submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("never")})
	if !h.Cancel() {
		t.Fatal("Cancel of a waiting task reported false")
	}
	// Completed by Cancel itself, not at the next dispatch.
	if !isDone(h) {
		t.Fatal("Cancel did not complete the waiting task")
	}
	if r := wait(t, h); r.Status != executor.Cancelled || !errors.Is(r.Err, context.Canceled) {
		t.Errorf("result %+v", r)
	}
	if s := groupStats(t, ex, "g"); s.Waiting != 0 || s.InFlight != 1 || s.Cancelled != 1 {
		t.Errorf("stats %+v", s)
	}
	if h.Cancel() { // idempotent
		t.Error("a second Cancel reported true")
	}
	g.open()
	wait(t, blocker)
	// The group is idle once the blocker is done: had the cancelled task
	// been left queued, it would have started before that.
	if s := ex.Stats(); s.Started != 1 {
		t.Errorf("%d tasks started, want only the blocker", s.Started)
	}
	g.noneStarted(t)
}

func TestCancelRunningTaskCancelsItsContext(t *testing.T) {
	for _, tc := range []struct {
		name string
		ctx  context.Context
	}{
		{"background parent", bg},
		{"cancelable parent", func() context.Context { c, cancel := context.WithCancel(bg); t.Cleanup(cancel); return c }()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ex := newExec(t, nil)
			started := make(chan struct{})
			h, err := executor.Submit(ex, tc.ctx, executor.Task[int]{Group: "g", Fn: func(ctx context.Context) (int, error) {
				close(started)
				<-ctx.Done()
				return 0, ctx.Err()
			}})
			if err != nil {
				t.Fatal(err)
			}
			recv(t, started, "the task started")
			if !h.Cancel() {
				t.Fatal("Cancel of a running task reported false")
			}
			if h.Cancel() { // its context is cancelled already, whether or not Fn has returned
				t.Error("a second Cancel reported true")
			}
			if r := wait(t, h); r.Status != executor.Cancelled || !errors.Is(r.Err, context.Canceled) {
				t.Errorf("result %+v", r)
			}
			if h.Cancel() {
				t.Error("Cancel after completion reported true")
			}
		})
	}
}

// Cancel of a completed task does nothing and says so; of a running task
// that ignores its context, it reports the cancel it made, and the outcome
// is still what Fn returns.
func TestCancelReportsWhetherItCancelled(t *testing.T) {
	ex := newExec(t, nil)
	done := submit(t, ex, executor.Task[int]{Group: "g", Fn: func(context.Context) (int, error) { return 1, nil }})
	wait(t, done)
	if done.Cancel() {
		t.Error("Cancel of a completed task reported true")
	}
	if r, _ := done.Result(); r.Status != executor.Success {
		t.Errorf("Cancel changed a completed result: %+v", r)
	}

	started, release := make(chan struct{}), make(chan struct{})
	closeAtEnd(t, release)
	deaf := submit(t, ex, executor.Task[int]{Group: "g", Fn: func(context.Context) (int, error) {
		close(started)
		<-release
		return 2, nil
	}})
	recv(t, started, "the task started")
	if !deaf.Cancel() {
		t.Fatal("Cancel of a running task reported false")
	}
	close(release)
	if r := wait(t, deaf); r.Status != executor.Success || r.Value != 2 {
		t.Errorf("result %+v, want what Fn returned", r)
	}
}

func TestCancelBeforeContextIsMade(t *testing.T) {
	// A task cancelled while waiting never sees a context; one cancelled the
	// instant it starts sees a context that is already done.
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)})
	for range 100 {
		var h *executor.Handle[int]
		ready := make(chan struct{})
		h = submit(t, ex, executor.Task[int]{Group: "g", Fn: func(ctx context.Context) (int, error) {
			<-ready
			h.Cancel()
			select {
			case <-ctx.Done():
				return 0, ctx.Err()
			case <-time.After(10 * time.Second): // hang guard
				return 0, errors.New("context not cancelled")
			}
		}})
		close(ready)
		if r := wait(t, h); r.Status != executor.Cancelled {
			t.Fatalf("result %+v", r)
		}
	}
}

func TestSubmitContextCancelsWaitingTask(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)})
	g := newGate()
	defer g.open()
	submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("blocker")})
	g.waitStarted(t, 1)
	cause := errors.New("client went away")
	ctx, cancel := context.WithCancelCause(bg)
	h, err := executor.Submit(ex, ctx, executor.Task[string]{Group: "g", Fn: g.fn("never")})
	if err != nil {
		t.Fatal(err)
	}
	cancel(cause)
	r := wait(t, h) // completed by the context's watcher, promptly
	if r.Status != executor.Cancelled || !errors.Is(r.Err, cause) {
		t.Errorf("result %+v, want Cancelled with the cause", r)
	}
	if s := groupStats(t, ex, "g"); s.Waiting != 0 || s.InFlight != 1 {
		t.Errorf("stats %+v", s)
	}
}

func TestSubmitContextCancelsRunningTask(t *testing.T) {
	ex := newExec(t, nil)
	cause := errors.New("deadline policy")
	ctx, cancel := context.WithCancelCause(bg)
	started := make(chan struct{})
	h, _ := executor.Submit(ex, ctx, executor.Task[error]{Group: "g", Fn: func(ctx context.Context) (error, error) {
		close(started)
		<-ctx.Done()
		return context.Cause(ctx), ctx.Err()
	}})
	recv(t, started, "the task started")
	cancel(cause)
	if r := wait(t, h); r.Status != executor.Cancelled || r.Value != cause {
		t.Errorf("result %+v, want Cancelled, the cause visible to Fn", r)
	}
}

func TestSubmitWithDoneContext(t *testing.T) {
	ex := newExec(t, nil)
	ctx, cancel := context.WithCancel(bg)
	cancel()
	ran := false
	h, err := executor.Submit(ex, ctx, executor.Task[int]{Group: "g", Fn: func(context.Context) (int, error) { ran = true; return 0, nil }})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if r := wait(t, h); r.Status != executor.Cancelled || ran {
		t.Errorf("result %+v ran=%v", r, ran)
	}
}

func TestTaskContextCarriesValuesAndDeadline(t *testing.T) {
	type key struct{}
	deadline := time.Now().Add(time.Hour)
	dctx, cancel := context.WithDeadline(context.WithValue(bg, key{}, "v"), deadline)
	defer cancel()
	for _, tc := range []struct {
		name     string
		ctx      context.Context
		deadline bool
	}{
		{"never-cancelled parent", context.WithValue(context.WithoutCancel(dctx), key{}, "v"), false},
		{"parent with deadline", dctx, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ex := newExec(t, nil)
			h, _ := executor.Submit(ex, tc.ctx, executor.Task[bool]{Group: "g", Fn: func(ctx context.Context) (bool, error) {
				d, ok := ctx.Deadline()
				return ctx.Value(key{}) == "v" && ok == tc.deadline && (!ok || d.Equal(deadline)) && ctx.Err() == nil, nil
			}})
			if r := wait(t, h); !r.Value {
				t.Errorf("task context lost the parent's values or deadline")
			}
		})
	}
}
