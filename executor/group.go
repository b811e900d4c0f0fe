package executor

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/internal/queue"
	"github.com/groupexec/groupexec/policy"
)

// group is one group key's admission state. Each group guards its own state
// with mu, so that groups never wait on each other: a start that fits, a
// finish and a refusal lock only their group.
type group struct {
	// Guarded by mu, but key (set once). What a lookup, a start, a finish
	// and a refusal read and write comes first, in the order they read it,
	// on as few cache lines as it fits: a group is over 512 bytes, so the
	// allocator puts an 8-byte header before it, and its cache lines begin
	// at offsets 56, 120 and 184. A refusal of a full group reads the first
	// three: the key a lookup compares, the mutex and what the admission
	// decides with (line 0); the limits and the last refusal (line 1); the
	// statistics (line 2). The queue is line 3. With the key and the flags
	// on lines of their own, a refusal read two more (overload benchmark,
	// 1,000 groups, GOMAXPROCS 1: 8.6 first-level cache misses a refusal
	// under cachegrind, 6.3 now; 0.90x-0.93x the time of Go, Do and
	// Submit's refusals). layout_internal_test.go holds the lines to it.
	key      string
	mu       sync.Mutex
	inFlight int                     // the bulkhead: permits admitted (waiting + running)
	br       *breaker.CircuitBreaker // nil unless WithGroupBreaker
	// refusing is set while the group's last admission was a refusal, and
	// read without the lock: a caller allocates its task before locking
	// unless the group is likely to refuse it (submit.go).
	refusing atomic.Bool
	// laneOpen says whether Submit may append to the group's lane (lane.go):
	// written under the lane's mutex, read without it first, and by every
	// admission, here where the admission reads already.
	laneOpen    atomic.Bool
	shutdown    bool
	evict       bool // drop as soon as idle
	dead        bool // dropped from the index: whoever finds it looks the key up again
	clusterWait bool // the head waits for the group limiter's notify (cluster.go)
	// resync is set when the group's place in the dispatcher's ready list
	// may be out of date: the goroutine that set it calls ex.resync after
	// unlocking (dispatch.go).
	resync bool
	// inReady is written with both mu and the dispatcher's mutex held, so
	// either one is enough to read it (dispatch.go).
	inReady bool
	// known says whether g is in the dispatcher's known list (fair.go),
	// written like inReady: a group dropped while in it is taken out once
	// its mutex is released (forget).
	known bool
	// keepQueueRoom: the next task out of the queue passes its place in the
	// global queue threshold to the task that displaced it (displaceLocked).
	keepQueueRoom bool

	limits       policy.GroupLimits
	refused      *RejectedError // the last refusal of a task without an ID (endRefusal)
	runningTasks int
	running      int // permits running
	pending      int // admissions under way with mu released (a breaker ticket): not idle

	counts TaskCounts
	// transit is global permits g's finished tasks hold until resync gives
	// them back through the dispatcher (startFreedLocked).
	transit int

	waiting jobList    // FIFO
	light   lightQueue // light tasks, behind waiting (light.go)
	spares  spares     // Go tasks kept for reuse (recycle.go)
	// refusedTask is the completed handle of the last refused Submit of
	// a task without an ID, for the next one refused the same way
	// (refuseShared), or refusalReserved while such a handle is being
	// made; dropped when the group goes idle, and never kept by an idle
	// group.
	refusedTask atomic.Pointer[job]
	ex          *Executor

	backlogWin uint64          // the fairness window in which waiting last became non-empty (fair.go)
	emptied    uint64          // counts the times waiting became empty: credit is not kept across them
	served     uint64          // permits started
	statsPass  uint64          // the Stats pass that last read counts and served (stats.go)
	timer      clock.Timer     // the queue-timeout timer, armed for the head
	timerSeq   uint64          // counts timers armed, to tell a stale one
	drainWaits []chan struct{} // ShutdownGroup and Shutdown calls waiting (drain.go)

	// unsettled counts tasks whose admission ended but whose handle
	// completes after mu was released (drain.go).
	unsettled atomic.Int64

	// Guarded by the dispatcher's mutex.
	readyNode queue.Node[*group] // in disp.ready
	knownNode queue.Node[*group] // in disp.known (fair.go)
	deficit   int                // permits of credit for the current or next turn
	creditAt  uint64             // emptied when deficit was last checked
	winID     uint64             // the window winServed counts (fair.go)
	winServed int                // permits started in window winID

	idleNode queue.Node[*group] // in ex.idle.list, guarded by its mutex

	// The group's running tasks are counted, not listed: their contexts
	// hear of the group's stop through stop (context.go), and only those
	// that have a channel to close or a cancel to call are listed, in
	// watched. Guarded by runMu, except stop, also read without it.
	runMu   sync.Mutex
	stop    atomic.Pointer[stopCause]
	stopCh  chan struct{} // Done of the group's shared context (groupCtx), made on first use
	watched map[*job]struct{}
	pruneAt int // len(watched) at which ended jobs are pruned from it

	runningSet map[*job]struct{} // the running tasks, kept only for tests (trackRunning)

	gate sync.Mutex // finishing workers wait here for mu, one at a time (finish)

	_    [8]byte // the lane on a cache line of its own: its mutex is taken by submitters, the gate by finishing workers
	lane lane    // Submit's tasks joining a backlog without mu (lane.go)
}

// trackRunning, set by the package's tests, keeps each group's running
// tasks in runningSet, so that the invariant checks can hold the permits
// against the tasks that hold them.
var trackRunning bool

