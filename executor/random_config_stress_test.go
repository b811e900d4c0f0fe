package executor_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// TestRandomConfigStress runs the stress mix under configurations drawn at
// random from the whole option space, one per seed: the rejection policy
// (DiscardOldest and a rejection handler included), queue thresholds,
// in-flight and concurrency limits (each bounded or unlimited), weights,
// a queue timeout on a fake clock, a listener that may panic, group
// breakers, a small WithMaxIdleGroups, runtime limit changes, evictions
// and group shutdowns. Submit, Go and Do callers cancel, fail, panic and
// call runtime.Goexit. It checks from inside the tasks that the limits are
// never exceeded (above what ran when they were lowered: ceilings) and
// that no task runs twice, that a FIFO group's tasks start in submission
// order, and at the end, once drained, every call's outcome, the listener's
// events and the executor's counts.
//
// Each subtest logs its seed and configuration. GROUPEXEC_STRESS_SEED
// replays one seed; GROUPEXEC_STRESS_RUNS sets the seeds per GOMAXPROCS.
func TestRandomConfigStress(t *testing.T) {
	seededRuns(t, "GROUPEXEC_STRESS", 24, 6, runRandomConfig)
}

// stressConfig is one drawn configuration.
type stressConfig struct {
	groups, callers, perCaller int
	global, inFlight, conc     int // the policy's limits
	queue, globalQueue         int // the policy's queue thresholds
	maxWeight                  int
	rejection                  policy.RejectionPolicy
	handler                    bool // a rejection handler decides instead
	timeout                    time.Duration
	listener, listenerPanics   bool
	breaker                    bool
	maxIdle                    int
	churn                      bool // limit changes
	evictions, groupShutdowns  bool
	fifo                       bool // g0 at concurrency 1, its start order checked
	spawn                      int  // spawnGo, spawnPanics or spawnStartsPanics
	drain                      int  // drainShutdown ... drainCloseEarly
}

const (
	drainShutdown      = iota // Shutdown that waits for everything
	drainQuiet                // wait until nothing waits or runs, then Close
	drainCancel               // Shutdown out of time (cancels what is left), then Close
	drainShutdownEarly        // Shutdown while the callers still call
	drainCloseEarly           // Close while the callers still call
)

// How the executor starts its workers (WithSpawn).
const (
	spawnGo           = iota // the default
	spawnPanics              // a spawn function that sometimes panics without starting f
	spawnStartsPanics        // one that sometimes starts f, then panics
)

func unlimitedOr(r *rand.Rand, oneIn, n int) int {
	if r.IntN(oneIn) == 0 {
		return policy.Unlimited
	}
	return n
}

func drawStressConfig(r *rand.Rand) stressConfig {
	c := stressConfig{
		groups:      2 + r.IntN(5),
		callers:     4 + r.IntN(10),
		perCaller:   60 + r.IntN(160),
		maxWeight:   1 + r.IntN(3),
		global:      unlimitedOr(r, 4, 1+r.IntN(10)),
		inFlight:    unlimitedOr(r, 3, 1+r.IntN(20)),
		conc:        unlimitedOr(r, 8, 1+r.IntN(4)),
		queue:       unlimitedOr(r, 3, r.IntN(12)),
		globalQueue: unlimitedOr(r, 2, r.IntN(40)),
		rejection:   policy.RejectionPolicy(r.IntN(4)),
		handler:     r.IntN(5) == 0,
		maxIdle:     r.IntN(4),
		churn:       r.IntN(3) != 0,
		evictions:   r.IntN(3) != 0,
		fifo:        r.IntN(2) == 0,
		drain:       r.IntN(5),
		spawn:       r.IntN(3),
	}
	if c.drain == drainShutdownEarly {
		// A limit lowered under a waiting task's weight, and never raised
		// again (a change returns ErrShutdown), would hold Shutdown.
		c.churn = false
	}
	if r.IntN(2) == 0 {
		c.timeout = time.Duration(5+r.IntN(40)) * time.Millisecond
	}
	c.listener = r.IntN(2) == 0
	c.listenerPanics = c.listener && r.IntN(2) == 0
	c.breaker = r.IntN(3) == 0
	c.groupShutdowns = r.IntN(4) == 0
	if r.IntN(6) == 0 {
		// Tight: few groups contending for a global limit and a global
		// queue threshold of a few places, full queues displacing.
		c.groups, c.global, c.conc = 2+r.IntN(2), 1+r.IntN(2), 1+r.IntN(2)
		c.queue, c.globalQueue, c.inFlight = 1+r.IntN(3), 1+r.IntN(5), unlimitedOr(r, 2, 2+r.IntN(6))
		if r.IntN(2) == 0 {
			c.rejection, c.handler = policy.DiscardOldest, false
		}
	} else if r.IntN(5) == 0 {
		// Backlogs past the lane's depth, of light tasks and Submit's:
		// nothing but the queue's order decides for a new task.
		c.inFlight, c.queue, c.globalQueue = policy.Unlimited, policy.Unlimited, policy.Unlimited
		c.timeout, c.listener, c.listenerPanics, c.breaker = 0, false, false, false
		c.conc = 1 + r.IntN(2)
		c.perCaller += 200
	}
	return c
}

