package executor_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// Close and Shutdown cannot wait, from a callback the executor runs for a
// task, for the task they run for: waiting there would hang for ever (the
// task's finish, and its worker, wait for them). They stop the executor
// and return ErrCalledFromTask at once instead; a Close from elsewhere then
// waits for everything, the task that called included.
func TestStopFromInsideReturns(t *testing.T) {
	type setup struct {
		popts []policy.Option
		eopts []executor.Option
		// run makes the executor call stop from where the case says, in
		// a call of its own: fn for a task's Fn, armed for a callback,
		// which calls stop once armed is set.
		run func(t *testing.T, ex *executor.Executor, fn func(context.Context) error)
	}
	// The task that the callback is told of or runs for holds its group
	// (concurrency 1) until released or cancelled.
	var release chan struct{}
	held := func(ctx context.Context) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}
	holdGroup := func(t *testing.T, ex *executor.Executor) {
		t.Helper()
		started := make(chan struct{})
		if err := ex.Go(bg, "g", func(ctx context.Context) error { close(started); return held(ctx) }); err != nil {
			t.Fatal(err)
		}
		recv(t, started, "the task that holds the group started")
	}
	submitFailing := func(t *testing.T, ex *executor.Executor, via string) {
		switch via {
		case "Submit":
			executor.Submit(ex, bg, executor.Task[int]{Group: "g", Fn: failing})
		case "Do":
			ex.Do(bg, "g", func(context.Context) error { return errBackend })
		default:
			ex.Go(bg, "g", func(context.Context) error { return errBackend })
		}
	}
	var armed atomic.Bool
	var stop func() error
	calls := make(chan error, 1)
	callStop := func() {
		if armed.Swap(false) {
			calls <- stop()
		}
	}
	clk := fakeClock()
	cases := map[string]setup{}
	for _, via := range []string{"Submit", "Do", "Go"} {
		// The breaker opens as the failed task's outcome is recorded, in
		// the goroutine that ran it, before its permits are released.
		cases["OnStateChange/"+via] = setup{
			eopts: []executor.Option{executor.WithGroupBreaker(breaker.Settings{
				ReadyToTrip:   func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 1 },
				OnStateChange: func(string, breaker.State, breaker.State) { callStop() },
			})},
			run: func(t *testing.T, ex *executor.Executor, _ func(context.Context) error) { submitFailing(t, ex, via) },
		}
		cases["OnCompleted/"+via] = setup{
			eopts: []executor.Option{executor.WithListener(executor.ListenerFuncs{Completed: func(executor.Event) { callStop() }})},
			run:   func(t *testing.T, ex *executor.Executor, _ func(context.Context) error) { submitFailing(t, ex, via) },
		}
		cases["OnStarted/"+via] = setup{
			eopts: []executor.Option{executor.WithListener(executor.ListenerFuncs{Started: func(executor.Event) { callStop() }})},
			run:   func(t *testing.T, ex *executor.Executor, _ func(context.Context) error) { submitFailing(t, ex, via) },
		}
	}
	// A task removed from its queue by the queue timeout completes,
	// counted until then, after the listener is told.
	cases["OnRejected/timeout"] = setup{
		popts: []policy.Option{policy.WithDefaultMaxConcurrency(1), policy.WithQueueTimeout(time.Minute)},
		eopts: []executor.Option{executor.WithClock(clk), executor.WithListener(executor.ListenerFuncs{Rejected: func(executor.Event) { callStop() }})},
		run: func(t *testing.T, ex *executor.Executor, _ func(context.Context) error) {
			armed.Store(false)
			holdGroup(t, ex)
			executor.Submit(ex, bg, executor.Task[int]{Group: "g", Fn: succeeding})
			armed.Store(true)
			clk.Advance(time.Minute)
		},
	}
	refusing := []policy.Option{policy.WithDefaultMaxConcurrency(1), policy.WithDefaultQueueThreshold(0)}
	cases["OnRejected/full"] = setup{
		popts: refusing,
		eopts: []executor.Option{executor.WithListener(executor.ListenerFuncs{Rejected: func(executor.Event) { callStop() }})},
		run: func(t *testing.T, ex *executor.Executor, _ func(context.Context) error) {
			armed.Store(false)
			holdGroup(t, ex)
			armed.Store(true)
			ex.Go(bg, "g", func(context.Context) error { return nil })
		},
	}
	cases["RejectionHandler"] = setup{
		popts: refusing,
		eopts: []executor.Option{executor.WithRejectionHandler(func(r *executor.Rejection) error { callStop(); return r.Err })},
		run: func(t *testing.T, ex *executor.Executor, _ func(context.Context) error) {
			armed.Store(false)
			holdGroup(t, ex)
			armed.Store(true)
			ex.Go(bg, "g", func(context.Context) error { return nil })
		},
	}
	// A rejection handler of a Submit made by a task's Fn.
	cases["RejectionHandler/Fn"] = setup{
		popts: []policy.Option{policy.WithDefaultMaxConcurrency(1), policy.WithDefaultQueueThreshold(0)},
		eopts: []executor.Option{executor.WithRejectionHandler(func(r *executor.Rejection) error { callStop(); return r.Err })},
		run: func(t *testing.T, ex *executor.Executor, _ func(context.Context) error) {
			armed.Store(false)
			ex.Go(bg, "g", func(context.Context) error {
				armed.Store(true)
				ex.Go(bg, "g", func(context.Context) error { return nil })
				return nil
			})
		},
	}
	for name, c := range cases {
		for _, how := range []string{"Close", "Shutdown"} {
			t.Run(name+"/"+how, func(t *testing.T) {
				release = make(chan struct{})
				// Not closed at the test's end if it fails: a Close would
				// hang as the one called from inside does.
				p, err := policy.New(c.popts...)
				if err != nil {
					t.Fatal(err)
				}
				ex, err := executor.New(p, c.eopts...)
				if err != nil {
					t.Fatal(err)
				}
				if how == "Close" {
					stop = ex.Close
				} else {
					stop = func() error { return ex.Shutdown(bg) }
				}
				armed.Store(true)
				go c.run(t, ex, func(ctx context.Context) error { callStop(); return held(ctx) })
				select {
				case err := <-calls:
					if !errors.Is(err, executor.ErrCalledFromTask) {
						t.Fatalf("%s from inside: %v, want ErrCalledFromTask", how, err)
					}
				case <-time.After(10 * time.Second): // a hang guard: it returns at once
					t.Fatalf("%s called from inside has not returned", how)
				}
				// Stopped before it returned: nothing is admitted now.
				if err := ex.Go(bg, "h", func(context.Context) error { return nil }); !errors.Is(err, executor.ErrShutdown) {
					t.Fatalf("a Go call after %s: %v, want ErrShutdown", how, err)
				}
				close(release)
				closed := make(chan error, 1)
				go func() { closed <- ex.Close() }()
				select {
				case err := <-closed:
					if err != nil {
						t.Fatalf("Close from outside: %v", err)
					}
				case <-time.After(10 * time.Second): // a hang guard
					t.Fatal("Close from outside has not returned")
				}
				if s := ex.Stats(); s.Running != 0 || s.Waiting != 0 {
					t.Fatalf("%+v after Close", s)
				}
				if msg := ex.CheckInvariants(); msg != "" {
					t.Fatal(msg)
				}
			})
		}
	}
}

