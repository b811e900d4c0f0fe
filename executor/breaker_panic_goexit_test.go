package executor_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/executor"
)

// A group breaker's Clock that panics as a task is admitted makes the
// call panic (TestBreakerExitAtAdmissionIsToldToTheListener); a listener
// told of that task's refusal that exits the goroutine (runtime.Goexit)
// does not swallow the panic, which Go would drop: the caller gets it.
func TestBreakerClockPanicAtAdmissionSurvivesListenerGoexit(t *testing.T) {
	for _, via := range []string{"Submit", "Do", "Go"} {
		t.Run(via, func(t *testing.T) {
			clk := &panickyClock{Fake: fakeClock()}
			ex := newExec(t, nil, executor.WithGroupBreaker(breaker.Settings{
				Clock: clk, Timeout: time.Minute,
				ReadyToTrip: func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 1 },
			}), executor.WithListener(executor.ListenerFuncs{
				Rejected: func(executor.Event) { runtime.Goexit() },
			}))
			wait(t, submit(t, ex, executor.Task[int]{Group: "g", Fn: failing})) // open
			clk.Advance(time.Minute)
			clk.panics.Store(true)
			got := make(chan any, 1)
			go func() {
				defer func() { got <- recover() }()
				switch via {
				case "Submit":
					executor.Submit(ex, bg, executor.Task[int]{Group: "g", Fn: succeeding})
				case "Do":
					ex.Do(bg, "g", func(context.Context) error { return nil })
				default:
					ex.Go(bg, "g", func(context.Context) error { return nil })
				}
			}()
			if r := <-got; r != "clock bug" {
				t.Fatalf("the caller recovered %v, want the clock's panic", r)
			}
			clk.panics.Store(false)
			if s := ex.Stats(); s.Rejected != 1 {
				t.Fatalf("%+v: want the refused task counted Rejected", s.TaskCounts)
			}
		})
	}
}
