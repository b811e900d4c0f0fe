package executor_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// Every callback the executor runs user code in calls back into the
// executor, at random: listeners, the rejection handler, a group breaker's
// OnStateChange and ReadyToTrip, the limit resolvers, the spawn function,
// a permit's Bind, a submitted context's methods, and the tasks' functions.
// Calls that wait (Do, ExecuteAll, Handle.Wait) go only to leaf groups,
// whose tasks never wait, and only from code run for a parent group's
// task: the parents' concurrency leaves the leaves global room, so no
// wait is a starvation the package documents. The run must end without a
// hang, with every task's function run at most once, every handle and Do
// call ended once, no limit exceeded as counted inside the tasks, no
// cluster permit leaked or released twice, and the executor quiescent.
func TestReentrantCallbacks(t *testing.T) {
	seededRuns(t, "REENTRANT", 6, 2, func(t *testing.T, seed uint64) {
		r := newReentrant(t, seed)
		r.run(t)
	})
}

const (
	reParents    = 4  // groups p0..p3, whose code may wait on leaves
	reLeaves     = 2  // groups l0, l1, whose tasks never wait
	reMaxConc    = 3  // every group's concurrency limit stays in [1, reMaxConc]
	reFixedConc  = 2  // group fx's, never changed
	reMaxGlobal  = 16 // the global limit stays in [reMinGlobal, reMaxGlobal]
	reMinGlobal  = 14 // above the parents' reParents*reMaxConc
	reLimiterCap = 2  // cluster permits per group key
	reBudget     = 1500
)

type reentrant struct {
	t   *testing.T
	rnd func(int) int
	ex  *executor.Executor
	clk interface{ Advance(time.Duration) int }

	budget atomic.Int64 // re-entrant calls left
	aux    sync.WaitGroup

	running      sync.Map // group -> *atomic.Int64
	global       atomic.Int64
	violations   violations
	handles      sync.Mutex
	leafHandles  []*executor.Handle[int]
	allHandles   []*executor.Handle[int]
	runs         sync.Map // task ID -> *atomic.Int32
	nextID       atomic.Int64
	doCalls      sync.Map // *atomic.Int32 -> *reDoCall
	limiter      *reLimiter
	events       sync.Map // task ID -> *reEvents
	stopped      atomic.Bool
	listening    bool
	calledInside atomic.Int64
}

type reEvents struct{ submitted, started, completed, rejected atomic.Int32 }

type reDoCall struct {
	runs *atomic.Int32
	mu   sync.Mutex
	err  error
	done bool
}

