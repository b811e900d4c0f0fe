// Package bulkhead is a fail-fast bulkhead: it bounds how many operations are
// in flight and refuses, at once and visibly, what does not fit.
//
// An operation holds a Permit from TryAcquire or Acquire until Release, or
// runs under one with Submit. Without a queue, a full bulkhead refuses with
// ErrAtCapacity; WithQueue lets requests wait, FIFO, up to a depth and a
// maximum wait. The limit changes at runtime (SetLimit): raising it admits
// waiters at once, lowering it below in-flight drains (ErrDraining) without
// revoking a permit. Every error matches a sentinel with errors.Is and has a
// stable code (Code); every transition emits an Event with a stable code to a
// Listener and the bounded log WithEventLog keeps. RecordLatency and P99
// track a latency objective (WithLatencyTarget, WithinTarget).
//
// The permit accounting (internal/groupsem) gives "fits", "in flight" and
// "draining" the meaning they have for the executor's limits, which keep
// their counts in the executor's own structures. So that an uncontended
// TryAcquire and Release take no lock (TryAcquire on a bulkhead without a
// capability gate, Listener or event log, Release on one without a Listener
// or event log: the others go through its mutex), the bulkhead keeps its
// count of permits in flight in an atomic word of its own, which its locked
// side's groupsem.Sem observes (state.go explains the fast path and why it
// is exact).
//
// # Codes
//
// Error codes (Error.Code, e.g. "RB_ERR_AT_CAPACITY") and event codes
// (Event.Code, e.g. "RB_PERMIT_ACQUIRED") start with RB_, for "remote
// bulkhead": the bulkhead guards calls to a remote dependency, and the prefix
// tells its codes apart from any other's in logs, metrics labels and alerts
// that mix many sources. Error codes go on with ERR_. The codes are a
// contract: a code keeps its meaning and spelling, whatever the wording of
// the error message, so dashboards and audits may key on them. The Go names
// (ErrAtCapacity, EventPermitAcquired, ...) carry no prefix.
//
// # Snapshots do not admit
//
// Limit, Available, InFlight, QueueDepth and Draining are best-effort
// snapshots, not linearizable with acquires and releases: a value may be
// stale before the caller reads it. They are for logs, health pages and
// coarse monitoring. Never use them to decide admission:
//
//	// WRONG: another goroutine may take the last permit between the two
//	// lines, and TryAcquire fails anyway; or a permit frees just after
//	// Available read 0, and work is shed that would have fit.
//	if b.Available() > 0 {
//		p, err := b.TryAcquire(ctx, 1)
//		...
//	}
//
// Admission is decided only by TryAcquire, Acquire and Submit: call them and
// handle the refusal.
//
//	p, err := b.TryAcquire(ctx, 1)
//	if err != nil {
//		return err // errors.Is(err, bulkhead.ErrAtCapacity): shed the work
//	}
//	defer func() { _ = b.Release(p) }() // fails only for a permit released twice
//
// # Cancellation
//
// Cancelling a Submit handle releases its permit at once and cancels the
// function's context: capacity follows the caller's interest. A function that
// ignores its context is then no longer bounded by the bulkhead.
//
// The examples (example_test.go), run by go test, show TryAcquire and
// Release, Acquire waiting in the queue, Submit, SetLimit, WithCapability,
// WithEventLog and P99.
package bulkhead
