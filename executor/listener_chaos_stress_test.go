package executor_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// TestListenerChaosStress drives executors whose listener, on a random
// fraction of the events of each kind, panics or exits the goroutine
// (runtime.Goexit), under configurations drawn at random: a small global
// limit, weights, queue timeouts on a fake clock advanced at random (or
// one that arms no timer, so that a dispatch alone finds them), every
// rejection policy, group breakers, a cluster limiter, runtime limit
// changes (never under a task's weight), evictions and group shutdowns,
// contexts cancelled at random, and a Shutdown or Close while the callers
// still call.
// Every executor call that may tell the listener runs on a goroutine of its
// own, since an exit ends it: its end without returning counts as "the call
// did not return". It checks from inside the tasks that no limit is
// exceeded (above what ran when it was lowered: ceilings), and at the end
// that every call returned or exited, every handle completes once, every
// group drains, the counts add up at quiescence and Close returns.
//
// Each subtest logs its seed and configuration. GROUPEXEC_CHAOS_SEED
// replays one seed; GROUPEXEC_CHAOS_RUNS sets the seeds per GOMAXPROCS.
func TestListenerChaosStress(t *testing.T) {
	seededRuns(t, "GROUPEXEC_CHAOS", 8, 1, runListenerChaos)
}

// The listener's event kinds.
const (
	evSubmitted = iota
	evStarted
	evCompleted
	evRejected
	evKinds
)

var evNames = [evKinds]string{"OnSubmitted", "OnStarted", "OnCompleted", "OnRejected"}

// chaosConfig is one drawn configuration.
type chaosConfig struct {
	groups, callers, perCaller int
	global, inFlight, conc     int
	queue, globalQueue         int
	maxWeight                  int
	rejection                  policy.RejectionPolicy
	timeout                    time.Duration
	timerless                  bool // the clock arms no timer: a dispatch alone finds a queue timeout
	breaker                    bool
	cluster                    int // a cluster limiter's permits; 0: none
	maxIdle                    int
	exits, panics              [evKinds]int // per mille of each kind's events
	closeChaos                 bool         // the first Close runs with the chaos on
	early                      int          // earlyNone ... earlyClose
	earlyAt                    int          // the caller operation after which it comes
}

// What ends the executor while the callers still call.
const (
	earlyNone     = iota
	earlyShutdown // Shutdown that waits for everything
	earlyCancel   // Shutdown out of time: it cancels what is left
	earlyClose
)

func drawChaosConfig(r *rand.Rand) chaosConfig {
	c := chaosConfig{
		groups:      2 + r.IntN(4),
		callers:     3 + r.IntN(6),
		perCaller:   15 + r.IntN(30),
		global:      1 + r.IntN(4),
		inFlight:    unlimitedOr(r, 2, 2+r.IntN(8)),
		conc:        1 + r.IntN(3),
		queue:       unlimitedOr(r, 3, r.IntN(6)),
		globalQueue: unlimitedOr(r, 2, r.IntN(12)),
		maxWeight:   1 + r.IntN(2),
		rejection:   policy.RejectionPolicy(r.IntN(4)),
		breaker:     r.IntN(3) == 0,
		maxIdle:     r.IntN(3),
		closeChaos:  r.IntN(2) == 0,
	}
	if r.IntN(3) == 0 {
		c.early = 1 + r.IntN(3)
		c.earlyAt = 1 + r.IntN(c.callers*c.perCaller)
	}
	if r.IntN(4) != 0 {
		c.timeout = time.Duration(1+r.IntN(20)) * time.Millisecond
		c.timerless = r.IntN(3) == 0
	}
	if r.IntN(3) == 0 {
		c.cluster = 1 + r.IntN(3)
	}
	for k := range evKinds {
		if r.IntN(4) != 0 {
			// An exit in OnRejected may come from an unlock's dispatch
			// that times out another group's head: it ends whatever the
			// unlocking call was to do next (a finish's completion or
			// the task it started for its worker, a cancel's completion,
			// a refusal left to the handler or CallerRuns, ...), which
			// must be done all the same.
			c.exits[k] = r.IntN(300)
		}
		if r.IntN(3) != 0 {
			c.panics[k] = r.IntN(300)
		}
	}
	return c
}

