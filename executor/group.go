package executor

import (
	"sync"
	"sync/atomic"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/internal/groupsem"
	"github.com/groupexec/groupexec/internal/queue"
	"github.com/groupexec/groupexec/policy"
)

// group is one group key's state. Every field but lane is guarded by the
// executor's mutex.
type group struct {
	ex       *Executor
	key      string
	limits   policy.GroupLimits
	inFlight groupsem.Sem // the bulkhead: permits admitted (waiting + running)
	conc     groupsem.Sem // permits running
	waiting  jobList
	running  int // tasks started and not yet finished

	readyNode   queue.Node[*group] // in ex.ready
	idleNode    queue.Node[*group] // in ex.idle
	backlogNode queue.Node[*group] // in ex.backlog: the group has tasks waiting

	// Deficit round robin (dispatch.go) and the fairness window (fair.go).
	deficit    int    // permits of credit for the current or next turn
	backlogWin uint64 // the window in which the group's queue last became non-empty
	winID      uint64 // the window winServed counts
	winServed  int    // permits started in window winID

	// clusterWait is set while the group's head waits for the group
	// limiter's notify (cluster.go): the group is out of ex.ready meanwhile.
	clusterWait bool

	br      *breaker.CircuitBreaker // nil unless WithGroupBreaker
	pending int                     // Submits taking a breaker ticket with the lock released

	timer      clock.Timer // the queue-timeout timer, armed for the head
	timerSeq   uint64      // counts timers armed, to tell a stale one
	shutdown   bool
	evict      bool // evict as soon as idle
	drainWaits []chan struct{}
	unsettled  atomic.Int64 // as Executor.unsettled, for this group
	counts     Counts
	served     uint64 // permits started

	lane    lane       // the way in without the executor's lock (lane.go)
	light   lightQueue // light tasks (go.go), behind waiting
	laneBuf []goFn     // the lane's next buffer of light tasks, empty (lane.take)

	// The group's running tasks are counted, not listed: their contexts
	// hear of the group's stop through stop (context.go), and only those
	// that have a channel to close or a cancel to call are listed, in
	// watched. Guarded by runMu, except stop, also read without it.
	runMu   sync.Mutex
	stop    atomic.Pointer[stopCause]
	stopCh  chan struct{} // Done of the group's run context (groupCtx), made on first use
	watched map[*job]struct{}
	pruneAt int // len(watched) at which ended jobs are pruned from it

	runningSet map[*job]struct{} // the running tasks, kept only for tests (trackRunning)
}

// trackRunning, set by the package's tests, keeps each group's running
// tasks in runningSet, so that the invariant checks can hold the permits
// against the tasks that hold them.
var trackRunning bool

func newGroup(ex *Executor, key string, l policy.GroupLimits) *group {
	g := &group{
		ex:       ex,
		key:      key,
		limits:   l,
		inFlight: groupsem.New(l.MaxInFlight),
		conc:     groupsem.New(l.MaxConcurrency),
	}
	g.lane.key = key
	g.readyNode.Value = g
	g.idleNode.Value = g
	g.backlogNode.Value = g
	if ex.breaker != nil {
		s := *ex.breaker
		if s.Name != "" {
			s.Name += ":" + key
		} else {
			s.Name = key
		}
		g.br, _ = breaker.New(s) // validated by WithGroupBreaker
	}
	return g
}

func (g *group) tasks() int { return g.queued() + g.running }

// idle reports whether g has no task and no Submit in progress.
func (g *group) idle() bool { return g.tasks() == 0 && g.pending == 0 }

// reclaimable reports whether idle reclamation may drop g: not while its
// breaker remembers failures that a fresh one would forget.
func (g *group) reclaimable() bool { return g.br == nil || g.br.State() == breaker.StateClosed }

// queued returns the number of g's waiting tasks.
func (g *group) queued() int { return g.waiting.Len() + g.light.Len() }

// head returns the first waiting task, or nil. A light task at the head
// becomes a job (lightTaskLocked).
func (g *group) head() *job {
	if j := g.waiting.front; j != nil || len(g.light.fns) == 0 { // empty, fns is empty (pop)
		return j
	}
	return g.lightHead()
}

// lightHead is head's case of a light task at the head, out of line: head
// inlined is worth a few percent.
func (g *group) lightHead() *job {
	t := g.ex.lightTaskLocked(g, g.light.pop())
	g.waiting.PushBack(&t.job)
	return &t.job
}

// flushLightLocked makes every light task of g's queue a job, at the back
// of g.waiting: for a job to be queued behind them, or for a walk of the
// queue.
func (g *group) flushLightLocked() {
	for g.light.Len() > 0 {
		g.waiting.PushBack(&g.ex.lightTaskLocked(g, g.light.pop()).job)
	}
}

func (g *group) trackLocked(j *job, running bool) {
	if !running {
		delete(g.runningSet, j)
		return
	}
	if g.runningSet == nil {
		g.runningSet = make(map[*job]struct{})
	}
	g.runningSet[j] = struct{}{}
}