func (c stressConfig) String() string {
	n := func(v int) string {
		if v == policy.Unlimited {
			return "unlimited"
		}
		return strconv.Itoa(v)
	}
	rej := c.rejection.String()
	if c.handler {
		rej = "handler (over " + rej + ")"
	}
	drain := [...]string{"Shutdown", "quiescence then Close", "Shutdown out of time then Close",
		"Shutdown while calling", "Close while calling"}[c.drain]
	spawn := [...]string{"go", "panics", "starts then panics"}[c.spawn]
	return fmt.Sprintf("groups=%d callers=%d perCaller=%d global=%s inFlight=%s conc=%s queue=%s globalQueue=%s "+
		"maxWeight=%d rejection=%s timeout=%v listener=%v(panics %v) breaker=%v maxIdle=%d churn=%v evictions=%v "+
		"groupShutdowns=%v fifo=%v spawn=%s drain=%s",
		c.groups, c.callers, c.perCaller, n(c.global), n(c.inFlight), n(c.conc), n(c.queue), n(c.globalQueue),
		c.maxWeight, rej, c.timeout, c.listener, c.listenerPanics, c.breaker, c.maxIdle, c.churn, c.evictions,
		c.groupShutdowns, c.fifo, spawn, drain)
}

// A stress call's way in.
type callKind int

const (
	callSubmit callKind = iota
	callGo
	callDo
)

func (k callKind) String() string { return [...]string{"Submit", "Go", "Do"}[k] }

// stressExits: the task calls runtime.Goexit.
const stressExits = stressSucceeds + 1

// stressCall is one Submit, Go or Do call and what became of it.
type stressCall struct {
	kind       callKind
	group      int
	weight     int
	body       stressKind
	id         string // Submit's, "" for none
	seq        int64  // its caller's count, from 1
	invalid    bool
	cancelled  bool   // its context or handle was cancelled before the drain
	cancelable bool   // its context can be cancelled (every such one is, at the end)
	goid       uint64 // the goroutine that made the call

	runs    atomic.Int32
	outside atomic.Bool   // ran in its caller, outside the limits
	runner  atomic.Uint64 // the goroutine a rejection handler had run it

	lateCancel atomic.Bool // its handle was cancelled by another goroutine

	h        *executor.Handle[int]
	err      error
	returned bool // the call returned (else its goroutine exited)
	panicked bool // a panic of Fn reached the caller
}

// goid returns the calling goroutine's id.
func goid() uint64 {
	var buf [64]byte
	s := strings.TrimPrefix(string(buf[:runtime.Stack(buf[:], false)]), "goroutine ")
	id, err := strconv.ParseUint(s[:strings.IndexByte(s, ' ')], 10, 64)
	if err != nil {
		panic("goid: " + err.Error())
	}
	return id
}

var errHandled = errors.New("stress: refused by the rejection handler")

// listenerLog records, per Submit task ID, the listener's events: S
// submitted, R rejected, B started, C completed.
type listenerLog struct {
	mu     sync.Mutex
	events map[string][]byte
	status map[string]executor.Status // of the last R or C
}

func (l *listenerLog) add(e executor.Event, kind byte) {
	if e.ID == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events[e.ID] = append(l.events[e.ID], kind)
	if kind == 'R' || kind == 'C' {
		l.status[e.ID] = e.Status
	}
}

