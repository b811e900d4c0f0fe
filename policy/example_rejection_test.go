package policy_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// CallerRuns runs a task that finds no room in the submitting goroutine,
// outside every limit, before Submit returns: backpressure that slows the
// submitter to the pace the executor absorbs, instead of an error.
func ExampleWithRejectionPolicy() {
	p, err := policy.New(
		policy.WithDefaultMaxInFlight(1), // one task admitted per group
		policy.WithRejectionPolicy(policy.CallerRuns),
	)
	if err != nil {
		panic(err)
	}
	ex, err := executor.New(p)
	if err != nil {
		panic(err)
	}
	defer ex.Close()

	ctx := context.Background()
	release := make(chan struct{})
	busy, _ := executor.Submit(ex, ctx, executor.Task[string]{
		Group: "tenant-a",
		Fn:    func(context.Context) (string, error) { <-release; return "admitted", nil },
	})

	// tenant-a is full: this task runs here, and its handle is complete
	// when Submit returns.
	h, err := executor.Submit(ex, ctx, executor.Task[string]{
		Group: "tenant-a",
		Fn:    func(context.Context) (string, error) { return "ran in the caller", nil },
	})
	res, _ := h.Result()
	fmt.Println(err, res.Status, res.Value)

	close(release)
	res, _ = busy.Wait(ctx)
	fmt.Println(res.Status, res.Value, ex.Stats().CallerRuns)
	// Output:
	// <nil> Success ran in the caller
	// Success admitted 1
}

// DiscardOldest serves the newest request: a group queue at its threshold
// drops its oldest waiting task (Rejected, matching executor.ErrDisplaced)
// to take the new one, and Submit returns nil.
func ExampleWithRejectionPolicy_discardOldest() {
	p, err := policy.New(
		policy.WithDefaultQueueThreshold(1), // one task waits per group
		policy.WithRejectionPolicy(policy.DiscardOldest),
	)
	if err != nil {
		panic(err)
	}
	ex, err := executor.New(p)
	if err != nil {
		panic(err)
	}
	defer ex.Close()

	ctx := context.Background()
	started, release := make(chan struct{}), make(chan struct{})
	running, _ := executor.Submit(ex, ctx, executor.Task[string]{
		Group: "tenant-a",
		Fn:    func(context.Context) (string, error) { close(started); <-release; return "running", nil },
	})
	<-started // the group's one running place is taken (concurrency 1)

	task := func(v string) executor.Task[string] {
		return executor.Task[string]{Group: "tenant-a", ID: v, Fn: func(context.Context) (string, error) { return v, nil }}
	}
	older, _ := executor.Submit(ex, ctx, task("older"))   // waits
	newer, err := executor.Submit(ex, ctx, task("newer")) // the queue is full: older makes room
	fmt.Println(err)
	res, _ := older.Result()
	fmt.Println(res.ID, res.Status, errors.Is(res.Err, executor.ErrDisplaced))

	close(release)
	for _, h := range []*executor.Handle[string]{running, newer} {
		res, _ := h.Wait(ctx)
		fmt.Println(res.Status, res.Value)
	}
	// Output:
	// <nil>
	// older Rejected true
	// Success running
	// Success newer
}