func newReentrant(t *testing.T, seed uint64) *reentrant {
	r := &reentrant{t: t, rnd: sharedRand(seed)}
	r.budget.Store(reBudget)
	clk := fakeClock()
	r.clk = clk
	r.limiter = &reLimiter{r: r, held: map[string]int{}, wanted: map[string]bool{}}
	resolve := func(group string) (int, bool) {
		r.act("resolver", false)
		if group == "fx" {
			return reFixedConc, true
		}
		return 1 + r.rnd(reMaxConc), true
	}
	// Each seed leaves some callbacks out, so that the paths taken only
	// without them (light tasks, lanes) are crossed too.
	popts := []policy.Option{
		policy.WithGlobalMaxInFlight(reMaxGlobal),
		policy.WithMaxConcurrencyResolver(resolve),
		policy.WithRejectionPolicy([]policy.RejectionPolicy{policy.Abort, policy.Discard, policy.CallerRuns, policy.DiscardOldest}[r.rnd(4)]),
	}
	if r.rnd(2) == 0 {
		popts = append(popts, policy.WithDefaultQueueThreshold(1+r.rnd(8)))
	} else {
		popts = append(popts, policy.WithDefaultMaxInFlight(policy.Unlimited))
	}
	if r.rnd(2) == 0 {
		popts = append(popts, policy.WithQueueTimeout(time.Minute))
	}
	p, err := policy.New(popts...)
	if err != nil {
		t.Fatal(err)
	}
	listen := func(what string) func(executor.Event) {
		return func(e executor.Event) {
			if e.ID != "" {
				ev := r.eventsOf(e.ID)
				switch what {
				case "submitted":
					ev.submitted.Add(1)
				case "started":
					ev.started.Add(1)
				case "completed":
					ev.completed.Add(1)
				case "rejected":
					ev.rejected.Add(1)
				}
			}
			r.act("listener "+what, what == "started" && isParent(e.Group))
		}
	}
	eopts := []executor.Option{
		executor.WithClock(clk),
		executor.WithRejectionHandler(func(rej *executor.Rejection) error {
			r.act("rejection handler", false)
			// Outside every limit: not counted against them, which the
			// flag in the task's context says (context.Background, which
			// lets Go recycle its tasks, has none).
			// Not a parent's: the listener, told the task started in its
			// caller, cannot tell that caller, which may not wait.
			if m, ok := rej.Ctx.Value(inCallerKey{}).(*atomic.Bool); ok && !isParent(rej.Group) && r.rnd(3) == 0 {
				m.Store(true)
				rej.RunInCaller()
			}
			return rej.Err
		}),
		executor.WithSpawn(func(f func()) {
			r.act("spawn", false)
			go f()
		}),
	}
	if r.rnd(3) != 0 {
		r.listening = true
		eopts = append(eopts, executor.WithListener(executor.ListenerFuncs{
			Submitted: listen("submitted"), Started: listen("started"),
			Completed: listen("completed"), Rejected: listen("rejected"),
		}))
	}
	if r.rnd(3) != 0 {
		eopts = append(eopts, executor.WithGroupBreaker(breaker.Settings{
			Timeout: time.Minute,
			ReadyToTrip: func(c breaker.Counts) bool {
				r.act("ReadyToTrip", false)
				return c.ConsecutiveFailures >= 3
			},
			OnStateChange: func(name string, _, _ breaker.State) { r.act("OnStateChange", isParent(name)) },
		}))
	}
	if r.rnd(3) != 0 {
		eopts = append(eopts, executor.WithGroupLimiter(r.limiter))
	}
	if r.rnd(2) == 0 {
		// Groups reclaimed as they go idle, while callbacks run for them.
		eopts = append(eopts, executor.WithMaxIdleGroups(r.rnd(3)))
	}
	ex, err := executor.New(p, eopts...)
	if err != nil {
		t.Fatal(err)
	}
	r.ex = ex
	return r
}

func isParent(group string) bool { return strings.HasPrefix(group, "p") }

func (r *reentrant) eventsOf(id string) *reEvents {
	v, _ := r.events.LoadOrStore(id, new(reEvents))
	return v.(*reEvents)
}

func (r *reentrant) counter(group string) *atomic.Int64 {
	v, _ := r.running.LoadOrStore(group, new(atomic.Int64))
	return v.(*atomic.Int64)
}

func (r *reentrant) randomGroup() string {
	switch n := r.rnd(reParents + reLeaves + 1); {
	case n < reParents:
		return fmt.Sprint("p", n)
	case n < reParents+reLeaves:
		return fmt.Sprint("l", n-reParents)
	default:
		return "fx"
	}
}

func (r *reentrant) leafGroup() string { return fmt.Sprint("l", r.rnd(reLeaves)) }

// body returns a task's function for group: it counts itself running
// against the limits, runs once, and, for a non-leaf group, calls back.
func (r *reentrant) body(group string, runs *atomic.Int32, mayWait bool) func(context.Context) (int, error) {
	return func(ctx context.Context) (int, error) {
		if n := runs.Add(1); n > 1 {
			r.violations.add(fmt.Sprintf("a task of %s ran %d times", group, n))
		}
		if m, ok := ctx.Value(inCallerKey{}).(*atomic.Bool); ok && m.Load() {
			return r.bodyInCaller(group, mayWait)
		}
		c := r.counter(group)
		n, gl := c.Add(1), r.global.Add(1)
		limit := int64(reMaxConc)
		if group == "fx" {
			limit = reFixedConc
		}
		if n > limit {
			r.violations.add(fmt.Sprintf("%d tasks of %s running at once, limit %d", n, group, limit))
		}
		if gl > reMaxGlobal {
			r.violations.add(fmt.Sprintf("%d tasks running at once, global limit %d", gl, reMaxGlobal))
		}
		if !strings.HasPrefix(group, "l") {
			for range r.rnd(3) {
				r.act("fn", mayWait && isParent(group))
			}
		}
		// Held a while, so that queues form: how long changes only which
		// paths are taken, never what is checked.
		for range r.rnd(20) {
			runtime.Gosched()
		}
		c.Add(-1)
		r.global.Add(-1)
		if r.rnd(4) == 0 {
			return 0, errBackend
		}
		return 1, nil
	}
}

