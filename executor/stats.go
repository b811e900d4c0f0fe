package executor

import (
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
// Started (and Stats.ServedPermits): a task is counted as it starts, and
// taken back if it then never runs, as Started says (its context found
// ended, or asking it panicked or exited the goroutine).
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
// the pass runs is counted once: if the pass read it first, by what the
// pass read, the totals' counts of it being left out (totals.fold);
// otherwise by the totals alone, the pass finding it dropped. So each
// cumulative count sums, over every group there has been, the count it
// was dropped with, or one read during the pass, never an older reading:
// a snapshot never shows such a count lower than one taken before it
// (Started aside: TaskCounts). Passes take turns, so that a group names
// the one that read it.
func (ex *Executor) Stats() Stats {
	s := Stats{GlobalMaxInFlight: ex.global.max(), Fairness: ex.fairness()}
	t := &ex.totals
	t.passMu.Lock()
	defer t.passMu.Unlock()
	pass := t.beginPass()
	var counts TaskCounts
	var served uint64
	ex.groups.each(func(g *group) bool {
		g.mu.Lock()
		if !g.dead {
			s.Groups++
			s.Running += g.running
			s.RunningTasks += g.runningTasks
			lane := g.laneLen()
			s.Waiting += g.queued() + lane
			counts.Submitted += uint64(lane)
			if g.idle() {
				s.IdleGroups++
			}
			counts.addAll(&g.counts)
			served += g.served
			g.statsPass = pass
		}
		g.mu.Unlock()
		return true
	})
	s.TaskCounts, s.ServedPermits = t.endPass(&counts, served)
	return s
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
	// pass numbers the Stats pass under way, if passing: the groups it has
	// read say so (group.statsPass). read and readServed are the counts
	// folded in meanwhile of groups it had read, which it counted already.
	pass       uint64
	passing    bool
	read       TaskCounts
	readServed uint64
	passMu     sync.Mutex // held by a Stats pass, from its beginning to its end
}

// beginPass begins a Stats pass (passMu held) and returns its number.
func (t *totals) beginPass() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pass++
	t.passing = true
	t.read, t.readServed = TaskCounts{}, 0
	return t.pass
}

// endPass ends the Stats pass under way, which read counts and served
// from the groups it found, and returns the counts of all groups: those
// plus the totals now, less the totals' counts of the groups it read.
func (t *totals) endPass(counts *TaskCounts, served uint64) (TaskCounts, uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.passing = false
	c := t.counts
	c.addAll(counts)
	c.subAll(&t.read)
	return c, t.served + served - t.readServed
}

// fold moves g's counts into t, and drops g (drop), as one step for Stats,
// with g locked: a pass that finds g dropped finds its counts here, and
// one that has read them already leaves them out of these.
func (t *totals) fold(g *group, drop func()) {
	t.mu.Lock()
	t.counts.addAll(&g.counts)
	t.served += g.served
	if t.passing && g.statsPass == t.pass {
		t.read.addAll(&g.counts)
		t.readServed += g.served
	}
	drop()
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

func (c *TaskCounts) subAll(o *TaskCounts) {
	c.Submitted -= o.Submitted
	c.Started -= o.Started
	c.Succeeded -= o.Succeeded
	c.Failed -= o.Failed
	c.Cancelled -= o.Cancelled
	c.Rejected -= o.Rejected
	c.CallerRuns -= o.CallerRuns
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
