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
	ex := newExec(t, []policy.Option{policy.WithMaxConcurrencyPerGroup(1)})
	g := newGate()
	defer g.open()
	blocker := submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("blocker")})
	g.waitStarted(t, 1)
	h := submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("never")})
	h.Cancel()
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
	h.Cancel() // idempotent
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
			<-started
			h.Cancel()
			if r := wait(t, h); r.Status != executor.Cancelled || !errors.Is(r.Err, context.Canceled) {
				t.Errorf("result %+v", r)
			}
		})
	}
}

func TestCancelBeforeContextIsMade(t *testing.T) {
	// A task cancelled while waiting never sees a context; one cancelled the
	// instant it starts sees a context that is already done.
	ex := newExec(t, []policy.Option{policy.WithMaxConcurrencyPerGroup(1)})
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
	ex := newExec(t, []policy.Option{policy.WithMaxConcurrencyPerGroup(1)})
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
	<-started
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