func (c chaosConfig) String() string {
	n := func(v int) string {
		if v == policy.Unlimited {
			return "unlimited"
		}
		return strconv.Itoa(v)
	}
	return fmt.Sprintf("groups=%d callers=%d perCaller=%d global=%d inFlight=%s conc=%d queue=%s globalQueue=%s "+
		"maxWeight=%d rejection=%v timeout=%v timerless=%v breaker=%v cluster=%d maxIdle=%d exits‰=%v panics‰=%v closeChaos=%v early=%s",
		c.groups, c.callers, c.perCaller, c.global, n(c.inFlight), c.conc, n(c.queue), n(c.globalQueue),
		c.maxWeight, c.rejection, c.timeout, c.timerless, c.breaker, c.cluster, c.maxIdle, c.exits, c.panics, c.closeChaos,
		[...]string{"none", "Shutdown", "Shutdown out of time", "Close"}[c.early]+"@"+strconv.Itoa(c.earlyAt))
}

// chaosListener panics or exits the goroutine on a drawn fraction of each
// kind of event, while on; it counts the terminal events of each task ID.
type chaosListener struct {
	cfg    chaosConfig
	seed   uint64
	n      atomic.Uint64
	on     atomic.Bool
	exited [evKinds]atomic.Int64
	panick [evKinds]atomic.Int64
	seen   [evKinds]atomic.Int64

	mu        sync.Mutex
	completed map[string]int // OnCompleted per task ID
	rejected  map[string]int // OnRejected per task ID
}

func (l *chaosListener) act(kind int, e executor.Event) {
	l.seen[kind].Add(1)
	if e.ID != "" && (kind == evCompleted || kind == evRejected) {
		l.mu.Lock()
		if kind == evCompleted {
			l.completed[e.ID]++
		} else {
			l.rejected[e.ID]++
		}
		l.mu.Unlock()
	}
	if !l.on.Load() {
		return
	}
	r := rand.New(rand.NewPCG(l.seed, l.n.Add(1)))
	x := r.IntN(1000)
	if x < l.cfg.exits[kind] {
		l.exited[kind].Add(1)
		runtime.Goexit()
	}
	if x < l.cfg.exits[kind]+l.cfg.panics[kind] {
		l.panick[kind].Add(1)
		panic("chaos listener: " + evNames[kind])
	}
}

func (l *chaosListener) funcs() executor.ListenerFuncs {
	return executor.ListenerFuncs{
		Submitted: func(e executor.Event) { l.act(evSubmitted, e) },
		Started:   func(e executor.Event) { l.act(evStarted, e) },
		Completed: func(e executor.Event) { l.act(evCompleted, e) },
		Rejected:  func(e executor.Event) { l.act(evRejected, e) },
	}
}

// chaosLimiter is a cluster limiter of a fixed number of permits per key,
// held locally; a release that frees permits a TryAcquire waited for
// notifies the key from a goroutine of its own.
type chaosLimiter struct {
	cap    int
	notify func(string)
	mu     sync.Mutex
	used   map[string]int
	wanted map[string]bool
	over   func(string)
	wg     sync.WaitGroup
}

func (l *chaosLimiter) Attach(notify func(string)) error { l.notify = notify; return nil }

func (l *chaosLimiter) TryAcquire(key string, n int) (executor.LimiterPermit, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.used[key]+n > l.cap {
		if n > l.cap {
			return nil, errors.New("chaos limiter: too heavy")
		}
		l.wanted[key] = true
		return nil, nil
	}
	l.used[key] += n
	return &chaosPermit{l: l, key: key, n: n}, nil
}

type chaosPermit struct {
	l    *chaosLimiter
	key  string
	n    int
	done atomic.Bool
}

