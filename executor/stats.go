package executor

import (
	"github.com/groupexec/groupexec/breaker"
)

// Counts are cumulative task outcomes. Every valid Submit counts in
// Submitted; every completed handle counts once in Succeeded, Failed,
// Cancelled or Rejected (invalid input included). CallerRuns counts tasks
// run by the submitter, whose outcome is also counted.
type Counts struct {
	Submitted  uint64
	Started    uint64 // tasks started under the limits
	Succeeded  uint64
	Failed     uint64
	Cancelled  uint64
	Rejected   uint64
	CallerRuns uint64
}

func (c *Counts) add(st Status) {
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
	RunningTasks      int
	Waiting           int // tasks waiting, all groups
	GlobalMaxInFlight int
	Groups            int // groups with state kept (busy, idle or shut down)
	IdleGroups        int
	// Fairness is how far the last fairness window was from the configured
	// shares (Jain's index over the groups with tasks waiting throughout it;
	// see Fairness).
	Fairness Fairness
	// ServedPermits is the permits taken by the tasks started under the
	// limits (Started counts the tasks): the sum of their weights.
	ServedPermits uint64
	Counts
}

// GroupStats is a snapshot of one group, with the same caveats as Stats.
type GroupStats struct {
	Group          string
	Running        int // permits running
	RunningTasks   int
	Waiting        int // tasks waiting
	InFlight       int // permits admitted (waiting + running)
	MaxInFlight    int
	MaxConcurrency int
	QueueThreshold int
	Share          int // the group's share of global capacity (policy.WithGroupShare)
	Shutdown       bool
	// Breaker is the state of the group's breaker (WithGroupBreaker);
	// breaker.StateClosed when there is none.
	Breaker breaker.State
	// ServedPermits is the permits taken by the group's tasks started under
	// the limits (Started counts the tasks): the sum of their weights. Over a
	// period when groups wait for global room, it grows in proportion to
	// their shares.
	ServedPermits uint64
	Counts
}

// Stats returns a snapshot of the executor.
func (ex *Executor) Stats() Stats {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	for n := ex.backlog.Front(); n != nil; n = n.Next() {
		ex.drainLocked(n.Value)
	}
	return Stats{
		Running:           ex.global.Used(),
		RunningTasks:      ex.tasks - ex.waiting,
		Waiting:           ex.waiting,
		GlobalMaxInFlight: ex.global.Limit(),
		Groups:            len(ex.groups),
		IdleGroups:        ex.idle.Len(),
		Fairness:          ex.fairnessLocked(),
		ServedPermits:     ex.served,
		Counts:            ex.counts,
	}
}

// GroupStats returns a snapshot of group, and false if the executor keeps no
// state for it (never used, evicted or reclaimed while idle).
func (ex *Executor) GroupStats(group string) (GroupStats, bool) {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	g := ex.groups[group]
	if g == nil {
		return GroupStats{}, false
	}
	ex.drainLocked(g)
	var br breaker.State
	if g.br != nil {
		br = g.br.State()
	}
	return GroupStats{
		Breaker:        br,
		Group:          g.key,
		Running:        g.conc.Used(),
		RunningTasks:   g.running,
		Waiting:        g.queued(),
		InFlight:       g.inFlight.Used(),
		MaxInFlight:    g.limits.MaxInFlight,
		MaxConcurrency: g.limits.MaxConcurrency,
		QueueThreshold: g.limits.QueueThreshold,
		Share:          g.limits.Share,
		Shutdown:       g.shutdown,
		ServedPermits:  g.served,
		Counts:         g.counts,
	}, true
}

func (ex *Executor) fairnessLocked() Fairness {
	f := ex.fair.last
	f.Windows = ex.fair.done
	return f
}
