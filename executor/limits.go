package executor

import (
	"fmt"

	"github.com/groupexec/groupexec/internal/clip"
	"github.com/groupexec/groupexec/policy"
)

// Runtime limit changes. A limit change keeps the permits in use, so it
// needs no draining machinery of its own: after raising, the dispatcher
// runs and starts what now fits; after lowering, admission and starts
// refuse until enough permits are released, so running tasks finish,
// nothing new starts (or is admitted, for the bulkhead and the queue
// threshold) until use is under the new limit, and no admitted task is
// evicted, rejected or lost.
//
// A waiting task heavier than a lowered limit it must still pass (its
// group's concurrency limit or the global limit) cannot start until the
// limit is raised again. It is never dropped: it keeps waiting, subject to
// its context, Cancel and the queue timeout. Such a group is kept out of
// the dispatcher's ready list (wantsGlobalLocked), so its head never holds
// a deficit round robin turn it cannot use and never delays other groups.

// SetGlobalMaxInFlight changes the global in-flight limit (the permits
// running across all groups) to n, at once. n must be >= 1 or
// policy.Unlimited; otherwise it returns an error matching
// policy.ErrInvalidOption (an *policy.OptionError naming GlobalMaxInFlight
// and n) and changes nothing.
//
// Raising the limit starts the waiting tasks that now fit before it returns.
// Lowering it below the permits running lets the running tasks finish and
// starts no task until the permits in use are under the new limit. Waiting
// tasks are never dropped by a change: a waiting task heavier than the new
// limit waits until the limit is raised again, or its wait ends (Cancel,
// Submit's context, the queue timeout, a shutdown), while lighter tasks of
// other groups go on starting. A new task heavier than the limit is refused
// with ErrTooHeavy.
//
// The change costs one pass over the groups. It does not
// change Policy(); Stats reports the limit in force. Once Shutdown or Close
// has been called it returns an error matching ErrShutdown and changes
// nothing.
func (ex *Executor) SetGlobalMaxInFlight(n int) error {
	if n < 1 {
		return fmt.Errorf("executor: SetGlobalMaxInFlight: %w",
			&policy.OptionError{Option: "GlobalMaxInFlight", Value: n, Reason: "a limit must be >= 1 (policy.Unlimited for none)"})
	}
	if ex.stateNow() != open {
		return fmt.Errorf("executor: SetGlobalMaxInFlight(%d): %w", n, ErrShutdown)
	}
	// Which heads fit under the global limit at all changes: every group
	// with a task waiting is put where its state now says, then the room
	// is dispatched, all under the dispatcher's mutex.
	var b batch
	d := &ex.disp
	d.mu.Lock()
	if ex.global.limit.Swap(int64(n)) == int64(n) {
		d.mu.Unlock()
		return nil
	}
	ex.groups.each(func(g *group) bool {
		g.mu.Lock()
		if g.queued() > 0 {
			ex.placeLocked(g)
		}
		g.mu.Unlock()
		return true
	})
	ex.dispatchLocked(&b)
	d.mu.Unlock()
	ex.afterUnlock(&b)
	return nil
}

// SetGroupLimits sets group's limits to l. If the executor keeps state for
// the group, l applies at once; otherwise (never used, or reclaimed while
// idle) it applies when the group is next used. l replaces the policy's
// limits for the group (its per-group values and resolvers, which are no
// longer called for it) until ResetGroupLimits: it outlives the group's
// state, through idle reclamation and EvictGroup. The executor keeps one
// entry per group given limits this way.
//
// l is the complete set of limits, not a patch: every field is used, and
// zero is a value, not "unchanged" (a QueueThreshold of 0 means a task that
// cannot start at once is refused). To change one field, start from the
// group's current limits (GroupStats, or Policy().Group for a group with no
// state). An invalid l (see policy.GroupLimits.Validate) or an empty group
// key returns an error matching policy.ErrInvalidOption that names the field
// and value, and changes nothing.
//
// Raising a limit starts the group's waiting tasks that now fit before it
// returns. Lowering one never evicts, rejects or cancels a task already
// admitted: running tasks finish, and nothing new is admitted (MaxInFlight,
// QueueThreshold; Submit refuses with the limit named) or started
// (MaxConcurrency) until the group's use is under the new limit. Under
// policy.DiscardOldest, a group over a lowered limit displaces nothing: it
// refuses as under policy.Discard until under. A waiting task heavier than a
// lowered MaxConcurrency waits, holding its group's queue (FIFO), until the
// limit is raised again or its wait ends; other groups are not delayed.
// A changed Share takes effect at once: a turn under way keeps at most one
// new share of credit, and a debt is cut to less than one task's weight
// under the new concurrency limit.
//
// A group shut down with ShutdownGroup still refuses new tasks, but its
// waiting tasks start under the new limits, which can speed its drain.
// Once Shutdown or Close has been called it returns an error matching
// ErrShutdown and changes nothing.
func (ex *Executor) SetGroupLimits(group string, l policy.GroupLimits) error {
	if err := validGroupKey(group); err != nil {
		return fmt.Errorf("executor: SetGroupLimits: %w", err)
	}
	if err := l.Validate(); err != nil {
		return fmt.Errorf("executor: SetGroupLimits(%s): %w", clip.Quote(group), err)
	}
	if ex.stateNow() != open {
		return fmt.Errorf("executor: SetGroupLimits(%s): %w", clip.Quote(group), ErrShutdown)
	}
	ex.overMu.Lock()
	if ex.overrides == nil {
		ex.overrides = make(map[string]policy.GroupLimits)
	}
	ex.overrides[group] = l
	g := ex.groups.load(group) // a group made later reads the override
	ex.overMu.Unlock()
	if testHookOverridden != nil {
		testHookOverridden()
	}
	if g != nil {
		ex.setLimits(g, l, false)
	}
	return nil
}

