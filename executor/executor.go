package executor

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/internal/groupsem"
	"github.com/groupexec/groupexec/internal/queue"
	"github.com/groupexec/groupexec/policy"
)

type execState uint8

const (
	open execState = iota
	shuttingDown
	closed
)

// Executor runs tasks by group under a policy's limits. It is safe for
// concurrent use. Create it with New; release it with Shutdown or Close.
type Executor struct {
	pol     *policy.Policy
	clk     clock.Clock
	realClk bool // clk is clock.Real: one monotonic read per timing
	// untimedGo: tasks started with Go need no clock (go.go): there is
	// neither a listener nor a queue timeout.
	untimedGo bool
	epoch     time.Time
	timeout   time.Duration
	listener  Listener
	handler   RejectionHandler
	spawn     func(func())
	maxIdle   int
	breaker   *breaker.Settings // per-group breakers, when set
	cluster   *clusterLimits    // cluster limiters (cluster.go), nil when none
	lanes     bool              // lanes may open (lane.go)
	light     bool              // Go may admit light tasks (go.go)

	// index mirrors groups for Submit's lane, which reads it without the
	// lock (index.go).
	index atomic.Pointer[groupIndex]
	// hint is the group whose lane opened last, which Submit tries before
	// the index: a compare instead of a hash, when one group takes most
	// tasks. A stale hint is as harmless as a stale index entry.
	hint atomic.Pointer[group]

	spare spares // Go tasks for reuse, Go's side (recycle.go)

	// workers counts the goroutines running tasks; Close waits for it.
	workers sync.WaitGroup

	// gate lets finishing workers that find mu held onto it one at a time
	// (worker.go finish); nothing else takes it, and nothing is held while
	// taking it.
	gate sync.Mutex

	mu          sync.Mutex
	state       execState
	free        []*goTask    // Go tasks for reuse, freed since the last collection (recycle.go)
	old         []*goTask    // and freed before it
	aging       bool         // a collection will age free and old
	global      groupsem.Sem // running permits, all groups
	waiting     int          // waiting tasks, all groups
	tasks       int          // admitted tasks (waiting + running), all groups
	groups      map[string]*group
	ready       queue.List[*group]  // groups whose head waits only for global room, in turn
	turn        *group              // the group whose deficit-round-robin turn is under way, or nil
	backlog     queue.List[*group]  // groups with tasks waiting
	fair        fairness            // the fairness window (fair.go)
	idle        queue.List[*group]  // idle groups, least recently idle first
	drainWaits  []chan struct{}     // Shutdown calls waiting for the executor to drain
	drainGroups map[*group]struct{} // groups with ShutdownGroup calls waiting

	// overrides are the limits SetGroupLimits gave groups. They are
	// configuration, not state: they outlive a group's state (idle
	// reclamation, EvictGroup) and are consulted, before the policy, when
	// it is created again.
	overrides map[string]policy.GroupLimits

	// unsettled counts tasks whose admission has ended (releaseLocked) but
	// whose handle has not yet completed; drainWanted is set while a
	// Shutdown or ShutdownGroup waits (drain.go).
	unsettled   atomic.Int64
	drainWanted atomic.Bool
	parked      []worker         // idle workers, most recently parked last
	runq        queue.Ring[*job] // started tasks not yet on a goroutine

	// returned counts workers whose task has returned and whose user
	// callbacks that precede the lock (breaker OnStateChange) are done, and
	// finished (under the lock) those of them that have taken the lock since:
	// the difference is the workers about to take the lock and pop the run
	// queue (worker.go settle). Two counters, not one that finish would
	// decrement, so that a task pays for one atomic write, not two.
	returned atomic.Uint64
	finished uint64
	// served sits with finished, on the cache line a task's finish
	// writes anyway, not past counts on a line of its own: on two cores
	// ~5% of a tiny task (benchmarks/README.md, session 19).
	served uint64 // permits started
	counts Counts

	laneAdmitted  uint64 // tasks admitted through lanes, counted when moved to a queue (tests)
	lightAdmitted uint64 // of them light tasks (tests)
}

// New returns an Executor enforcing p.
func New(p *policy.Policy, opts ...Option) (*Executor, error) {
	if p == nil {
		return nil, errors.New("executor: New(nil): a *policy.Policy is required (policy.New() gives the defaults)")
	}
	ex := &Executor{
		pol:     p,
		clk:     clock.Real,
		timeout: p.QueueTimeout(),
		maxIdle: DefaultMaxIdleGroups,
		global:  groupsem.New(p.GlobalMaxInFlight()),
		groups:  make(map[string]*group),
	}
	ex.fair.reset(0)
	ex.index.Store(&groupIndex{slots: make([]atomic.Pointer[group], minIndexSlots)})
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("executor: New: nil Option")
		}
		if err := o.apply(ex); err != nil {
			return nil, err
		}
	}
	if ex.cluster != nil {
		if err := ex.cluster.attach(ex); err != nil {
			return nil, err
		}
	}
	ex.lanes = ex.lanesAllowed()
	ex.light = ex.lanes && ex.listener == nil
	ex.epoch = ex.clk.Now()
	ex.realClk = ex.clk == clock.Real
	ex.untimedGo = ex.listener == nil && ex.timeout == 0
	return ex, nil
}

// Policy returns the policy the executor was created with. Limits changed
// at runtime (SetGlobalMaxInFlight, SetGroupLimits) do not change it; Stats
// and GroupStats report the limits in force.
func (ex *Executor) Policy() *policy.Policy { return ex.pol }

// since returns the clock's time as a duration since the executor's epoch.
func (ex *Executor) since() time.Duration {
	if ex.realClk {
		return time.Since(ex.epoch) // reads only the monotonic clock
	}
	return ex.clk.Now().Sub(ex.epoch)
}
