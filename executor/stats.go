package executor

import (
	"slices"
	"sync"
	"time"

	"github.com/groupexec/groupexec/breaker"
)

// TaskCounts are cumulative task outcomes. Every valid Submit counts in
// Submitted; every completed handle counts once in Succeeded, Failed,
// Cancelled or Rejected (invalid input included). CallerRuns counts tasks
// run by the submitter, whose outcome is also counted.
//
// The counts never go down from one Stats snapshot to a later one, but
// Started (and Stats.ServedPermits): a task that waited is counted as it
// starts, and taken back once its worker finds, before running it, that
// its context had ended.
type TaskCounts struct {
	Submitted  uint64 // tasks with valid input, admitted or not
	Started    uint64 // tasks started under the limits; not one whose context had ended by then (counted Cancelled), nor one whose context panicked or exited the goroutine as it was asked then (counted Failed): those never run
	Succeeded  uint64 // handles completed Success
	Failed     uint64 // handles completed Failed: an error, a panic or runtime.Goexit
	Cancelled  uint64 // handles completed Cancelled
	Rejected   uint64 // handles completed Rejected, invalid input included
	CallerRuns uint64 // refused tasks run in the submitting goroutine (CallerRuns, Rejection.RunInCaller)
}

func (c *TaskCounts) add(st Status) {
	switch st {
	case Success:
		c.Succeeded++
	case Failed:
		c.Failed++
	case Cancelled:
		c.Cancelled++
	case Rejected:
		c.Rejected++
	}
}

// Stats is a snapshot of the executor. It is best-effort and not
// linearizable: it is stale as soon as it returns, and it is not an
// admission check (Submit alone decides admission).
type Stats struct {
	Running           int // permits running, all groups
	RunningTasks      int // tasks running, all groups
	Waiting           int // tasks waiting, all groups
	GlobalMaxInFlight int // the global in-flight limit in force (SetGlobalMaxInFlight); policy.Unlimited for none
	Groups            int // groups with state kept (busy, idle or shut down)
	IdleGroups        int // of Groups, those with no task waiting or running
	// Fairness is how far the last fairness window was from the configured
	// shares (Jain's index over the groups with tasks waiting throughout it;
	// see Fairness).
	Fairness Fairness
	// ServedPermits is the permits taken by the tasks started under the
	// limits (Started counts the tasks): the sum of their weights.
	ServedPermits uint64
	TaskCounts
}

// GroupStats is a snapshot of one group, with the same caveats as Stats.
type GroupStats struct {
	Group          string // the group's key
	Running        int    // permits running
	RunningTasks   int    // tasks running
	Waiting        int    // tasks waiting
	InFlight       int    // permits admitted (waiting + running)
	MaxInFlight    int    // the group's in-flight limit in force (its bulkhead)
	MaxConcurrency int    // the group's concurrency limit in force
	QueueThreshold int    // the group's queue threshold in force, in tasks
	Share          int    // the group's share of global capacity (policy.WithGroupShare)
	Shutdown       bool   // ShutdownGroup was called for it: its new tasks are refused with ErrGroupShutdown
	// Breaker is the state of the group's breaker (WithGroupBreaker);
	// breaker.StateClosed when there is none.
	Breaker breaker.State
	// BreakerRemainingDelay is how long the group's breaker stays open
	// before it lets a probe through (breaker's RemainingDelay, on its
	// Settings.Clock): 0 unless it is open. A server refusing a task of the
	// group with breaker.ErrOpenState tells its client to come back after
	// it (Retry-After) rather than be refused again.
	BreakerRemainingDelay time.Duration
	// ServedPermits is the permits taken by the group's tasks started under
	// the limits (Started counts the tasks): the sum of their weights. Over a
	// period when groups wait for global room, it grows in proportion to
	// their shares.
	ServedPermits uint64
	// TaskCounts are the group's tasks that reached it. A task refused
	// before its group was looked up or made counts in Stats alone: one
	// with invalid input or a context that had ended by the call, or,
	// for a group without state, one refused because the executor was
	// shut down or a limit resolver failed. The listener hears of it under
	// its group, so a metrics exporter's per-group counts may run above
	// these.
	TaskCounts
}

// Stats returns a snapshot of the executor. It sums the groups' own
// counters (a pass over the groups, each locked in turn) and the counts of
// groups no longer kept, read once the pass is over. A group dropped while
// the pass runs is counted once: after it was visited, by the counts it was
// folded in with, which the pass, registered with the totals, leaves out
// (statsPass); before, by those alone, as the pass finds it dropped. So
// each cumulative count is the sum, over every group there has been, of a
// reading of its count no older than the pass's start, and two snapshots
// taken one after the other never show such a count lower in the second
// (but Started: TaskCounts).
func (ex *Executor) Stats() Stats {
	s := Stats{GlobalMaxInFlight: ex.global.max(), Fairness: ex.fairness()}
	t := &ex.totals
	p := t.beginPass()
	seen := make([]seenGroup, 0, ex.groups.n.Load())
	ex.groups.each(func(g *group) bool {
		g.mu.Lock()
		if !g.dead {
			s.Running += g.running
			s.RunningTasks += g.runningTasks
			lane := g.laneLen()
			s.Waiting += g.queued() + lane
			v := seenGroup{g: g, counts: g.counts, served: g.served, idle: g.idle()}
			v.counts.Submitted += uint64(lane)
			seen = append(seen, v)
		}
		g.mu.Unlock()
		return true
	})
	s.TaskCounts, s.ServedPermits = t.endPass(p, seen, &s)
	return s
}

