package executor

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/policy"
)

type execState uint32

const (
	open execState = iota
	shuttingDown
	closed
)

// Executor runs tasks by group under a policy's limits. It is safe for
// concurrent use. Create it with New; release it with Shutdown or Close.
//
// Its state is in layers, each guarded on its own (see doc.go):
//   - each group's admission state (its limits, counts and FIFO queue) by
//     the group's mutex (group.go, admit.go);
//   - the global in-flight limit by atomics (global.go);
//   - the groups waiting for global room, and whose turn it is, by the
//     dispatcher's mutex (dispatch.go), taken only when groups contend for
//     global room;
//   - idle groups past WithMaxIdleGroups by their own mutex (idle.go).
//
// No goroutine waits for a group mutex while it holds another (idle
// reclamation may TryLock one: idle.go). Lock order: the dispatcher's,
// then a group's, then the idle list's or overMu (read by a limit change:
// setLimits); a group's mutex is never held while taking the
// dispatcher's.
type Executor struct {
	pol     *policy.Policy
	clk     clock.Clock
	realClk bool // clk is clock.Real: one monotonic read per timing
	epoch   time.Time
	// lastRead is the latest reading of an injected clock since epoch,
	// which stands while its Now panics (clockSince).
	lastRead atomic.Int64
	timeout  time.Duration
	listener Listener
	handler  RejectionHandler
	spawn    func(func())
	maxIdle  int
	breaker  *breaker.Settings // per-group breakers, when set
	cluster  *clusterLimits    // cluster limiters (cluster.go), nil when none
	light    bool              // Go may queue light tasks (light.go)

	state atomic.Uint32 // execState

	global globalRoom // the global in-flight limit (global.go)
	// waiting counts the tasks waiting in every group's queue, for the
	// global queue threshold, and only when the policy sets one
	// (queueLimit); it changes only when a task joins or leaves a queue,
	// never on a start that fits.
	waiting    atomic.Int64
	queueLimit int // the policy's GlobalQueueThreshold

	groups groupIndex // the groups with state kept (group.go)
	disp   dispatcher // global room for waiting groups (dispatch.go)
	idle   idleGroups // idle groups past maxIdle (idle.go)
	totals totals     // counts not kept by a live group (stats.go)

	// overrides are the limits SetGroupLimits gave groups. They are
	// configuration, not state: they outlive a group's state (idle
	// reclamation, EvictGroup) and are consulted, before the policy, when
	// it is created again. Read when a group is created, so rarely.
	overMu    sync.RWMutex
	overrides map[string]policy.GroupLimits

	// workers counts the worker goroutines, running or parked; Close
	// waits for it once every task has finished.
	workers sync.WaitGroup
	parked  chan worker // idle workers (worker.go)
	runq    runQueue    // started tasks handed to spinning workers (runq.go)
}

// New returns an Executor enforcing p, configured by opts. It fails, with an
// error naming the option, for a nil or zero p (a Policy not made by
// policy.New) or a nil Option, an option's invalid value
// (a listener holding a nil pointer or function, a nil clock, limiter or
// spawn function, a negative WithMaxIdleGroups, invalid breaker Settings),
// WithListener given twice, or a Limiter that refuses to attach. Every
// error it returns matches ErrInvalidOption. WithListener(nil) is no
// error: it sets no listener. Release the Executor with Shutdown or Close.
func New(p *policy.Policy, opts ...Option) (*Executor, error) {
	if p == nil {
		return nil, invalidOption(errors.New("executor: New(nil): a *policy.Policy is required (policy.New() gives the defaults)"))
	}
	if p.GlobalMaxInFlight() < 1 {
		// Only a zero Policy, not made by policy.New, which validates every
		// limit, has one below 1: its limits of 0 would refuse every task as
		// too heavy.
		return nil, invalidOption(errors.New("executor: New: a zero policy.Policy is not usable (policy.New() gives the defaults)"))
	}
	ex := &Executor{
		pol:        p,
		clk:        clock.Real,
		timeout:    p.QueueTimeout(),
		queueLimit: p.GlobalQueueThreshold(),
		maxIdle:    DefaultMaxIdleGroups,
	}
	ex.global.limit.Store(int64(p.GlobalMaxInFlight()))
	ex.parked = make(chan worker, maxParked(p.GlobalMaxInFlight()))
	ex.runq.few = runtime.GOMAXPROCS(0) <= maxSpinProcs
	ex.disp.fair.reset(0)
	for _, o := range opts {
		if o == nil {
			return nil, invalidOption(errors.New("executor: New: nil Option"))
		}
		if err := o.apply(ex); err != nil {
			return nil, invalidOption(err)
		}
	}
	if ex.cluster != nil {
		if err := ex.cluster.attach(ex); err != nil {
			return nil, invalidOption(err)
		}
	}
	if ex.breaker != nil && ex.breaker.Clock == nil {
		// Resolved once all options are applied, WithClock may follow
		// WithGroupBreaker. A copy: the option's Settings may make
		// another executor, whose clock may differ.
		s := *ex.breaker
		s.Clock = ex.clk
		ex.breaker = &s
	}
	ex.light = ex.lightAllowed()
	ex.epoch = ex.clk.Now()
	ex.realClk = ex.clk == clock.Real
	return ex, nil
}

// Policy returns the policy the executor was created with. Limits changed
// at runtime (SetGlobalMaxInFlight, SetGroupLimits) do not change it; Stats
// and GroupStats report the limits in force.
func (ex *Executor) Policy() *policy.Policy { return ex.pol }

func (ex *Executor) stateNow() execState { return execState(ex.state.Load()) }

// since returns the clock's time as a duration since the executor's epoch.
func (ex *Executor) since() time.Duration {
	if ex.realClk {
		return time.Since(ex.epoch) // reads only the monotonic clock
	}
	return ex.clockSince()
}

// clockSince reads an injected clock (WithClock). Its Now is user code,
// read under a group's mutex (a submission's time, a head's wait against
// the queue timeout) and, at dispatch, the dispatcher's: a panic going on
// up from there would leave those locks held, and stop the group, or every
// group, for good. So a panic is recovered, and the latest reading stands:
// to the executor, time stands still while Now panics. Taking the latest,
// never an earlier one, keeps every duration (end minus start) >= 0.
func (ex *Executor) clockSince() (d time.Duration) {
	defer func() {
		if recover() != nil {
			d = time.Duration(ex.lastRead.Load())
		}
	}()
	d = ex.clk.Now().Sub(ex.epoch)
	for {
		last := ex.lastRead.Load()
		if int64(d) <= last {
			return time.Duration(last) // a clock stepped back
		}
		if ex.lastRead.CompareAndSwap(last, int64(d)) {
			return d
		}
	}
}
