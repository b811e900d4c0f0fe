package executor_test

import (
	"context"
	"fmt"
	"time"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// A request fans out sub-calls, one group per downstream host so that each
// host has its own concurrency limit (and its own breaker, with
// WithGroupBreaker), on an executor of the fan-out's own: sub-calls on the
// executor that admitted the request could wait for permits the request holds.
// When the request's context ends, the sub-calls still waiting never run
// and the running ones see their context end.
func ExampleExecuteAll_fanOut() {
	p, _ := policy.New(policy.WithDefaultMaxConcurrency(2)) // two calls at a time per host
	fanout, _ := executor.New(p)
	defer fanout.Close()

	entered := make(chan struct{}, 2)
	call := func(ctx context.Context) (string, error) {
		entered <- struct{}{}
		<-ctx.Done() // a downstream call that outlasts the request
		// context.Canceled counts as Cancelled. Returned after a deadline,
		// context.DeadlineExceeded would count as Failed, against the host's
		// breaker: return context.Canceled where the request's own deadline
		// is not the host's fault.
		return "", context.Canceled
	}
	const host = "inventory.internal:443"
	tasks := make([]executor.Task[string], 5)
	for i := range tasks {
		tasks[i] = executor.Task[string]{Group: host, Fn: call}
	}

	reqCtx, requestEnds := context.WithCancel(context.Background())
	results := make(chan []executor.Result[string])
	go func() { results <- executor.ExecuteAll(fanout, reqCtx, tasks) }()
	<-entered
	<-entered // two run; three wait for the host's limit
	for s, _ := fanout.GroupStats(host); s.Waiting < 3; s, _ = fanout.GroupStats(host) {
		time.Sleep(time.Millisecond) // ExecuteAll submits them, one after the other
	}
	requestEnds()

	for _, r := range <-results {
		fmt.Println(r.Status)
	}
	fmt.Println(fanout.Stats().Started, "started") // the waiting three never ran
	// Output:
	// Cancelled
	// Cancelled
	// Cancelled
	// Cancelled
	// Cancelled
	// 2 started
}
