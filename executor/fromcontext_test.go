package executor_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

type ctxKey struct{}

// chanCtx is a context with a Done channel of its own, neither standard
// nor derived from one, and no AfterFunc method: a context derived from it
// watches it with a goroutine.
type chanCtx struct {
	context.Context // Background: no deadline, no values
	done            chan struct{}
}

func (c *chanCtx) Done() <-chan struct{} { return c.done }

func (c *chanCtx) Err() error {
	select {
	case <-c.done:
		return context.Canceled
	default:
		return nil
	}
}

// fromContext records what GroupFromContext answers of fn's context and
// of contexts derived from it, and the derived contexts' values.
type fromContext struct {
	got []string
}

func (f *fromContext) ask(ctx context.Context) {
	record := func(ctx context.Context) {
		g, ok := executor.GroupFromContext(ctx)
		if !ok {
			g = "<none>"
		}
		f.got = append(f.got, g)
	}
	record(ctx)
	record(context.WithValue(ctx, ctxKey{}, "v"))
	c, cancel := context.WithCancel(ctx)
	record(c)
	cancel()
	d, cancel := context.WithTimeout(ctx, time.Hour)
	record(d)
	cancel()
	record(context.WithoutCancel(ctx))
}

func (f *fromContext) check(t *testing.T, want string) {
	t.Helper()
	if len(f.got) != 5 {
		t.Fatalf("fn ran %d times, want once: %q", len(f.got)/5, f.got)
	}
	for i, g := range f.got {
		if g != want {
			t.Errorf("context %d (fn's, then derived: WithValue, WithCancel, WithTimeout, WithoutCancel): group %q, want %q", i, g, want)
		}
	}
}

// GroupFromContext answers, of the context the executor passes to fn and
// of contexts derived from it, the group the work was submitted for,
// whichever way in and whichever context the caller gave: each kind of run
// context the executor makes (its group's, the task itself, a Do call's, a
// standard one derived from the caller's) answers it.
func TestGroupFromContextOfEveryWayIn(t *testing.T) {
	cancellable, cancel := context.WithCancel(bg)
	defer cancel()
	withValue := context.WithValue(bg, ctxKey{}, "v")
	afterFunc, end := newAfterFuncCtx(0)
	defer end()
	own := &chanCtx{Context: bg, done: make(chan struct{})}
	defer close(own.done)
	parents := []struct {
		name string
		ctx  context.Context
	}{
		{"Background", bg},
		{"cancellable", cancellable},
		{"with a value", withValue},
		{"with an AfterFunc method", afterFunc},
		{"with a Done of its own", own},
	}
	ways := []struct {
		name string
		run  func(t *testing.T, ex *executor.Executor, ctx context.Context, fn func(context.Context))
	}{
		{"Do", func(t *testing.T, ex *executor.Executor, ctx context.Context, fn func(context.Context)) {
			if err := ex.Do(ctx, "tenant-a", func(ctx context.Context) error { fn(ctx); return nil }); err != nil {
				t.Fatal(err)
			}
		}},
		{"Submit", func(t *testing.T, ex *executor.Executor, ctx context.Context, fn func(context.Context)) {
			h, err := executor.Submit(ex, ctx, executor.Task[int]{Group: "tenant-a", Fn: func(ctx context.Context) (int, error) { fn(ctx); return 0, nil }})
			if err != nil {
				t.Fatal(err)
			}
			if r := wait(t, h); r.Status != executor.Success {
				t.Fatalf("result %+v", r)
			}
		}},
		{"Go", func(t *testing.T, ex *executor.Executor, ctx context.Context, fn func(context.Context)) {
			done := make(chan struct{})
			if err := ex.Go(ctx, "tenant-a", func(ctx context.Context) error { defer close(done); fn(ctx); return nil }); err != nil {
				t.Fatal(err)
			}
			recv(t, done, "the Go task ran")
		}},
		{"ExecuteAll", func(t *testing.T, ex *executor.Executor, ctx context.Context, fn func(context.Context)) {
			rs := executor.ExecuteAll(ex, ctx, []executor.Task[int]{{Group: "tenant-a", Fn: func(ctx context.Context) (int, error) { fn(ctx); return 0, nil }}})
			if rs[0].Status != executor.Success {
				t.Fatalf("result %+v", rs[0])
			}
		}},
	}
	for _, way := range ways {
		for _, parent := range parents {
			for _, bound := range []bool{false, true} {
				name := way.name + "/" + parent.name
				if bound {
					name += "/cluster permit"
				}
				t.Run(name, func(t *testing.T) {
					var opts []executor.Option
					lim := newMemLimiter()
					if bound {
						// A bound cluster permit makes every kind's run
						// context a standard one, derived from the caller's.
						lim.avail["tenant-a"] = 1
						opts = append(opts, executor.WithGroupLimiter(lim))
					}
					ex := newExec(t, nil, opts...)
					var f fromContext
					way.run(t, ex, parent.ctx, f.ask)
					f.check(t, "tenant-a")
					if bound && lim.binds.Load() != 1 {
						t.Errorf("%d cluster permits bound, want 1", lim.binds.Load())
					}
					if _, ok := executor.GroupFromContext(parent.ctx); ok {
						t.Error("the caller's context answers a group")
					}
				})
			}
		}
	}
}

