// Package executor runs tasks by group key (a tenant, a host, a customer)
// under three ordered limits and fails fast, visibly, when they are full.
//
// A task passes, in order: the global in-flight limit (permits running across
// all groups), its group's in-flight limit, or bulkhead (permits the group
// has admitted, waiting plus running), and its group's concurrency limit
// (permits the group has running). Permits are released in the reverse
// order. A task of weight w takes w permits at each.
//
// A task that cannot start at once waits in its group's FIFO queue holding
// nothing but its place in its own group's bulkhead: a hot group with a deep
// backlog never pins global capacity that another group could use. Waiting
// costs no goroutine of the executor's; a waiting task is its handle, about
// 150 bytes.
//
// Three ways in, one admission. Do admits work and runs it in the calling
// goroutine, as a request handler wants:
//
//	err := ex.Do(ctx, "tenant-a", func(ctx context.Context) error { return serve(ctx) })
//	if errors.Is(err, executor.ErrRejected) { /* shed: 429 */ }
//
// Submit runs it on a goroutine of the executor's and returns a handle:
//
//	p, err := policy.New(policy.WithGlobalMaxInFlight(256), policy.WithDefaultMaxConcurrency(4))
//	if err != nil { return err }
//	ex, err := executor.New(p)
//	if err != nil { return err }
//	defer ex.Close()
//	h, err := executor.Submit(ex, ctx, executor.Task[int]{Group: "tenant-a", Fn: work})
//	if err != nil { return err } // refused: errors.Is(err, executor.ErrRejected)
//	res, err := h.Wait(ctx) // res.Status: Success, Failed, Cancelled or Rejected
//	if err != nil { return err } // ctx ended first; the task goes on
//
// Executor.Go admits work nobody waits on the same way, without a handle:
// its outcome goes to Stats and the listener, and it costs less.
//
// The context the work is given, whichever way in, tells it the group it
// was submitted for: GroupFromContext(ctx).
//
// Each group guards its own state: a start that fits, a finish and the
// refusal of a full group lock only their group, and the global limit is an
// atomic. Groups share a lock only while they wait for global room, which
// then goes to them in turn (docs/admission.md).
//
// The limits can be changed at runtime (SetGlobalMaxInFlight,
// SetGroupLimits): raising one starts the waiting tasks that now fit at
// once; lowering one lets running tasks finish and starts or admits nothing
// more until use is under it. No waiting task is dropped by a change.
//
// WithGlobalLimiter and WithGroupLimiter add limits shared with other
// processes (package cluster/redislimit keeps them in Redis): a task then
// also needs a permit from the Limiter to start, and otherwise waits in its
// queue as for any limit. The Limiter answers without I/O; without one the
// executor pays a nil check.
//
// Every handle completes exactly once; a task's permits are released before
// its handle completes, so a caller that has seen a result can rely on the
// capacity being back. Fn runs at most once, and only while its permits
// are held, unless the rejection policy CallerRuns (or a rejection
// handler's Rejection.RunInCaller) runs it in the submitting goroutine,
// outside every limit; a panic in Fn is recovered into a *PanicError and
// costs the executor nothing.
//
// The examples (example_test.go), run by go test, show Executor.Do, Submit,
// Executor.Go and ExecuteAll (a request's fan-out to downstream hosts in
// example_fanout_test.go), a weighted task and one too heavy to run
// (Executor.DoWeighted), a refusal (RejectedError), a rejection handler
// that runs some refused tasks in their caller (WithRejectionHandler), a
// queue timeout on a fake clock (Submit), a cancellation (Handle.Cancel),
// GroupStats, a listener (ListenerFuncs), several listeners on one
// executor (Listeners: WithListener may be given once), the group read from
// the work's context (GroupFromContext) and a limit changed at runtime
// (Executor.SetGroupLimits).
package executor
