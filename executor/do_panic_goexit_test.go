package executor_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// A panic in Do's fn goes on up Do's caller's stack, as Do's doc says,
// even when a callback that Do runs as it records the task's failure exits
// the goroutine (runtime.Goexit): the listener told the task completed, or
// a group breaker's OnStateChange as that failure trips it. Go drops a
// panic when a deferred call exits its goroutine, and Do records the
// failure of a fn that panicked in a deferred call, the panic still under
// way. Likewise for a fn that CallerRuns runs in its caller.
func TestDoPanicSurvivesCallbackGoexit(t *testing.T) {
	exit := func(executor.Event) { runtime.Goexit() }
	for _, c := range []struct {
		name  string
		popts []policy.Option
		eopts []executor.Option
		hold  bool // a task holds the group's one in-flight slot: Do's fn runs in its caller
	}{
		{"listener Completed", nil, []executor.Option{executor.WithListener(executor.ListenerFuncs{Completed: exit})}, false},
		{"breaker OnStateChange", nil, []executor.Option{executor.WithGroupBreaker(breaker.Settings{
			ReadyToTrip:   func(breaker.Counts) bool { return true },
			OnStateChange: func(string, breaker.State, breaker.State) { runtime.Goexit() },
		})}, false},
		{"CallerRuns, listener Completed",
			[]policy.Option{policy.WithDefaultMaxInFlight(1), policy.WithRejectionPolicy(policy.CallerRuns)},
			[]executor.Option{executor.WithListener(executor.ListenerFuncs{Completed: func(e executor.Event) {
				if e.ID == "" && e.Status == executor.Failed {
					runtime.Goexit()
				}
			}})}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ex := newExec(t, c.popts, c.eopts...)
			release := make(chan struct{})
			var held *executor.Handle[int]
			if c.hold {
				held = submit(t, ex, executor.Task[int]{Group: "g", ID: "held", Fn: func(context.Context) (int, error) {
					<-release
					return 0, nil
				}})
			}
			got := make(chan any, 1)
			go func() {
				defer func() { got <- recover() }()
				_ = ex.Do(bg, "g", func(context.Context) error { panic("fn") })
			}()
			r := <-got
			close(release)
			if held != nil {
				wait(t, held)
			}
			if r != "fn" {
				t.Fatalf("Do's caller recovered %v, want fn's panic", r)
			}
		})
	}
}