// Close and Shutdown called from a task's Fn wait, as from anywhere else:
// the Fn may be another executor's, as a handler admitted by Do that closes
// the executor it made for its own fan-out, and that executor's tasks must
// have finished when Close returns. Each way a Fn runs is here: Submit, Go
// and Do, and Submit and Do refused under CallerRuns, run by the caller.
func TestCloseFromATasksFn(t *testing.T) {
	for _, via := range []string{"Submit", "Go", "Do", "Submit/CallerRuns", "Do/CallerRuns"} {
		for _, how := range []string{"Close", "Shutdown"} {
			t.Run(via+"/"+how, func(t *testing.T) {
				popts := []policy.Option{policy.WithDefaultMaxConcurrency(1)}
				if strings.HasSuffix(via, "CallerRuns") {
					popts = append(popts, policy.WithDefaultQueueThreshold(0), policy.WithRejectionPolicy(policy.CallerRuns))
				}
				outer := newExec(t, popts)
				inner := newExec(t, nil)
				// inner's task goes on until released, its cancellation
				// notwithstanding: Close must wait for it.
				started, release := make(chan struct{}), make(chan struct{})
				closeAtEnd(t, release)
				var finished atomic.Bool
				if err := inner.Go(bg, "i", func(context.Context) error {
					close(started)
					<-release
					finished.Store(true)
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				recv(t, started, "inner's task started")
				type stopped struct {
					err      error
					finished bool
				}
				result := make(chan stopped, 1)
				fn := func(context.Context) error {
					var err error
					if how == "Close" {
						err = inner.Close()
					} else {
						err = inner.Shutdown(bg)
					}
					result <- stopped{err, finished.Load()}
					return nil
				}
				if strings.HasSuffix(via, "CallerRuns") {
					// The group is full: the call is refused and runs fn
					// in the caller.
					held := make(chan struct{})
					defer close(held)
					holding := make(chan struct{})
					if err := outer.Go(bg, "g", func(context.Context) error { close(holding); <-held; return nil }); err != nil {
						t.Fatal(err)
					}
					recv(t, holding, "the task that fills the group started")
				}
				go func() {
					switch via {
					case "Submit", "Submit/CallerRuns":
						executor.Submit(outer, bg, executor.Task[int]{Group: "g", Fn: func(ctx context.Context) (int, error) { return 0, fn(ctx) }})
					case "Go":
						outer.Go(bg, "g", fn)
					default:
						outer.Do(bg, "g", fn)
					}
				}()
				// inner stops taking tasks once the call is under way.
				await(t, "inner refused new tasks once the call was under way", func() bool {
					return inner.Go(bg, "j", func(context.Context) error { return nil }) != nil
				})
				close(release)
				r := recv(t, result, how+" from the call returned")
				if r.err != nil || !r.finished {
					t.Fatalf("%s from another executor's Fn: %v, its task finished %v; want nil after it finished", how, r.err, r.finished)
				}
			})
		}
	}
}