func runRandomConfig(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 0))
	cfg := drawStressConfig(r)
	t.Logf("seed %d: %v", seed, cfg)

	clk, brClk := fakeClock(), fakeClock()
	rnd := sharedRand(seed)
	var (
		broken             violations
		okRuns, failRuns   atomic.Int64
		outsideRuns        atomic.Int64
		submissions, trips atomic.Int64
		drained            atomic.Bool
		calling            sync.Map // goroutine id -> *stressCall it is making
		log                = &listenerLog{events: map[string][]byte{}, status: map[string]executor.Status{}}
		runners            sync.WaitGroup // goroutines a handler runs tasks on
		inLimits           atomic.Int64   // Fn calls running, but those run by their callers
		spawns             atomic.Int64
		stashMu            sync.Mutex
		stashed            []*executor.Rejection
		stashedCalls       []*stressCall
	)
	violate := broken.add

	popts := []policy.Option{
		policy.WithGlobalMaxInFlight(cfg.global),
		policy.WithDefaultMaxInFlight(cfg.inFlight),
		policy.WithDefaultMaxConcurrency(cfg.conc),
		policy.WithDefaultQueueThreshold(cfg.queue),
		policy.WithGlobalQueueThreshold(cfg.globalQueue),
		policy.WithQueueTimeout(cfg.timeout),
		policy.WithRejectionPolicy(cfg.rejection),
	}
	eopts := []executor.Option{executor.WithClock(clk), executor.WithMaxIdleGroups(cfg.maxIdle)}
	// The listener, the handler and the breakers' OnStateChange run outside
	// every executor lock: each reads a group's stats now and then, which
	// would deadlock under its lock.
	var ex *executor.Executor
	peek := func(group string) {
		if rnd(8) == 0 {
			ex.GroupStats(group)
		}
	}
	if cfg.listener {
		at := func(kind byte) func(executor.Event) {
			return func(e executor.Event) {
				log.add(e, kind)
				peek(e.Group)
				if cfg.listenerPanics && rnd(4) == 0 {
					panic("listener panic")
				}
			}
		}
		eopts = append(eopts, executor.WithListener(executor.ListenerFuncs{
			Submitted: at('S'), Rejected: at('R'), Started: at('B'), Completed: at('C')}))
	}
	if cfg.handler {
		eopts = append(eopts, executor.WithRejectionHandler(func(rj *executor.Rejection) error {
			peek(rj.Group)
			var c *stressCall
			if v, ok := calling.Load(goid()); ok {
				c = v.(*stressCall)
			} else {
				violate("the rejection handler runs on a goroutine making no call")
			}
			switch rnd(7) {
			case 0:
				return errHandled
			case 1:
				return nil
			case 2:
				panic("handler panic") // counts as returning rj.Err
			case 4:
				// Run from another goroutine, racing with the handler's
				// return: it runs only if it comes first.
				runners.Add(1)
				go func() {
					defer runners.Done()
					if c != nil {
						c.runner.Store(goid())
						c.outside.Store(true)
					}
					rj.RunInCaller()
				}()
				return nil
			case 3:
				stashMu.Lock()
				stashed, stashedCalls = append(stashed, rj), append(stashedCalls, c)
				stashMu.Unlock()
				return errHandled
			default:
				if c != nil {
					c.outside.Store(true)
				}
				rj.RunInCaller()
				rj.RunInCaller() // does nothing
				return nil
			}
		}))
	}
	switch cfg.spawn {
	case spawnPanics:
		eopts = append(eopts, executor.WithSpawn(func(f func()) {
			if spawns.Add(1)%5 == 0 {
				panic("spawn refused")
			}
			go f()
		}))
	case spawnStartsPanics:
		eopts = append(eopts, executor.WithSpawn(func(f func()) {
			go f()
			if spawns.Add(1)%5 == 0 {
				panic("spawn failed after starting f")
			}
		}))
	}
	if cfg.breaker {
		eopts = append(eopts, executor.WithGroupBreaker(breaker.Settings{Clock: brClk, Timeout: 20 * time.Millisecond,
			MaxRequests: uint32(1 + r.IntN(2)),
			OnStateChange: func(name string, _, to breaker.State) {
				peek(name)
				if to == breaker.StateOpen {
					trips.Add(1)
				}
			},
			ReadyToTrip: func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 3 }}))
	}
	ex = newExec(t, popts, eopts...)
	use := newCeilings(ex, cfg.global, cfg.conc, cfg.groups)
	inCaller := cfg.handler || cfg.rejection == policy.CallerRuns // Fn may run in its caller
	fifoLast := make([]atomic.Int64, cfg.callers)
	fifoGroup := -1
	if cfg.fifo {
		fifoGroup = 0
		l := limits(cfg.inFlight, 1, cfg.queue, 1)
		if err := use.setGroup(0, &l); err != nil {
			t.Fatal(err)
		}
	}
	churned := make([]bool, cfg.groups)

	chaos := newBackground()
	chaos.loop(func() { clk.Advance(time.Millisecond) }) // time moves: queue timeouts fire, holds end
	chaos.loop(sometimes(rnd, 16, func() {
		if msg := ex.CheckInvariants(); msg != "" {
			violate("invariant: " + msg)
		}
	}))
	var churnMu sync.Mutex // the changes' own state (churned)
	busy := newBackground()
	if cfg.churn {
		busy.loop(sometimes(rnd, 24, func() {
			err := use.setGlobal(1 + rnd(10))
			if rnd(4) == 0 {
				err = use.setGlobal(policy.Unlimited)
			}
			if err != nil && !errors.Is(err, executor.ErrShutdown) {
				violate(err.Error())
			}
		}))
		busy.loop(sometimes(rnd, 12, func() {
			gi := rnd(cfg.groups)
			if gi == fifoGroup {
				return
			}
			var err error
			if rnd(4) == 0 {
				err = use.setGroup(gi, nil)
			} else {
				pick := func(n int) int {
					if rnd(4) == 0 {
						return policy.Unlimited
					}
					return n
				}
				l := limits(pick(1+rnd(20)), pick(1+rnd(4)), pick(rnd(12)), 1+rnd(3))
				err = use.setGroup(gi, &l)
			}
			churnMu.Lock()
			churned[gi] = true
			churnMu.Unlock()
			if err != nil && !errors.Is(err, executor.ErrShutdown) {
				violate(err.Error())
			}
		}))
	}
	if !cfg.churn {
		// The limits stay as the policy (and g0's) set them: no group
		// admits past its bulkhead nor queues past its threshold.
		chaos.loop(sometimes(rnd, 8, func() {
			for gi := range cfg.groups {
				if s, ok := ex.GroupStats(fmt.Sprint("g", gi)); ok && (s.InFlight > s.MaxInFlight || s.Waiting > s.QueueThreshold) {
					violate(fmt.Sprintf("group g%d: %d in flight of %d, %d waiting of %d", gi, s.InFlight, s.MaxInFlight, s.Waiting, s.QueueThreshold))
				}
			}
		}))
	}
	chaos.loop(sometimes(rnd, 4, func() {
		if n, limit := ex.GlobalQueued(); n < 0 || n > limit {
			violate(fmt.Sprintf("%d tasks counted waiting against the global queue threshold %d", n, limit))
		}
	}))
	if cfg.evictions {
		busy.loop(sometimes(rnd, 16, func() { use.evict(rnd(cfg.groups)) }))
	}
	if cfg.groupShutdowns {
		busy.loop(sometimes(rnd, 200, func() {
			gi := rnd(cfg.groups)
			ctx, cancel := context.WithTimeout(bg, time.Duration(rnd(2000))*time.Microsecond)
			if err := ex.ShutdownGroup(ctx, fmt.Sprint("g", gi)); err != nil && !errors.Is(err, context.DeadlineExceeded) {
				violate("ShutdownGroup: " + err.Error())
			}
			cancel()
			use.evict(gi) // lifts the shutdown, once the group is idle
		}))
	}

	// hold keeps a task's permits for a while: with a queue timeout, for
	// fake time, so that waiting tasks time out at any speed.
	hold := func() {
		if cfg.timeout == 0 {
			for range 5 {
				runtime.Gosched()
			}
			return
		}
		for until := clk.Now().Add(cfg.timeout / 2); clk.Now().Before(until); {
			runtime.Gosched()
		}
	}

	bodyFor := func(c *stressCall, caller int) func(context.Context) (int, error) {
		return func(ctx context.Context) (int, error) {
			if drained.Load() {
				violate(fmt.Sprintf("%v task %s ran after the drain", c.kind, c.id))
			}
			if c.runs.Add(1) > 1 {
				violate(fmt.Sprintf("%v task %s ran twice", c.kind, c.id))
			}
			outside := false
			if inCaller {
				if c.kind == callDo {
					outside = c.outside.Load()
				} else {
					id := goid()
					outside = id == c.goid || id == c.runner.Load()
				}
			}
			// A Do refused under CallerRuns runs in its caller as an
			// admitted one does: neither is counted against the limits.
			counted := !outside && !(c.kind == callDo && !cfg.handler && cfg.rejection == policy.CallerRuns)
			if outside {
				c.outside.Store(true)
				outsideRuns.Add(1)
			}
			if !outside {
				inLimits.Add(1)
				defer inLimits.Add(-1)
			}
			if counted {
				use.enter(c.group, c.weight, violate)
				defer use.leave(c.group, c.weight)
				if c.group == fifoGroup {
					if last := fifoLast[caller].Swap(c.seq); last >= c.seq {
						violate(fmt.Sprintf("g0 FIFO: caller %d's task %d started after its task %d", caller, c.seq, last))
					}
				}
			}
			switch c.body {
			case stressPanics:
				failRuns.Add(1)
				panic("stress panic")
			case stressExits:
				failRuns.Add(1)
				runtime.Goexit()
			case stressFails:
				failRuns.Add(1)
				return 0, errStress
			case stressWaitsCancel:
				<-ctx.Done()
				return 0, ctx.Err()
			case stressHolds:
				hold()
			}
			okRuns.Add(1)
			return int(c.seq), nil
		}
	}

	// call makes c's call from the calling goroutine.
	call := func(c *stressCall, ctx context.Context, fn func(context.Context) (int, error)) {
		c.goid = goid()
		calling.Store(c.goid, c)
		defer calling.Delete(c.goid)
		defer func() {
			if v := recover(); v != nil {
				if v != "stress panic" || c.kind != callDo {
					panic(v)
				}
				c.panicked, c.returned = true, true
			}
		}()
		grp := fmt.Sprint("g", c.group)
		if c.invalid {
			grp = ""
		}
		switch c.kind {
		case callSubmit:
			w := c.weight
			if w == 1 && c.seq%2 == 0 {
				w = 0 // means 1
			}
			c.h, c.err = executor.Submit(ex, ctx, executor.Task[int]{Group: grp, ID: c.id, Weight: w, Fn: fn})
		case callGo:
			c.err = ex.Go(ctx, grp, func(ctx context.Context) error { _, err := fn(ctx); return err })
		case callDo:
			c.err = ex.DoWeighted(ctx, grp, c.weight, func(ctx context.Context) error { _, err := fn(ctx); return err })
		}
		c.returned = true
	}

	calls := make([][]*stressCall, cfg.callers)
	// Handles cancelled from elsewhere while they wait, start or run.
	var (
		recentMu sync.Mutex
		recent   = make([]*stressCall, 16)
		recentAt int
	)
	busy.loop(sometimes(rnd, 4, func() {
		recentMu.Lock()
		c := recent[rnd(len(recent))]
		recentMu.Unlock()
		if c != nil {
			c.lateCancel.Store(true)
			c.h.Cancel()
		}
	}))
	hang := 60 * time.Second // a hang guard, not a timing assertion
	var early sync.WaitGroup
	earlyAt := int64(-1)
	if cfg.drain == drainShutdownEarly || cfg.drain == drainCloseEarly {
		earlyAt = int64(cfg.callers*cfg.perCaller/4 + r.IntN(cfg.callers*cfg.perCaller/2))
	}
	var cancels []context.CancelFunc
	var cancelsMu sync.Mutex
	var cancelers, callers sync.WaitGroup
	for w := range cfg.callers {
		callers.Go(func() {
			r := rand.New(rand.NewPCG(seed, uint64(w)+1))
			for i := range cfg.perCaller {
				c := &stressCall{kind: callKind(r.IntN(3)), group: r.IntN(cfg.groups), seq: int64(i + 1),
					body: stressKind(r.IntN(int(stressExits) + 1))}
				c.weight = 1 + r.IntN(cfg.maxWeight)
				if c.kind == callGo || c.group == fifoGroup {
					c.weight = 1
				}
				if c.kind == callSubmit && r.IntN(4) != 0 {
					c.id = fmt.Sprint(w, "-", i)
				}
				c.invalid = r.IntN(150) == 0
				ctx := bg
				var cancel context.CancelFunc
				cancelLate := c.body == stressWaitsCancel || r.IntN(6) == 0
				if cancelLate || r.IntN(3) == 0 {
					ctx, cancel = context.WithCancel(bg)
					c.cancelable = true
					cancelsMu.Lock()
					cancels = append(cancels, cancel)
					cancelsMu.Unlock()
				}
				if cancelLate {
					// Cancelled from elsewhere, while it waits or runs:
					// a task waiting for its context ends soon.
					c.cancelled = true
					yields := r.IntN(8)
					cancelers.Go(func() {
						for range yields {
							runtime.Gosched()
						}
						cancel()
					})
				}
				fn := bodyFor(c, w)
				if c.body == stressExits && (c.kind == callDo || inCaller) {
					// runtime.Goexit may end the calling goroutine.
					done := make(chan struct{})
					go func() { defer close(done); call(c, ctx, fn) }()
					<-done
				} else {
					call(c, ctx, fn)
				}
				n := submissions.Add(1)
				if n%64 == 0 {
					brClk.Advance(5 * time.Millisecond)
				}
				if n == earlyAt {
					early.Go(func() {
						if cfg.drain == drainCloseEarly {
							ex.Close()
							return
						}
						ctx, cancel := context.WithTimeout(bg, hang)
						defer cancel()
						if err := ex.Shutdown(ctx); err != nil {
							violate(fmt.Sprintf("Shutdown while calling: %v", err))
						}
					})
				}
				if cancel != nil && !cancelLate && r.IntN(2) == 0 {
					c.cancelled = true
					cancel()
				}
				if c.h != nil && r.IntN(10) == 0 {
					c.cancelled = true
					c.h.Cancel()
				}
				if c.h != nil && r.IntN(4) == 0 {
					recentMu.Lock()
					recent[recentAt%len(recent)] = c
					recentAt++
					recentMu.Unlock()
				}
				calls[w] = append(calls[w], c)
				if r.IntN(4) == 0 {
					runtime.Gosched()
				}
			}
		})
	}
	callers.Wait()
	cancelers.Wait()
	early.Wait()
	busy.halt()
	for _, cancel := range cancels {
		cancel() // tasks that wait on their context end now
	}

	// Limits that every admitted task fits, where a change may have left
	// one waiting under a lowered limit.
	if cfg.churn && cfg.drain < drainShutdownEarly {
		if err := use.setGlobal(policy.Unlimited); err != nil {
			t.Fatal(err)
		}
		for gi, ch := range churned {
			if ch {
				l := limits(policy.Unlimited, policy.Unlimited, policy.Unlimited, 1)
				if err := use.setGroup(gi, &l); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	switch cfg.drain {
	case drainShutdown, drainShutdownEarly:
		ctx, cancel := context.WithTimeout(bg, hang)
		err := ex.Shutdown(ctx)
		cancel()
		if err != nil {
			t.Fatalf("Shutdown: %v; stats %+v; invariants %q", err, ex.Stats(), ex.CheckInvariants())
		}
		// Shutdown returns once every task has finished and every handle
		// completed, but for those a rejection handler had run on a
		// goroutine of its own, which belong to it.
		if n := inLimits.Load(); n != 0 {
			t.Errorf("Shutdown returned with %d tasks running", n)
		}
		for _, cs := range calls {
			for _, c := range cs {
				if c.h != nil && c.runner.Load() == 0 && !isDone(c.h) {
					t.Errorf("Shutdown returned before %v task %d-%q completed", c.kind, c.seq, c.id)
				}
			}
		}
	case drainQuiet:
		for deadline := time.Now().Add(hang); ; {
			if s := ex.Stats(); s.Waiting == 0 && s.Running == 0 && s.RunningTasks == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("not quiet after %v: stats %+v; invariants %q", hang, ex.Stats(), ex.CheckInvariants())
			}
			time.Sleep(100 * time.Microsecond)
		}
	case drainCloseEarly:
		ex.Close()
	case drainCancel:
		ctx, cancel := context.WithCancel(bg)
		cancel()
		if err := ex.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Shutdown out of time: %v", err)
		}
		ex.Close()
	}
	if msg := ex.CheckInvariants(); msg != "" {
		t.Errorf("invariant after the drain: %s", msg)
	}
	if s := ex.Stats(); s.Running != 0 || s.Waiting != 0 || s.RunningTasks != 0 {
		t.Errorf("after the drain: %+v", s)
	}
	ex.Close()
	if n := inLimits.Load(); n != 0 {
		t.Errorf("Close returned with %d tasks running", n)
	}
	runners.Wait()
	s := ex.Stats()
	drained.Store(true)
	chaos.halt()

	// What the stashed handlers' late RunInCaller must not do.
	stashMu.Lock()
	for i, rj := range stashed {
		before := int32(-1)
		if c := stashedCalls[i]; c != nil {
			before = c.runs.Load()
		}
		rj.RunInCaller()
		if c := stashedCalls[i]; c != nil && c.runs.Load() != before {
			t.Errorf("RunInCaller after its handler returned ran %v task %s", c.kind, c.id)
		}
	}
	stashMu.Unlock()

	broken.check(t)
	if s.Running != 0 || s.Waiting != 0 || s.RunningTasks != 0 {
		t.Errorf("after the drain: %+v", s)
	}
	for gi := range cfg.groups {
		if gs, ok := ex.GroupStats(fmt.Sprint("g", gi)); ok && (gs.Running != 0 || gs.Waiting != 0 || gs.InFlight != 0 || gs.RunningTasks != 0) {
			t.Errorf("group g%d after the drain: %+v", gi, gs)
		}
	}

	// Each call's outcome.
	var total, invalid int
	for _, cs := range calls {
		for _, c := range cs {
			total++
			if c.invalid {
				invalid++
			}
			checkStressCall(t, cfg, c, log)
		}
	}
	outcomes := s.Succeeded + s.Failed + s.Cancelled + s.Rejected
	if s.Submitted != uint64(total-invalid) || outcomes != uint64(total) {
		t.Errorf("%d calls (%d invalid): submitted %d, outcomes %d (%+v)", total, invalid, s.Submitted, outcomes, s.TaskCounts)
	}
	if s.Succeeded != uint64(okRuns.Load()) || s.Failed != uint64(failRuns.Load()) {
		t.Errorf("Fn succeeded %d times and failed %d times; counted %+v", okRuns.Load(), failRuns.Load(), s.TaskCounts)
	}
	if n := uint64(outsideRuns.Load()); s.CallerRuns < n || (!inCaller || cfg.handler) && s.CallerRuns != n {
		t.Errorf("%d tasks ran in their callers; counted %d", n, s.CallerRuns)
	}
	t.Logf("%d calls: %+v; breaker trips %d", total, s.TaskCounts, trips.Load())
}