// ResetGroupLimits drops the limits SetGroupLimits gave group, so that the
// policy's limits apply again. If the executor keeps state for the group,
// the policy's limits are resolved afresh (its resolvers are called, outside
// every lock, as after EvictGroup) and applied at once, with the same drain
// semantics as SetGroupLimits: in particular a waiting task heavier than a
// limit the reset lowers waits, holding its group's queue, until the limit
// is raised again or its wait ends (Cancel, its context, the queue
// timeout). It does nothing for a group without such limits. A resolver's
// invalid answer is returned, matching policy.ErrInvalidOption, and changes
// nothing; so is an empty group key. Once Shutdown or Close has been
// called it returns an error matching ErrShutdown and changes nothing.
func (ex *Executor) ResetGroupLimits(group string) error {
	if err := validGroupKey(group); err != nil {
		return fmt.Errorf("executor: ResetGroupLimits: %w", err)
	}
	if ex.stateNow() != open {
		return fmt.Errorf("executor: ResetGroupLimits(%s): %w", clip.Quote(group), ErrShutdown)
	}
	ex.overMu.RLock()
	_, set := ex.overrides[group]
	ex.overMu.RUnlock()
	if !set {
		return nil
	}
	// The resolvers are user code: call them outside every lock. A
	// SetGroupLimits meanwhile is overridden, as if it had come first.
	l, err := ex.pol.Group(group)
	if err != nil {
		return fmt.Errorf("executor: ResetGroupLimits(%s): %w", clip.Quote(group), err)
	}
	if ex.stateNow() != open {
		return fmt.Errorf("executor: ResetGroupLimits(%s): %w", clip.Quote(group), ErrShutdown)
	}
	ex.overMu.Lock()
	delete(ex.overrides, group)
	g := ex.groups.load(group)
	ex.overMu.Unlock()
	if testHookOverridden != nil {
		testHookOverridden()
	}
	if g != nil {
		ex.setLimits(g, l, true)
	}
	return nil
}

// testHookOverridden, when set by a test, runs in SetGroupLimits and
// ResetGroupLimits between changing the override and applying it.
var testHookOverridden func()

func validGroupKey(group string) error {
	if group == "" {
		return &policy.OptionError{Option: "group", Value: `""`, Reason: "the group key must not be empty"}
	}
	return nil
}

// setLimits applies l to g's state and starts what now fits. It takes the
// dispatcher's mutex, which guards g's deficit. l is SetGroupLimits' new
// override, or, with reset, the policy's limits ResetGroupLimits resolved.
//
// Concurrent changes for one key take effect in the order their overrides
// were written, whatever the order in which they reach g: the override in
// force is read again under g's mutex (the lock order: a group's, then
// overMu, which is never held while waiting for a group's or the
// dispatcher's), and applied if there is one. With none, a reset applies
// l, and a SetGroupLimits whose override a reset has dropped since applies
// nothing: the reset applies the policy's limits.
func (ex *Executor) setLimits(g *group, l policy.GroupLimits, reset bool) {
	var b batch
	d := &ex.disp
	d.mu.Lock()
	g.mu.Lock()
	ex.overMu.RLock()
	o, set := ex.overrides[g.key]
	ex.overMu.RUnlock()
	if set {
		l = o
	}
	if !g.dead && (set || reset) {
		ex.closeLaneLocked(g) // it reopens if the new limits let it
		if l.Share != g.limits.Share {
			// A turn under way goes on with at most one new share of credit.
			g.deficit = min(g.deficit, l.Share)
		}
		// A debt stays under one task's weight, which the concurrency limit
		// bounds: so a lowered limit cannot leave a group out for longer than
		// its own tasks could have made it.
		g.deficit = max(g.deficit, 1-l.MaxConcurrency)
		g.limits = l
		ex.placeLocked(g)
	}
	ex.endLocked(g, &b)
	g.mu.Unlock()
	ex.dispatchLocked(&b)
	d.mu.Unlock()
	ex.afterUnlock(&b)
}