// seenGroup is what a Stats pass read of a group.
type seenGroup struct {
	g      *group
	counts TaskCounts
	served uint64
	idle   bool
}

// statsPass is a Stats pass under way: the groups dropped since it began,
// whose counts the totals have, folded in (fold).
type statsPass struct {
	folded []*group
}

// beginPass registers a Stats pass, for fold to tell it of the groups it
// drops meanwhile.
func (t *totals) beginPass() *statsPass {
	p := new(statsPass)
	t.mu.Lock()
	t.passes = append(t.passes, p)
	t.mu.Unlock()
	return p
}

// endPass ends pass p, which read the groups seen, and returns the counts
// of all groups: the totals now, and the counts seen of the groups not
// folded into them since. It counts those groups in s (Groups,
// IdleGroups): the others are no longer kept. The totals' mutex, which
// every drop takes, is held only to read them and unregister p.
func (t *totals) endPass(p *statsPass, seen []seenGroup, s *Stats) (TaskCounts, uint64) {
	t.mu.Lock()
	t.passes = slices.DeleteFunc(t.passes, func(q *statsPass) bool { return q == p })
	if len(t.passes) == 0 {
		t.passes = nil // lets the collector have the passes' lists
	}
	counts, served := t.counts, t.served
	t.mu.Unlock()
	var folded map[*group]bool // p.folded is p's alone now
	if len(p.folded) > 0 {
		folded = make(map[*group]bool, len(p.folded))
		for _, g := range p.folded {
			folded[g] = true
		}
	}
	for i := range seen {
		v := &seen[i]
		if folded[v.g] {
			continue // counted in the totals, with the counts it was dropped with
		}
		counts.addAll(&v.counts)
		served += v.served
		s.Groups++
		if v.idle {
			s.IdleGroups++
		}
	}
	return counts, served
}

// BreakerRemainingDelay returns how long the breaker of the named group
// stays open before it lets a probe through (GroupStats' field of the same
// name): 0 if the group has no breaker, its breaker is not open, or the
// executor keeps no state for it. It is for a server answering a refusal
// with breaker.ErrOpenState (Retry-After), on every such refusal: it takes
// no lock, and reads the clock only while the breaker is open.
func (ex *Executor) BreakerRemainingDelay(group string) time.Duration {
	if g := ex.groups.load(group); g != nil && g.br != nil { // br is set before g is shared, and never changes
		return g.br.RemainingDelay()
	}
	return 0
}

// GroupStats returns a snapshot of group, and false if the executor keeps no
// state for it (never used, evicted or reclaimed while idle).
func (ex *Executor) GroupStats(group string) (GroupStats, bool) {
	g := ex.groups.load(group)
	if g == nil {
		return GroupStats{}, false
	}
	g.mu.Lock()
	if g.dead {
		g.mu.Unlock()
		return GroupStats{}, false
	}
	var br breaker.State
	if g.br != nil {
		br = g.br.State()
	}
	lane := g.laneLen() // waiting, and submitted (lane.go)
	counts := g.counts
	counts.Submitted += uint64(lane)
	st := GroupStats{
		Breaker:        br,
		Group:          g.key,
		Running:        g.running,
		RunningTasks:   g.runningTasks,
		Waiting:        g.queued() + lane,
		InFlight:       g.inFlight + lane,
		MaxInFlight:    g.limits.MaxInFlight,
		MaxConcurrency: g.limits.MaxConcurrency,
		QueueThreshold: g.limits.QueueThreshold,
		Share:          g.limits.Share,
		Shutdown:       g.shutdown,
		ServedPermits:  g.served,
		TaskCounts:     counts,
	}
	g.mu.Unlock()
	if g.br != nil && br == breaker.StateOpen {
		// Outside the lock: it reads the breaker's clock, user code. g.br
		// is set when g is made and never changes.
		st.BreakerRemainingDelay = g.br.RemainingDelay()
	}
	return st, true
}

// totals are the counts not kept by a live group: those of groups dropped
// (folded in as they go), and of tasks refused before a group was found.
type totals struct {
	mu     sync.Mutex
	counts TaskCounts
	served uint64
	// passes are the Stats passes under way, each told of the groups
	// folded in meanwhile; nil while there are none.
	passes []*statsPass
}

// fold moves g's counts into t, and drops g (drop), as one step for Stats:
// a pass that finds g dropped finds its counts in t. g is locked.
func (t *totals) fold(g *group, drop func()) {
	t.mu.Lock()
	t.counts.addAll(&g.counts)
	t.served += g.served
	drop()
	for _, p := range t.passes {
		p.folded = append(p.folded, g)
	}
	t.mu.Unlock()
}

// countRefusal counts a task refused before a group was found: as
// submitted if its input was valid, and as st unless st is 0 (its
// outcome is counted once decided, by countLate).
func (t *totals) countRefusal(st Status, submitted bool) {
	t.mu.Lock()
	if submitted {
		t.counts.Submitted++
	}
	t.counts.add(st)
	t.mu.Unlock()
}

// countLate counts an outcome decided after its group was dropped.
func (t *totals) countLate(st Status, callerRuns bool) {
	t.mu.Lock()
	if callerRuns {
		t.counts.CallerRuns++
	}
	t.counts.add(st)
	t.mu.Unlock()
}

func (t *totals) snapshot() (TaskCounts, uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.counts, t.served
}

func (c *TaskCounts) addAll(o *TaskCounts) {
	c.Submitted += o.Submitted
	c.Started += o.Started
	c.Succeeded += o.Succeeded
	c.Failed += o.Failed
	c.Cancelled += o.Cancelled
	c.Rejected += o.Rejected
	c.CallerRuns += o.CallerRuns
}