// checkStressCall checks what became of one call, once drained.
func checkStressCall(t *testing.T, cfg stressConfig, c *stressCall, log *listenerLog) {
	t.Helper()
	runs := c.runs.Load()
	name := fmt.Sprintf("%v task %d-%q (group g%d, weight %d, body %d)", c.kind, c.seq, c.id, c.group, c.weight, c.body)
	if !c.returned {
		// Its goroutine exited: Fn called runtime.Goexit in it.
		if runs != 1 || c.body != stressExits || c.kind != callDo && !c.outside.Load() {
			t.Errorf("%s: the call never returned; Fn ran %d times", name, runs)
		}
		return
	}
	if c.err != nil && runs != 0 && c.kind != callDo {
		t.Errorf("%s: refused (%v), yet Fn ran", name, c.err)
	}
	if c.invalid && !errors.Is(c.err, executor.ErrInvalidTask) {
		t.Errorf("%s: invalid, the call returned %v", name, c.err)
	}
	// Under Abort and CallerRuns every refusal for lack of room is seen by
	// the caller: a task taken that nobody cancels, no timeout or shutdown
	// removes, runs.
	untouched := !c.cancelled && !c.lateCancel.Load() && !c.cancelable && cfg.timeout == 0 && !cfg.groupShutdowns &&
		cfg.drain != drainCancel && cfg.drain != drainCloseEarly && !c.invalid
	accountable := !cfg.handler && (cfg.rejection == policy.Abort || cfg.rejection == policy.CallerRuns)
	switch c.kind {
	case callSubmit:
		res, ok := c.h.Result()
		if !ok {
			t.Errorf("%s: its handle is not complete", name)
			return
		}
		checkRuns(t, name, res, runs)
		if !c.invalid && (res.Group != fmt.Sprint("g", c.group) || res.ID != c.id) {
			t.Errorf("%s: result names %q/%q", name, res.Group, res.ID)
		}
		if runs == 0 && res.Status != executor.Rejected && res.Status != executor.Cancelled {
			t.Errorf("%s: Fn never ran, status %v", name, res.Status)
		}
		if runs == 1 {
			checkBodyResult(t, name, c, res)
		}
		if res.Queued < 0 || res.Duration < 0 {
			t.Errorf("%s: queued %v, ran %v", name, res.Queued, res.Duration)
		}
		if c.err != nil && res.Status != executor.Rejected && res.Status != executor.Cancelled {
			t.Errorf("%s: Submit returned %v, status %v", name, c.err, res.Status)
		}
		if res.Status == executor.Rejected {
			checkRejection(t, cfg, name, res.Err, c.err)
		}
		// A breaker refuses the queued tasks it would refuse at admission
		// as they would start.
		queuedByBreaker := res.Status == executor.Rejected && (errors.Is(res.Err, breaker.ErrOpenState) || errors.Is(res.Err, breaker.ErrTooManyRequests))
		if accountable && untouched && c.err == nil && runs != 1 && !queuedByBreaker {
			t.Errorf("%s: taken (nil error), never cancelled, ended %v after %d runs: %v", name, res.Status, runs, res.Err)
		}
		if cfg.listener && c.id != "" {
			checkStressEvents(t, name, c, res, log, cfg.handler)
		}
	case callGo:
		if c.err != nil && !errors.Is(c.err, executor.ErrRejected) && !errors.Is(c.err, context.Canceled) && c.err != errHandled {
			t.Errorf("%s: Go returned %v", name, c.err)
		}
		// With no handle, a queued task its breaker refused as it would
		// start is told of to the listener alone.
		if accountable && untouched && !cfg.breaker && c.err == nil && runs != 1 {
			t.Errorf("%s: taken (nil error), never cancelled, ran %d times", name, runs)
		}
	case callDo:
		switch {
		case c.panicked:
			if runs != 1 || c.body != stressPanics {
				t.Errorf("%s: a panic reached the caller, Fn ran %d times", name, runs)
			}
		case runs == 0:
			if c.err == nil {
				t.Errorf("%s: Do returned nil, Fn never ran", name)
			} else if !errors.Is(c.err, executor.ErrRejected) && !errors.Is(c.err, context.Canceled) && c.err != errHandled {
				t.Errorf("%s: Fn never ran, Do returned %v", name, c.err)
			}
			if untouched && !errors.Is(c.err, executor.ErrRejected) && c.err != errHandled {
				t.Errorf("%s: never cancelled, Fn never ran: %v", name, c.err)
			}
		case c.body == stressPanics:
			var pe *executor.PanicError
			if !errors.As(c.err, &pe) || !c.outside.Load() {
				t.Errorf("%s: Fn panicked, Do returned %v (run in its caller: %v)", name, c.err, c.outside.Load())
			}
		case c.body == stressExits:
			var pe *executor.PanicError
			if !errors.Is(c.err, executor.ErrGoexit) && !errors.As(c.err, &pe) {
				t.Errorf("%s: Fn called Goexit, Do returned %v", name, c.err)
			}
		case c.body == stressFails:
			if !errors.Is(c.err, errStress) {
				t.Errorf("%s: Fn failed, Do returned %v", name, c.err)
			}
		case c.body == stressWaitsCancel:
			if !errors.Is(c.err, context.Canceled) {
				t.Errorf("%s: Fn returned its context's error, Do returned %v", name, c.err)
			}
		default:
			if c.err != nil {
				t.Errorf("%s: Fn succeeded, Do returned %v", name, c.err)
			}
		}
	}
}

