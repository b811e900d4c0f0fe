package executor_test

import (
	"fmt"
	"testing"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/executor"
)

// WithMaxIdleGroups passes over up to 8 idle groups whose breakers are
// tripped for one whose breaker is closed: with 8 of them idle the
// longest, the closed one behind them is reclaimed, and they are kept.
func TestIdleReclamationPassesOverEightTrippedBreakers(t *testing.T) {
	const tripped = 8
	const maxIdle = tripped + 1
	ex := newExec(t, nil, executor.WithMaxIdleGroups(maxIdle), executor.WithGroupBreaker(breaker.Settings{
		Clock: fakeClock(), ReadyToTrip: func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 1 },
	}))
	// More groups than maxIdle first, so that the list is in use and the
	// groups after these are listed in the order they go idle.
	for i := range maxIdle + 1 {
		wait(t, submit(t, ex, executor.Task[int]{Group: fmt.Sprint("early-", i), Fn: succeeding}))
	}
	for i := range tripped {
		wait(t, submit(t, ex, executor.Task[int]{Group: fmt.Sprint("open-", i), Fn: failing}))
	}
	wait(t, submit(t, ex, executor.Task[int]{Group: "closed", Fn: succeeding}))
	for i := range tripped {
		if s := groupStats(t, ex, fmt.Sprint("open-", i)); s.Breaker != breaker.StateOpen {
			t.Fatalf("open-%d: breaker %v, want open", i, s.Breaker)
		}
	}
	groupStats(t, ex, "closed") // the list is now the 8 tripped, then closed
	wait(t, submit(t, ex, executor.Task[int]{Group: "new", Fn: succeeding}))
	if _, ok := ex.GroupStats("closed"); ok {
		t.Error("the group with a closed breaker behind 8 tripped ones was kept")
	}
	for i := range tripped {
		if _, ok := ex.GroupStats(fmt.Sprint("open-", i)); !ok {
			t.Errorf("open-%d, one of %d tripped breakers idle the longest, was reclaimed", i, tripped)
		}
	}
}