// inCallerKey keys, in a task's submitted context, the flag the rejection
// handler sets as it runs the task in its caller, outside every limit.
type inCallerKey struct{}

func (r *reentrant) bodyInCaller(group string, mayWait bool) (int, error) {
	if !strings.HasPrefix(group, "l") {
		r.act("fn", mayWait && isParent(group))
	}
	return 1, nil
}

// spawnTask submits a task to group, by Submit, Go or Do (Do only where it
// may wait: the leaves).
func (r *reentrant) spawnTask(group string, mayWait bool) {
	runs := new(atomic.Int32)
	// Refused, the task may run in its caller, which may not wait unless
	// mayWait says so.
	fn := r.body(group, runs, mayWait)
	ctx := context.Context(bg)
	switch r.rnd(3) {
	case 1:
		ctx = context.WithValue(bg, inCallerKey{}, new(atomic.Bool))
	case 2:
		ctx = &reCtx{Context: context.WithValue(bg, inCallerKey{}, new(atomic.Bool)), r: r}
	}
	switch k := r.rnd(3); {
	case k == 0 || (k == 2 && !mayWait):
		id := fmt.Sprint("t", r.nextID.Add(1))
		r.runs.Store(id, runs)
		h, _ := executor.Submit(r.ex, ctx, executor.Task[int]{Group: group, ID: id, Fn: fn})
		if h != nil {
			r.handles.Lock()
			r.allHandles = append(r.allHandles, h)
			if !isParent(group) {
				r.leafHandles = append(r.leafHandles, h)
			}
			r.handles.Unlock()
		}
	case k == 1:
		r.ex.Go(ctx, group, func(ctx context.Context) error { _, err := fn(ctx); return err })
	default:
		d := &reDoCall{runs: runs}
		r.doCalls.Store(runs, d)
		err := r.ex.Do(ctx, group, func(ctx context.Context) error { _, err := fn(ctx); return err })
		d.mu.Lock()
		d.err, d.done = err, true
		d.mu.Unlock()
	}
}

// act makes one re-entrant call, chosen at random, while the budget
// lasts. mayWait allows the calls that wait, on leaf groups only.
func (r *reentrant) act(where string, mayWait bool) {
	if r.budget.Add(-1) < 0 {
		return
	}
	ended, cancel := context.WithCancel(bg)
	cancel()
	n := 14
	if mayWait {
		n = 18
	}
	switch r.rnd(n) {
	case 0, 1:
		r.spawnTask(r.randomGroup(), false)
	case 2:
		r.ex.Stats()
	case 3:
		r.ex.GroupStats(r.randomGroup())
	case 4:
		if g := r.randomGroup(); g != "fx" {
			r.ex.SetGroupLimits(g, policy.GroupLimits{MaxInFlight: 64, MaxConcurrency: 1 + r.rnd(reMaxConc), QueueThreshold: r.rnd(8), Share: 1 + r.rnd(3)})
		}
	case 5:
		if g := r.randomGroup(); g != "fx" {
			r.ex.ResetGroupLimits(g)
		}
	case 6:
		r.ex.SetGlobalMaxInFlight(reMinGlobal + r.rnd(reMaxGlobal-reMinGlobal+1))
	case 7:
		r.ex.EvictGroup(r.randomGroup())
	case 8, 9:
		if h := r.someHandle(false); h != nil {
			if r.rnd(2) == 0 {
				h.Cancel()
			} else {
				h.Result()
			}
		}
	case 10:
		if r.rnd(30) == 0 {
			r.ex.ShutdownGroup(ended, r.randomGroup())
		}
	case 11:
		// Late in the run: a stopped executor refuses everything after.
		if r.budget.Load() < reBudget/10 && r.rnd(10) == 0 {
			r.stopped.Store(true)
			if err := r.ex.Shutdown(ended); errors.Is(err, executor.ErrCalledFromTask) {
				r.calledInside.Add(1)
			}
		}
	case 12:
		if r.budget.Load() < reBudget/10 && r.rnd(10) == 0 {
			r.stopped.Store(true)
			if where == "fn" {
				// A task's Fn must not wait for its own executor.
				r.aux.Add(1)
				go func() { defer r.aux.Done(); r.ex.Close() }()
			} else if err := r.ex.Close(); !errors.Is(err, executor.ErrCalledFromTask) {
				r.violations.add(fmt.Sprintf("Close from %s: %v, want ErrCalledFromTask", where, err))
			}
		}
	case 13:
		r.ex.BreakerRemainingDelay(r.randomGroup())
	case 14:
		r.spawnTask(r.leafGroup(), true)
	case 15:
		g := r.leafGroup()
		tasks := make([]executor.Task[int], 1+r.rnd(3))
		for i := range tasks {
			id := fmt.Sprint("t", r.nextID.Add(1))
			runs := new(atomic.Int32)
			r.runs.Store(id, runs)
			tasks[i] = executor.Task[int]{Group: g, ID: id, Fn: r.body(g, runs, true)}
		}
		// One flag for the batch: the handler runs all its refused tasks
		// in this caller.
		for _, res := range executor.ExecuteAll(r.ex, context.WithValue(bg, inCallerKey{}, new(atomic.Bool)), tasks) {
			if res.Status == 0 {
				r.violations.add("ExecuteAll returned a result without a status")
			}
		}
	case 16:
		if h := r.someHandle(true); h != nil {
			h.Wait(bg)
		}
	case 17:
		r.handles.Lock()
		hs := r.leafHandles
		r.handles.Unlock()
		if len(hs) > 0 {
			hs[r.rnd(len(hs))].Wait(bg)
		}
	}
}