// The standard run context of a task submitted with a context that can
// end, derived through a view of the task that answers GroupFromContext,
// still ends with that context, whatever kind it is: one derived from a
// standard context, one with an AfterFunc method of its own, one with
// only a Done channel of its own.
func TestGroupFromContextRunContextStillEndsWithItsParent(t *testing.T) {
	cancellable, cancel := context.WithCancel(bg)
	afterFunc, end := newAfterFuncCtx(0)
	own := &chanCtx{Context: bg, done: make(chan struct{})}
	for _, parent := range []struct {
		name string
		ctx  context.Context
		end  func()
	}{
		{"cancellable", cancellable, cancel},
		{"with an AfterFunc method", afterFunc, end},
		{"with a Done of its own", own, func() { close(own.done) }},
	} {
		t.Run(parent.name, func(t *testing.T) {
			ex := newExec(t, nil)
			started := make(chan struct{})
			h, err := executor.Submit(ex, parent.ctx, executor.Task[string]{Group: "g", Fn: func(ctx context.Context) (string, error) {
				close(started)
				<-ctx.Done()
				g, _ := executor.GroupFromContext(ctx)
				return g, ctx.Err()
			}})
			if err != nil {
				t.Fatal(err)
			}
			recv(t, started, "the task started")
			parent.end()
			if r := wait(t, h); r.Value != "g" || r.Err == nil {
				t.Fatalf("result %+v, want the group and the context's end", r)
			}
		})
	}
}

// A context the executor did not make answers no group, nor does nil.
func TestGroupFromContextOfOtherContexts(t *testing.T) {
	for _, ctx := range []context.Context{bg, context.WithValue(bg, ctxKey{}, "v"), nil} {
		if g, ok := executor.GroupFromContext(ctx); ok || g != "" {
			t.Errorf("GroupFromContext(%v) = %q, %v", ctx, g, ok)
		}
	}
}

// Work run in its caller, refused under CallerRuns, outside the limits,
// is given the group it was submitted for all the same.
func TestGroupFromContextUnderCallerRuns(t *testing.T) {
	cancellable, cancel := context.WithCancel(bg)
	defer cancel()
	for _, ctx := range []context.Context{bg, cancellable} {
		ex, _ := full(t, policy.CallerRuns)
		var do, sub fromContext
		if err := ex.Do(ctx, "g", func(ctx context.Context) error { do.ask(ctx); return nil }); err != nil {
			t.Fatal(err)
		}
		do.check(t, "g")
		h, err := executor.Submit(ex, ctx, executor.Task[int]{Group: "g", Fn: func(ctx context.Context) (int, error) { sub.ask(ctx); return 0, nil }})
		if err != nil {
			t.Fatal(err)
		}
		if r := wait(t, h); r.Status != executor.Success {
			t.Fatalf("result %+v", r)
		}
		sub.check(t, "g")
		if s := groupStats(t, ex, "g"); s.CallerRuns != 2 {
			t.Fatalf("CallerRuns %d, want 2: the work was not run in its caller", s.CallerRuns)
		}
	}
}

// Within nested work the innermost group answers, and a Do call's context
// kept past its call never answers the enclosing work's group: its task
// may serve another call by then.
func TestGroupFromContextNested(t *testing.T) {
	ex := newExec(t, nil)
	cancellable, cancel := context.WithCancel(bg)
	defer cancel()
	h, err := executor.Submit(ex, cancellable, executor.Task[string]{Group: "outer", Fn: func(ctx context.Context) (string, error) {
		var inner context.Context
		var during string
		err := ex.Do(ctx, "inner", func(ctx context.Context) error {
			inner = ctx
			during, _ = executor.GroupFromContext(ctx)
			return nil
		})
		if err != nil {
			return "", err
		}
		if during != "inner" {
			return "", errors.New("within the inner Do: " + during)
		}
		if g, _ := executor.GroupFromContext(inner); g == "outer" {
			return "", errors.New("the inner Do's context, once it returned, answers the enclosing group")
		}
		g, _ := executor.GroupFromContext(ctx)
		return g, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if r := wait(t, h); r.Err != nil || r.Value != "outer" {
		t.Fatalf("result %+v, want outer", r)
	}
}