func newGroup(ex *Executor, key string, l policy.GroupLimits) *group {
	g := &group{ex: ex, key: key, limits: l}
	g.readyNode.Value = g
	g.knownNode.Value = g
	g.idleNode.Value = g
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

// queued returns the number of g's waiting tasks.
func (g *group) queued() int { return g.waiting.Len() + g.light.n }

func (g *group) tasks() int { return g.queued() + g.runningTasks }

// idle reports whether g has no task, none still completing, no admission
// under way, and no permits in transit.
func (g *group) idle() bool {
	// runningTasks first: a group refusing because it is full has tasks
	// running, and its queue's counts are on another cache line.
	return g.runningTasks == 0 && g.queued() == 0 && g.pending == 0 && g.transit == 0 && g.unsettled.Load() == 0
}

// reclaimable reports whether idle reclamation may drop g: not while it is
// shut down (kept until evicted). A breaker that is not closed does not
// keep g: a failing tenant is idle by construction, and tenants that trip
// their breakers and go away would pile up past maxIdle. A tenant that
// keeps calling keeps its breaker, each refusal making g the most recently
// idle group; one reclaimed comes back closed.
func (g *group) reclaimable() bool { return !g.shutdown }

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

// findGroup returns the group named key, making its state if the executor
// keeps none. It returns nil and the refusal if the state cannot be made:
// the executor is shut down, or a resolver gave an invalid limit.
func (ex *Executor) findGroup(key string) (*group, *refusal) {
	if g := ex.groups.hint.Load(); g != nil && g.key == key {
		return g, nil
	}
	if g := ex.groups.load(key); g != nil {
		return g, nil
	}
	if ex.stateNow() != open {
		return nil, &refusal{limit: LimitShutdown, err: ErrShutdown, forced: true}
	}
	return ex.makeGroup(key)
}

// lockFound locks g, found by findGroup for key, or the group that
// replaced it if it was dropped meanwhile. It returns nil and the refusal
// if the state cannot be made.
func (ex *Executor) lockFound(g *group, r *refusal, key string) (*group, *refusal) {
	for g != nil {
		g.mu.Lock()
		if g.laneOpen.Load() {
			ex.drainLaneLocked(g, false, false) // FIFO: the lane's tasks come before the one admitted
		}
		if !g.dead {
			return g, nil
		}
		g.mu.Unlock()
		g, r = ex.findGroup(key)
	}
	return nil, r
}

// makeGroup makes the state of the group named key and puts it in the index,
// or returns the group another goroutine put there first.
func (ex *Executor) makeGroup(key string) (*group, *refusal) {
	// Limits set by SetGroupLimits win over the policy's, whose resolvers
	// are then not called.
	for {
		ex.overMu.RLock()
		l, set := ex.overrides[key]
		ex.overMu.RUnlock()
		if !set {
			var err error
			if l, err = ex.pol.Group(key); err != nil { // resolvers are user code: no lock held
				return nil, &refusal{limit: LimitResolver, err: err, forced: true}
			}
		}
		// The index is written under the read lock, so that SetGroupLimits
		// and ResetGroupLimits, which take the write lock to change an
		// override and find the group, either find this group or are seen
		// here.
		ex.overMu.RLock()
		o, ok := ex.overrides[key]
		if set && !ok {
			// ResetGroupLimits dropped the override read above, and found
			// no group: the policy's limits apply, resolved afresh.
			ex.overMu.RUnlock()
			continue
		}
		if ok {
			l = o
		}
		g, _ := ex.groups.loadOrStore(newGroup(ex, key, l))
		ex.overMu.RUnlock()
		return g, nil
	}
}

// dropLocked removes g from the index: its state is gone, and whoever
// finds it afterwards looks the key up again. Its counts move to the
// executor's totals. If g is in the dispatcher's known list, the caller
// takes it out once g.mu is released (forget), so that the list keeps no
// dropped group until its fairness window ends, which, while the global
// room stays taken, may be never.
func (ex *Executor) dropLocked(g *group) {
	if g.dead {
		return
	}
	ex.totals.fold(g, func() {
		g.dead = true
		ex.groups.remove(g)
		ex.groups.hint.CompareAndSwap(g, nil)
	})
	if testHookDropped != nil {
		testHookDropped(g.key)
	}
	if g.timer != nil {
		stopTimer(g.timer)
		g.timer = nil
	}
	g.endKeptContexts()
}

// testHookDropped, when set by a test, runs in dropLocked once g has left
// the index, g.mu held.
var testHookDropped func(key string)

// droppedStop is the stop of a dropped group (endKeptContexts): shared,
// so that dropping a group allocates nothing.
var droppedStop = newStopCause(context.Canceled)

// endKeptContexts ends the contexts of g's tasks that outlived their runs,
// g being dropped: no task of g runs or will, but a fn of a Go or Do call
// with context.Background may have kept its group's context (groupCtx),
// which only g's stop ends, and no stop reaches a dropped group (a group
// made again for its key is another). Without it such a context would end
// at Close if its group were kept, and never if idle reclamation or an
// eviction dropped it.
func (g *group) endKeptContexts() {
	if !g.stop.CompareAndSwap(nil, droppedStop) {
		return
	}
	// A Done that read no stop made its channel before this lock, or
	// makes it before it is released.
	g.runMu.Lock()
	g.closeStopChLocked()
	g.runMu.Unlock()
}