func (r *reentrant) someHandle(leaf bool) *executor.Handle[int] {
	r.handles.Lock()
	defer r.handles.Unlock()
	hs := r.allHandles
	if leaf {
		hs = r.leafHandles
	}
	if len(hs) == 0 {
		return nil
	}
	return hs[r.rnd(len(hs))]
}

func (r *reentrant) run(t *testing.T) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		// In waves, the clock moved between them: queue timeouts expire
		// and open breakers let probes through while tasks come in.
		for range 3 {
			var callers sync.WaitGroup
			for range 40 {
				callers.Add(1)
				go func() {
					defer callers.Done()
					r.spawnTask(fmt.Sprint("p", r.rnd(reParents)), true)
				}()
			}
			r.clk.Advance(time.Minute)
			callers.Wait()
		}
	}()
	r.watch(t, done, "the submitting callers returned")
	// Whatever still waits starts, or its queue timeout ends it.
	quiet := make(chan struct{})
	go func() {
		defer close(quiet)
		for {
			s := r.ex.Stats()
			if s.Running == 0 && s.RunningTasks == 0 && s.Waiting == 0 && r.global.Load() == 0 {
				return
			}
			r.clk.Advance(time.Minute)
			runtime.Gosched()
		}
	}()
	r.watch(t, quiet, "the executor went quiescent")
	if msg := r.ex.CheckInvariants(); msg != "" {
		t.Error(msg)
	}
	closed := make(chan struct{})
	go func() { r.ex.Close(); close(closed) }()
	r.watch(t, closed, "Close returned")
	aux := make(chan struct{})
	go func() { r.aux.Wait(); r.limiter.notifies.Wait(); close(aux) }()
	r.watch(t, aux, "the goroutines the test started returned")

	r.violations.check(t)
	s := r.ex.Stats()
	if s.Running != 0 || s.RunningTasks != 0 || s.Waiting != 0 {
		t.Errorf("after Close: %+v", s)
	}
	if ended := s.Succeeded + s.Failed + s.Cancelled + s.Rejected; ended != s.Submitted {
		t.Errorf("%d tasks submitted, %d ended: %+v", s.Submitted, ended, s.TaskCounts)
	}
	if held := r.limiter.outstanding(); held != 0 {
		t.Errorf("%d cluster permits never released", held)
	}
	if n := executor.DoubleCompletions(); n != 0 {
		t.Errorf("%d handles completed twice", n)
	}
	r.handles.Lock()
	for _, h := range r.allHandles {
		res, ok := h.Result()
		if !ok {
			t.Errorf("handle %s of %s never completed", h.ID(), h.Group())
			continue
		}
		v, _ := r.runs.Load(h.ID())
		if runs := v.(*atomic.Int32).Load(); res.Status == executor.Success && runs != 1 {
			t.Errorf("task %s: Success after %d runs", h.ID(), runs)
		}
	}
	r.handles.Unlock()
	r.doCalls.Range(func(k, v any) bool {
		d := v.(*reDoCall)
		d.mu.Lock()
		defer d.mu.Unlock()
		if !d.done {
			t.Error("a Do call never returned")
		} else if runs := d.runs.Load(); d.err == nil && runs != 1 {
			t.Errorf("Do returned nil after %d runs of fn", runs)
		}
		return true
	})
	if !r.listening {
		return
	}
	r.events.Range(func(k, v any) bool {
		e := v.(*reEvents)
		sub, st, c, rej := e.submitted.Load(), e.started.Load(), e.completed.Load(), e.rejected.Load()
		if sub != 1 || st > 1 || c > 1 || rej > 1 || c+rej == 0 || (c == 1 && rej == 1 && st != 1) {
			t.Errorf("task %s: listener told submitted %d, started %d, completed %d, rejected %d", k, sub, st, c, rej)
		}
		return true
	})
}

