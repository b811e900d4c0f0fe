package redislimit

import (
	"context"
	"slices"
	"time"

	"github.com/groupexec/groupexec/internal/taskvalue"
)

// What a task can learn about its permits, to guard what it writes.
//
// A holder cancels a task's context when its lease is lost, but a task may
// not look at its context before it writes, and a process that was paused
// (SIGSTOP, a VM or container freeze, a long GC or swap stall) runs on for
// a moment after it resumes before its cancellations do. Valid and
// ValidUntil read the lease's local validity against the monotonic clock,
// which runs while a process is paused: a task that checks Valid right
// before it writes does not write on a lease its holder would no longer
// trust. No check in the process closes the gap between the check and the
// write: a pause can fall between them. Fencing closes it at the
// downstream, which refuses a write whose slot was leased again since.

// boundKey is the key of a task's bound permits: a key of a value that
// belongs to one task, which the executor's run contexts do not look up in
// the context their task was submitted with. A task given another task's
// context (a subtask, or work detached from the task's cancellation) with
// no permit of its own then finds none, rather than the other task's.
var boundKey = taskvalue.New("redislimit: a task's bound permits")

// bound is a permit bound to a task's context; outer is the one bound
// before it for the same task (the global permit, under a group one).
type bound struct {
	p     *permit
	outer *bound
}

// boundCtx is the context Bind returns: its ctx, carrying the permit.
type boundCtx struct {
	context.Context
	b bound
}

func (c *boundCtx) Value(key any) any {
	if key == any(boundKey) {
		return &c.b
	}
	return c.Context.Value(key)
}

// Fence is what a task shows a downstream so that it can refuse the writes
// of a lease that was lost. Every permit of a key is one of its slots,
// 0..limit-1, leased to at most one live lease at a time; a slot leased
// again after its lease was lost comes with a greater token. The downstream
// keeps, per limit key and slot, the greatest token it has accepted, and
// accepts a write only if Token is at least the recorded token of every
// slot in Slots, recording Token for each of them in the same atomic step
// (a transaction or a compare-and-set). A holder that lost its lease, even
// one paused that does not know it yet, is then refused as soon as the
// slot's new holder has written. With limit 1 the only slot is 0, and this
// is the usual "refuse tokens smaller than the greatest seen" rule.
type Fence struct {
	Token int64 // the lease's fencing token
	Slots []int // the task's slots: as many as its weight
}

// Fencing returns the task's fence: that of its group permit when it has
// one from a group limiter, else its global permit's. It returns false
// outside a task run under a cluster permit (a task given such a task's
// context, with no permit of its own, is outside one: it never sees
// another task's permits), and on a fallback permit (FailOpen), which has
// no lease.
func Fencing(ctx context.Context) (Fence, bool) {
	b, _ := ctx.Value(boundKey).(*bound)
	if b == nil || b.p.l == nil {
		return Fence{}, false
	}
	return Fence{Token: b.p.token, Slots: slices.Clone(b.p.slots)}, true
}

// FencingToken returns the fencing token of the lease the task's permit
// came from, and false outside a task run under a cluster permit or on a
// fallback permit (FailOpen). With both a global and a group limiter, it is
// the group lease's token (and false on a fallback group permit, even when
// the global permit has a lease).
//
// Tokens are issued per lease (a leased block of permits), from a counter
// per key in Redis: a lease taken after another for the same key has a
// greater token, and the permits of one lease share its token. With limit
// 1, a downstream that records the greatest token it has seen for the key
// and refuses smaller ones refuses a stale holder. With a limit above 1,
// several leases of the key are valid at once with different tokens, so
// that rule would refuse live ones: fence by slot instead (Fencing).
func FencingToken(ctx context.Context) (int64, bool) {
	f, ok := Fencing(ctx)
	return f.Token, ok
}

// Valid reports whether every lease the task's permits came from is still
// valid here: not lost, and its local validity (80% of the TTL from the
// last renewal sent) not yet over by the monotonic clock, which counts the
// time a paused process spent stopped. Call it right before a write that
// the cluster limit must guard: it is false after such a pause even before
// the loss has cancelled ctx. It is false outside a task run under a
// cluster permit (as Fencing), and on a fallback permit (FailOpen), which
// the cluster limit does not guard.
func Valid(ctx context.Context) bool {
	_, ok := ValidUntil(ctx)
	return ok
}

// ValidUntil returns when the task's leases stop being valid here unless
// renewed (the earliest, with a global and a group permit), and false
// where Valid is false. A renewal moves it later; a task can bound a write
// with it (context.WithDeadline), so that the write is abandoned when the
// lease may be lost. It takes no lock.
func ValidUntil(ctx context.Context) (time.Time, bool) {
	b, _ := ctx.Value(boundKey).(*bound)
	if b == nil {
		return time.Time{}, false
	}
	now := int64(time.Since(epoch))
	until := int64(-1)
	for ; b != nil; b = b.outer {
		p := b.p
		if p.l == nil || p.done.Load() || p.l.gone.Load() {
			return time.Time{}, false
		}
		v := p.l.validNs.Load()
		if now >= v {
			return time.Time{}, false
		}
		if until < 0 || v < until {
			until = v
		}
	}
	return epoch.Add(time.Duration(until)), true
}