// checkBodyResult checks the result of a task whose Fn ran against what
// its Fn did.
func checkBodyResult(t *testing.T, name string, c *stressCall, res executor.Result[int]) {
	t.Helper()
	var pe *executor.PanicError
	switch c.body {
	case stressPanics:
		if res.Status != executor.Failed || !errors.As(res.Err, &pe) {
			t.Errorf("%s: Fn panicked, result %v %v", name, res.Status, res.Err)
		}
	case stressExits:
		if res.Status != executor.Failed || !errors.Is(res.Err, executor.ErrGoexit) {
			t.Errorf("%s: Fn called Goexit, result %v %v", name, res.Status, res.Err)
		}
	case stressFails:
		if res.Status != executor.Failed || !errors.Is(res.Err, errStress) {
			t.Errorf("%s: Fn failed, result %v %v", name, res.Status, res.Err)
		}
	case stressWaitsCancel:
		if res.Status != executor.Cancelled {
			t.Errorf("%s: Fn returned its context's error, result %v %v", name, res.Status, res.Err)
		}
	default:
		if res.Status != executor.Success || res.Value != int(c.seq) {
			t.Errorf("%s: Fn succeeded, result %v %v %d", name, res.Status, res.Err, res.Value)
		}
	}
}

// checkRejection checks a Submit task's refusal (err, its handle's) and
// Submit's error against the configuration.
func checkRejection(t *testing.T, cfg stressConfig, name string, err, submitErr error) {
	t.Helper()
	var rej *executor.RejectedError
	if !errors.As(err, &rej) {
		t.Errorf("%s: rejected with %v, not a *RejectedError", name, err)
		return
	}
	forced := errors.Is(err, executor.ErrTooHeavy) || errors.Is(err, executor.ErrShutdown) ||
		errors.Is(err, executor.ErrGroupShutdown) || errors.Is(err, executor.ErrInvalidTask)
	late := errors.Is(err, executor.ErrQueueTimeout) || errors.Is(err, executor.ErrDisplaced) // after admission
	// A breaker refuses with no choice, at admission (Submit returns its
	// error) or as a queued task would start (Submit returned nil).
	byBreaker := errors.Is(err, breaker.ErrOpenState) || errors.Is(err, breaker.ErrTooManyRequests)
	switch {
	case errors.Is(err, executor.ErrQueueTimeout) && cfg.timeout == 0:
		t.Errorf("%s: timed out without a queue timeout: %v", name, err)
	case errors.Is(err, executor.ErrDisplaced) && (cfg.handler || cfg.rejection != policy.DiscardOldest):
		t.Errorf("%s: displaced under %v (handler %v): %v", name, cfg.rejection, cfg.handler, err)
	case (errors.Is(err, breaker.ErrOpenState) || errors.Is(err, breaker.ErrTooManyRequests)) && !cfg.breaker:
		t.Errorf("%s: refused by a breaker it does not have: %v", name, err)
	case late && submitErr != nil:
		t.Errorf("%s: removed after admission (%v), yet Submit returned %v", name, err, submitErr)
	case byBreaker && submitErr != nil && !errors.Is(submitErr, breaker.ErrOpenState) && !errors.Is(submitErr, breaker.ErrTooManyRequests):
		t.Errorf("%s: refused by its breaker at admission (%v), yet Submit returned %v", name, err, submitErr)
	case byBreaker:
	case forced && submitErr == nil:
		t.Errorf("%s: refused with no choice (%v), yet Submit returned nil", name, err)
	case !forced && !late && !cfg.handler && cfg.rejection == policy.Abort && submitErr == nil:
		t.Errorf("%s: refused under Abort (%v), yet Submit returned nil", name, err)
	case !forced && !late && !cfg.handler && cfg.rejection == policy.CallerRuns:
		t.Errorf("%s: refused for lack of room under CallerRuns (%v), yet not run", name, err)
	case !forced && !late && !cfg.handler && cfg.rejection != policy.Abort && submitErr != nil:
		t.Errorf("%s: discarded under %v (%v), yet Submit returned %v", name, cfg.rejection, err, submitErr)
	}
}

// checkStressEvents checks the listener's events for a Submit task with
// an ID against its outcome.
func checkStressEvents(t *testing.T, name string, c *stressCall, res executor.Result[int], log *listenerLog, handler bool) {
	t.Helper()
	log.mu.Lock()
	ev, st := string(log.events[c.id]), log.status[c.id]
	log.mu.Unlock()
	if c.invalid {
		if ev != "R" {
			t.Errorf("%s: invalid, events %q", name, ev)
		}
		return
	}
	runs := c.runs.Load()
	ok := false
	switch ev {
	case "SR":
		ok = runs == 0 && res.Status == executor.Rejected
	case "SC":
		ok = runs == 0 && res.Status == executor.Cancelled
	case "SBC":
		// A task that a rejection handler runs (RunInCaller) is told
		// started and completed only.
		ok = runs <= 1 && (!c.outside.Load() || handler)
	case "SRBC":
		ok = runs == 1 && c.outside.Load()
	}
	if !ok || st != res.Status {
		t.Errorf("%s: events %q (last status %v), result %v %v after %d runs (in its caller: %v)",
			name, ev, st, res.Status, res.Err, runs, c.outside.Load())
	}
}