// watch fails t, with every goroutine's stack, if c is not closed within
// hangGuard.
func (r *reentrant) watch(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(hangGuard):
		var b strings.Builder
		pprof.Lookup("goroutine").WriteTo(&b, 1)
		fmt.Fprintf(&b, "\nstats: %+v\n", r.ex.Stats())
		for _, g := range []string{"p0", "p1", "p2", "p3", "l0", "l1", "fx"} {
			gs, ok := r.ex.GroupStats(g)
			fmt.Fprintf(&b, "%s: %v %+v\n", g, ok, gs)
		}
		r.limiter.mu.Lock()
		fmt.Fprintf(&b, "limiter held %v wanted %v\n", r.limiter.held, r.limiter.wanted)
		r.limiter.mu.Unlock()
		t.Fatalf("%s: not within %v; goroutines:\n%s", what, hangGuard, b.String())
	}
}

// reCtx is a submitted context of a type of its own, whose methods call
// back into the executor.
type reCtx struct {
	context.Context
	r *reentrant
}

func (c *reCtx) Done() <-chan struct{} { c.r.act("ctx.Done", false); return c.Context.Done() }
func (c *reCtx) Err() error            { c.r.act("ctx.Err", false); return c.Context.Err() }
func (c *reCtx) Value(k any) any       { c.r.act("ctx.Value", false); return c.Context.Value(k) }

// reLimiter is a group limiter of reLimiterCap permits per key. It never
// calls the executor from TryAcquire or Release, as Limiter's contract
// says; its permits' Bind does.
type reLimiter struct {
	r        *reentrant
	mu       sync.Mutex
	held     map[string]int
	wanted   map[string]bool
	notify   func(string)
	notifies sync.WaitGroup
}

func (l *reLimiter) Attach(notify func(string)) error { l.notify = notify; return nil }

func (l *reLimiter) TryAcquire(key string, n int) (executor.LimiterPermit, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held[key]+n > reLimiterCap {
		l.wanted[key] = true
		return nil, nil
	}
	l.held[key] += n
	return &rePermit{l: l, key: key, n: n}, nil
}

func (l *reLimiter) outstanding() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, h := range l.held {
		n += h
	}
	return n
}

type rePermit struct {
	l        *reLimiter
	key      string
	n        int
	released atomic.Bool
}

func (p *rePermit) Bind(ctx context.Context, _ context.CancelCauseFunc) context.Context {
	p.l.r.act("Bind", false)
	return ctx
}

func (p *rePermit) Release() {
	if p.released.Swap(true) {
		p.l.r.violations.add("a cluster permit of " + p.key + " released twice")
		return
	}
	l := p.l
	l.mu.Lock()
	l.held[p.key] -= p.n
	wanted := l.wanted[p.key]
	delete(l.wanted, p.key)
	l.mu.Unlock()
	if wanted {
		// Never under the executor's lock Release is called under.
		l.notifies.Add(1)
		go func() { defer l.notifies.Done(); l.notify(p.key) }()
	}
}