func (p *chaosPermit) Bind(ctx context.Context, _ context.CancelCauseFunc) context.Context {
	return ctx
}

func (p *chaosPermit) Release() {
	if !p.done.CompareAndSwap(false, true) {
		p.l.over("a cluster permit released twice")
		return
	}
	l := p.l
	l.mu.Lock()
	l.used[p.key] -= p.n
	if l.used[p.key] < 0 {
		l.over("cluster permits below 0")
	}
	wanted := l.wanted[p.key]
	delete(l.wanted, p.key)
	l.mu.Unlock()
	if wanted {
		l.wg.Go(func() { l.notify(p.key) }) // never under the executor's lock
	}
}

// chaosGuard bounds a run of the test: a hang guard, not a timing
// assertion.
const chaosGuard = 30 * time.Second

// ceiling is the highest value a limit has had.
type ceiling struct{ v atomic.Int64 }

func (c *ceiling) raise(n int) {
	for {
		old := c.v.Load()
		if int64(n) <= old || c.v.CompareAndSwap(old, int64(n)) {
			return
		}
	}
}

func runListenerChaos(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 0))
	cfg := drawChaosConfig(r)
	t.Logf("seed %d: %v", seed, cfg)
	defer func() {
		if t.Failed() {
			t.Logf("replay: GROUPEXEC_CHAOS_SEED=%d go test -race -run 'TestListenerChaosStress' ./executor/", seed)
		}
	}()
	var broken violations
	defer broken.check(t)

	lis := &chaosListener{cfg: cfg, seed: seed, completed: map[string]int{}, rejected: map[string]int{}}
	clk := &panickyClock{Fake: fakeClock()}
	clk.arm.Store(cfg.timerless)
	popts := []policy.Option{
		policy.WithGlobalMaxInFlight(cfg.global),
		policy.WithDefaultMaxInFlight(cfg.inFlight),
		policy.WithDefaultMaxConcurrency(cfg.conc),
		policy.WithDefaultQueueThreshold(cfg.queue),
		policy.WithGlobalQueueThreshold(cfg.globalQueue),
		policy.WithRejectionPolicy(cfg.rejection),
	}
	if cfg.timeout > 0 {
		popts = append(popts, policy.WithQueueTimeout(cfg.timeout))
	}
	p, err := policy.New(popts...)
	if err != nil {
		t.Fatalf("policy.New: %v", err)
	}
	eopts := []executor.Option{executor.WithListener(lis.funcs()), executor.WithClock(clk), executor.WithMaxIdleGroups(cfg.maxIdle)}
	if cfg.breaker {
		eopts = append(eopts, executor.WithGroupBreaker(breaker.Settings{
			Timeout:     5 * time.Millisecond,
			ReadyToTrip: func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 3 },
		}))
	}
	var lim *chaosLimiter
	if cfg.cluster > 0 {
		lim = &chaosLimiter{cap: cfg.cluster, used: map[string]int{}, wanted: map[string]bool{}, over: broken.add}
		eopts = append(eopts, executor.WithGroupLimiter(lim))
	}
	ex, err := executor.New(p, eopts...)
	if err != nil {
		t.Fatalf("executor.New: %v", err)
	}
	lis.on.Store(true)

	// own runs f on a goroutine of its own and reports whether f returned:
	// false if it exited the goroutine. A panic out of f is a violation.
	// Every wait of the test ends by one deadline: a hang guard, not a
	// timing assertion.
	deadline := time.Now().Add(chaosGuard)
	guard := func() <-chan time.Time { return time.After(max(time.Until(deadline), time.Millisecond)) }
	var exitsMu sync.Mutex
	exitsBy := map[string]int{} // the calls that exited, by name
	own := func(what string, f func()) (returned bool) {
		done := make(chan bool, 1)
		go func() {
			ret := false
			defer func() {
				if v := recover(); v != nil {
					broken.add(fmt.Sprintf("%s panicked: %v", what, v))
				}
				done <- ret
			}()
			f()
			ret = true
		}()
		select {
		case ret := <-done:
			if !ret {
				exitsMu.Lock()
				exitsBy[what]++
				exitsMu.Unlock()
			}
			return ret
		case <-guard():
			broken.add(what + " neither returned nor exited")
			return false
		}
	}

	// The limits' ceilings, and what runs under them, seen from the tasks.
	checkLimits := cfg.rejection != policy.CallerRuns // CallerRuns runs tasks outside every limit
	var globalCeil ceiling
	globalCeil.raise(cfg.global)
	concCeil := make([]ceiling, cfg.groups)
	for i := range concCeil {
		concCeil[i].raise(cfg.conc)
	}
	var globalRunning atomic.Int64
	groupRunning := make([]atomic.Int64, cfg.groups)
	body := func(gi, w, mode int) func(context.Context) error {
		return func(ctx context.Context) error {
			if checkLimits {
				if n := globalRunning.Add(int64(w)); n > globalCeil.v.Load() {
					broken.add(fmt.Sprintf("%d permits running, global ceiling %d", n, globalCeil.v.Load()))
				}
				if n := groupRunning[gi].Add(int64(w)); n > concCeil[gi].v.Load() {
					broken.add(fmt.Sprintf("group g%d: %d permits running, ceiling %d", gi, n, concCeil[gi].v.Load()))
				}
				defer func() {
					globalRunning.Add(-int64(w))
					groupRunning[gi].Add(-int64(w))
				}()
			}
			switch mode {
			case 0:
				return nil
			case 1:
				return errors.New("chaos task failed")
			default:
				for range mode * 3 {
					if ctx.Err() != nil {
						return ctx.Err()
					}
					runtime.Gosched()
				}
				return nil
			}
		}
	}

	var (
		hmu     sync.Mutex
		handles []*executor.Handle[int]
		taskSeq atomic.Int64
	)
	keepHandle := func(h *executor.Handle[int]) {
		hmu.Lock()
		handles = append(handles, h)
		hmu.Unlock()
	}
	var returnedCalls, exitedCalls atomic.Int64
	counted := func(returned bool) {
		if returned {
			returnedCalls.Add(1)
		} else {
			exitedCalls.Add(1)
		}
	}

	// The fake clock moves at random while the callers call.
	stopClock := make(chan struct{})
	var clockDone sync.WaitGroup
	clockDone.Go(func() {
		cr := rand.New(rand.NewPCG(seed, 1))
		for {
			select {
			case <-stopClock:
				return
			default:
			}
			clk.Advance(time.Duration(cr.IntN(3)) * time.Millisecond)
			for range 1 + cr.IntN(20) {
				runtime.Gosched()
			}
		}
	})

	// The executor's early end, with the chaos on, while the callers call.
	var ops atomic.Int64
	var early sync.WaitGroup
	endEarly := func() {
		switch cfg.early {
		case earlyShutdown:
			counted(own("Shutdown", func() { _ = ex.Shutdown(bg) }))
		case earlyCancel:
			ctx, cancel := context.WithCancel(bg)
			cancel()
			counted(own("Shutdown", func() { _ = ex.Shutdown(ctx) }))
		case earlyClose:
			counted(own("Close", func() { _ = ex.Close() }))
		}
	}

	var callers sync.WaitGroup
	for ci := range cfg.callers {
		cr := rand.New(rand.NewPCG(seed, uint64(ci)+2))
		callers.Go(func() {
			var mine []*executor.Handle[int]
			for range cfg.perCaller {
				if cfg.early != earlyNone && ops.Add(1) == int64(cfg.earlyAt) {
					early.Go(endEarly)
				}
				gi := cr.IntN(cfg.groups)
				group := fmt.Sprint("g", gi)
				w := 1 + cr.IntN(cfg.maxWeight)
				mode := cr.IntN(6)
				// The call's context: none that ends, one cancelled
				// at random, or one already ended.
				ctx, cancel := context.Background(), context.CancelFunc(func() {})
				cancelAt := -1
				switch x := cr.IntN(6); {
				case x < 2:
					ctx, cancel = context.WithCancel(bg)
					cancelAt = cr.IntN(3) // before the call's end, after it, or concurrently
				case x == 2:
					ctx, cancel = context.WithCancel(bg)
					cancel()
				}
				var concurrent sync.WaitGroup
				if cancelAt == 0 {
					concurrent.Go(func() { runtime.Gosched(); cancel() })
				}
				switch op := cr.IntN(20); {
				case op < 6: // Submit
					id := fmt.Sprint("t", taskSeq.Add(1))
					var h *executor.Handle[int]
					fn := body(gi, w, mode)
					counted(own("Submit", func() {
						h, _ = executor.Submit(ex, ctx, executor.Task[int]{Group: group, ID: id, Weight: w,
							Fn: func(ctx context.Context) (int, error) { return 0, fn(ctx) }})
					}))
					if h != nil {
						mine = append(mine, h)
						keepHandle(h)
						if cr.IntN(4) == 0 {
							counted(own("Cancel", func() { h.Cancel() }))
						}
					}
				case op < 11: // Do
					fn := body(gi, w, mode)
					counted(own("Do", func() { _ = ex.DoWeighted(ctx, group, w, fn) }))
				case op < 14: // Go
					fn := body(gi, 1, mode)
					counted(own("Go", func() { _ = ex.Go(ctx, group, fn) }))
				case op < 15: // ExecuteAll
					n := 1 + cr.IntN(4)
					tasks := make([]executor.Task[int], n)
					for i := range tasks {
						tgi := cr.IntN(cfg.groups)
						fn := body(tgi, w, cr.IntN(6))
						tasks[i] = executor.Task[int]{Group: fmt.Sprint("g", tgi), ID: fmt.Sprint("t", taskSeq.Add(1)), Weight: w,
							Fn: func(ctx context.Context) (int, error) { return 0, fn(ctx) }}
					}
					counted(own("ExecuteAll", func() {
						if res := executor.ExecuteAll(ex, ctx, tasks); len(res) != n {
							broken.add(fmt.Sprintf("ExecuteAll of %d tasks returned %d results", n, len(res)))
						}
					}))
				case op < 16: // SetGlobalMaxInFlight
					// Never under a task's weight: a waiting task heavier
					// than the limit would wait until it is raised again.
					n := cfg.maxWeight + cr.IntN(cfg.global+1)
					globalCeil.raise(n)
					counted(own("SetGlobalMaxInFlight", func() { _ = ex.SetGlobalMaxInFlight(n) }))
				case op < 17: // SetGroupLimits
					l := policy.GroupLimits{MaxInFlight: unlimitedOr(cr, 2, 1+cr.IntN(8)), MaxConcurrency: cfg.maxWeight + cr.IntN(2),
						QueueThreshold: unlimitedOr(cr, 2, cr.IntN(5)), Share: 1 + cr.IntN(3)}
					concCeil[gi].raise(l.MaxConcurrency)
					counted(own("SetGroupLimits", func() { _ = ex.SetGroupLimits(group, l) }))
				case op < 18: // EvictGroup
					counted(own("EvictGroup", func() { ex.EvictGroup(group) }))
				case op < 19: // ShutdownGroup, out of time at once or soon, then evicted
					sctx, scancel := context.WithCancel(bg)
					if cr.IntN(2) == 0 {
						scancel()
					} else {
						concurrent.Go(func() {
							for range 20 {
								runtime.Gosched()
							}
							scancel()
						})
					}
					counted(own("ShutdownGroup", func() { _ = ex.ShutdownGroup(sctx, group) }))
					scancel()
					counted(own("EvictGroup", func() { ex.EvictGroup(group) }))
				default: // Cancel one of this caller's handles
					if len(mine) > 0 {
						h := mine[cr.IntN(len(mine))]
						counted(own("Cancel", func() { h.Cancel() }))
					}
				}
				if cancelAt == 1 {
					cancel()
				}
				concurrent.Wait()
				cancel()
			}
		})
	}
	callers.Wait()
	early.Wait()
	close(stopClock)
	clockDone.Wait()

	// Quiescence: limits raised again (one lowered under a waiting task's
	// weight would hold it), queue timeouts let expire, then every group
	// drains, chaos still on.
	top := cfg.global + cfg.maxWeight
	globalCeil.raise(top)
	own("SetGlobalMaxInFlight", func() { _ = ex.SetGlobalMaxInFlight(top) })
	for gi := range cfg.groups {
		concCeil[gi].raise(cfg.maxWeight)
		own("SetGroupLimits", func() {
			_ = ex.SetGroupLimits(fmt.Sprint("g", gi), policy.GroupLimits{MaxInFlight: policy.Unlimited,
				MaxConcurrency: cfg.maxWeight, QueueThreshold: policy.Unlimited, Share: 1})
		})
	}
	clk.Advance(time.Hour)
	for gi := range cfg.groups {
		group := fmt.Sprint("g", gi)
		if c := ex.Drained(group); c != nil {
			select {
			case <-c:
			case <-guard():
				gs, _ := ex.GroupStats(group)
				broken.add(fmt.Sprintf("group %s never drains: %+v; executor %+v", group, gs, ex.Stats()))
			}
		}
	}
	hmu.Lock()
	for _, h := range handles {
		ctx, cancel := context.WithDeadline(bg, deadline)
		if _, err := h.Wait(ctx); err != nil {
			broken.add(fmt.Sprintf("handle %s/%s never completes: %v", h.Group(), h.ID(), err))
		}
		cancel()
	}
	hmu.Unlock()
	if msg := ex.CheckInvariants(); msg != "" {
		broken.add("invariant at quiescence: " + msg)
	}
	s := ex.Stats()
	if s.Running != 0 || s.Waiting != 0 || s.RunningTasks != 0 {
		broken.add(fmt.Sprintf("at quiescence: %+v", s))
	}
	if out := s.Succeeded + s.Failed + s.Cancelled + s.Rejected; out != s.Submitted {
		exitsMu.Lock()
		msg := fmt.Sprintf("at quiescence: %d submitted, %d outcomes (%+v); calls exited %v; groups:", s.Submitted, out, s.TaskCounts, exitsBy)
		exitsMu.Unlock()
		for gi := range cfg.groups {
			if gs, ok := ex.GroupStats(fmt.Sprint("g", gi)); ok {
				msg += fmt.Sprintf(" g%d %+v", gi, gs.TaskCounts)
			}
		}
		broken.add(msg)
	}
	if n := executor.DoubleCompletions(); n != 0 {
		broken.add(fmt.Sprintf("%d handles completed twice", n))
	}
	lis.mu.Lock()
	for id, n := range lis.completed {
		if n > 1 {
			broken.add(fmt.Sprintf("task %s: OnCompleted %d times", id, n))
		}
	}
	for id, n := range lis.rejected {
		if n > 1 {
			broken.add(fmt.Sprintf("task %s: OnRejected %d times", id, n))
		}
	}
	lis.mu.Unlock()

	// Close, with the chaos on or not; a Close that exited is called again
	// with it off, and must return.
	if cfg.closeChaos {
		own("Close", func() { ex.Close() })
	}
	lis.on.Store(false)
	if !own("Close", func() { ex.Close() }) {
		broken.add("Close did not return with the listener quiet")
	}
	if lim != nil {
		lim.wg.Wait()
	}
	if s := ex.Stats(); s.Running != 0 || s.Waiting != 0 || s.RunningTasks != 0 {
		broken.add(fmt.Sprintf("after Close: %+v", s))
	}
	var exited, panicked [evKinds]int64
	for k := range evKinds {
		exited[k], panicked[k] = lis.exited[k].Load(), lis.panick[k].Load()
	}
	t.Logf("calls returned %d, exited %d; listener exits %v, panics %v; %+v",
		returnedCalls.Load(), exitedCalls.Load(), exited, panicked, s.TaskCounts)
}
