package executor_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// memLimiter is an in-memory executor.Limiter for the wiring's unit tests
// (the cluster/redislimit tests run against a real Redis): permits per key,
// handed out while any are left, given more by give. It counts permits
// released twice.
type memLimiter struct {
	mu      sync.Mutex
	avail   map[string]int
	asked   map[string]int // failed TryAcquires per key
	refuse  error
	notify  func(string)
	out     int // permits out
	doubles atomic.Int64
	binds   atomic.Int64
	lastCtx chan context.CancelCauseFunc
	attachE error
	errWith error  // TryAcquire returns a permit together with this error
	onBind  func() // called by Bind (a panic, a Goexit)
}

func newMemLimiter() *memLimiter {
	return &memLimiter{avail: map[string]int{}, asked: map[string]int{}, lastCtx: make(chan context.CancelCauseFunc, 1024)}
}

func (m *memLimiter) Attach(notify func(string)) error { m.notify = notify; return m.attachE }

func (m *memLimiter) TryAcquire(key string, n int) (executor.LimiterPermit, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.refuse != nil {
		return nil, m.refuse
	}
	if m.avail[key] < n {
		m.asked[key]++
		return nil, nil
	}
	m.avail[key] -= n
	m.out += n
	return &memPermit{m: m, key: key, n: n}, m.errWith
}

// give adds n permits to key and notifies, as a limiter does after a refill.
func (m *memLimiter) give(key string, n int) {
	m.mu.Lock()
	m.avail[key] += n
	m.mu.Unlock()
	m.notify(key)
}

func (m *memLimiter) outstanding() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.out
}

type memPermit struct {
	m        *memLimiter
	key      string
	n        int
	released bool
}

func (p *memPermit) Bind(ctx context.Context, cancel context.CancelCauseFunc) context.Context {
	p.m.binds.Add(1)
	if f := p.m.onBind; f != nil {
		f()
	}
	select {
	case p.m.lastCtx <- cancel:
	default:
	}
	return context.WithValue(ctx, memKey{}, p.key)
}

type memKey struct{}

func (p *memPermit) Release() {
	p.m.mu.Lock()
	defer p.m.mu.Unlock()
	if p.released {
		p.m.doubles.Add(1)
		return
	}
	p.released = true
	p.m.avail[p.key] += p.n
	p.m.out -= p.n
}

func TestClusterGroupLimiterWaitsAndNotifies(t *testing.T) {
	lim := newMemLimiter()
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(4)}, executor.WithGroupLimiter(lim))
	g := newGate()
	defer g.open() // a failure must not leave Close waiting on Fn
	h := submit(t, ex, executor.Task[string]{Group: "a", ID: "1", Fn: g.fn("1")})
	g.noneStarted(t)
	if s := groupStats(t, ex, "a"); s.Waiting != 1 || s.RunningTasks != 0 {
		t.Fatalf("with no cluster permit: waiting %d running %d, want 1 and 0", s.Waiting, s.RunningTasks)
	}
	lim.give("a", 1)
	g.waitStarted(t, 1)
	if got := lim.outstanding(); got != 1 {
		t.Fatalf("permits out while running: %d, want 1", got)
	}
	g.open()
	if r := wait(t, h); r.Status != executor.Success {
		t.Fatalf("status %v, want Success", r.Status)
	}
	if got := lim.outstanding(); got != 0 {
		t.Fatalf("permits out after completion: %d, want 0", got)
	}
}

func TestClusterGroupWaitDoesNotBlockOtherGroups(t *testing.T) {
	lim := newMemLimiter()
	ex := newExec(t, []policy.Option{policy.WithGlobalMaxInFlight(2), policy.WithDefaultMaxConcurrency(2)},
		executor.WithGroupLimiter(lim))
	lim.give("b", 10)
	g := newGate()
	defer g.open()
	submit(t, ex, executor.Task[string]{Group: "a", ID: "a1", Fn: g.fn("a1")})
	submit(t, ex, executor.Task[string]{Group: "b", ID: "b1", Fn: g.fn("b1")})
	submit(t, ex, executor.Task[string]{Group: "b", ID: "b2", Fn: g.fn("b2")})
	got := g.waitStarted(t, 2)
	if got[0] == "a1" || got[1] == "a1" {
		t.Fatalf("a1 started without a cluster permit: %v", got)
	}
	if msg := ex.CheckInvariants(); msg != "" {
		t.Fatal(msg)
	}
}

func TestClusterGlobalLimiterHoldsEveryGroup(t *testing.T) {
	lim := newMemLimiter()
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(4)}, executor.WithGlobalLimiter(lim))
	g := newGate()
	defer g.open()
	submit(t, ex, executor.Task[string]{Group: "a", ID: "a1", Fn: g.fn("a1")})
	submit(t, ex, executor.Task[string]{Group: "b", ID: "b1", Fn: g.fn("b1")})
	g.noneStarted(t)
	lim.give("", 1)
	g.waitStarted(t, 1)
	g.noneStarted(t)
	lim.give("", 1)
	g.waitStarted(t, 1)
}

func TestClusterRefusalRejectsWithCause(t *testing.T) {
	errDown := errors.New("cluster down")
	lim := newMemLimiter()
	ex := newExec(t, []policy.Option{policy.WithRejectionPolicy(policy.CallerRuns)}, executor.WithGroupLimiter(lim))
	g := newGate()
	defer g.open()
	// One task waits for a permit; then the limiter refuses everything.
	h1 := submit(t, ex, executor.Task[string]{Group: "a", ID: "1", Fn: g.fn("1")})
	lim.mu.Lock()
	lim.refuse = errDown
	lim.mu.Unlock()
	h2, err := executor.Submit(ex, bg, executor.Task[string]{Group: "a", ID: "2", Fn: g.fn("2")})
	if err != nil {
		t.Fatalf("queued behind a waiting task, Submit: %v", err)
	}
	lim.notify("a") // the waiting head asks again and is refused
	for _, h := range []*executor.Handle[string]{h1, h2} {
		r := wait(t, h)
		var rej *executor.RejectedError
		if r.Status != executor.Rejected || !errors.As(r.Err, &rej) || rej.Limit != executor.LimitClusterGroup || !errors.Is(r.Err, errDown) {
			t.Fatalf("%s: %v %v, want Rejected by %q matching the limiter's error", h.ID(), r.Status, r.Err, executor.LimitClusterGroup)
		}
	}
	// A refusal on the fast path is forced: CallerRuns does not run Fn
	// outside the cluster limit.
	h3, err := executor.Submit(ex, bg, executor.Task[string]{Group: "b", Fn: g.fn("3")})
	if !errors.Is(err, errDown) || !errors.Is(err, executor.ErrRejected) {
		t.Fatalf("Submit on the fast path: %v, want the limiter's error", err)
	}
	if r := wait(t, h3); r.Status != executor.Rejected {
		t.Fatalf("status %v, want Rejected", r.Status)
	}
	g.noneStarted(t)
}

func TestClusterPermitCancelsWithCause(t *testing.T) {
	errLost := errors.New("lease lost")
	lim := newMemLimiter()
	ex := newExec(t, nil, executor.WithGroupLimiter(lim))
	lim.give("a", 1)
	saw := make(chan error, 1)
	h := submit(t, ex, executor.Task[string]{Group: "a", Fn: func(ctx context.Context) (string, error) {
		if ctx.Value(memKey{}) != "a" {
			saw <- errors.New("Bind's context was not the one Fn got")
			return "", nil
		}
		<-ctx.Done()
		saw <- context.Cause(ctx)
		return "", ctx.Err()
	}})
	cancel := recv(t, lim.lastCtx, "the task's permit was bound")
	cancel(errLost)
	if err := recv(t, saw, "the task saw its context end"); !errors.Is(err, errLost) {
		t.Fatalf("context.Cause in Fn: %v, want %v", err, errLost)
	}
	if r := wait(t, h); r.Status != executor.Cancelled {
		t.Fatalf("status %v, want Cancelled", r.Status)
	}
}

func TestClusterQueueTimeoutApplies(t *testing.T) {
	clk := fakeClock()
	lim := newMemLimiter()
	ex := newExec(t, []policy.Option{policy.WithQueueTimeout(time.Second)}, executor.WithGroupLimiter(lim), executor.WithClock(clk))
	h := submit(t, ex, executor.Task[string]{Group: "a", Fn: func(context.Context) (string, error) { return "ran", nil }})
	clk.Advance(time.Second)
	r := wait(t, h)
	if r.Status != executor.Rejected || !errors.Is(r.Err, executor.ErrQueueTimeout) {
		t.Fatalf("%v %v, want Rejected by the queue timeout", r.Status, r.Err)
	}
}

func TestClusterAttachErrorFailsNew(t *testing.T) {
	lim := newMemLimiter()
	lim.attachE = errors.New("bad limit 0")
	p, _ := policy.New()
	if _, err := executor.New(p, executor.WithGroupLimiter(lim)); err == nil || !errors.Is(err, lim.attachE) {
		t.Fatalf("New: %v, want the Attach error", err)
	}
	if _, err := executor.New(p, executor.WithGlobalLimiter(nil)); err == nil {
		t.Fatal("WithGlobalLimiter(nil): New succeeded")
	}
}

// A limiter holding a nil pointer (a *memLimiter declared and never made)
// would panic in New, which calls its Attach, with no word of the option:
// New refuses it, naming the option and the value.
func TestClusterNilPointerLimiterFailsNew(t *testing.T) {
	p, _ := policy.New()
	for _, tc := range []struct {
		option string
		opt    executor.Option
	}{
		{"WithGlobalLimiter", executor.WithGlobalLimiter((*memLimiter)(nil))},
		{"WithGroupLimiter", executor.WithGroupLimiter((*memLimiter)(nil))},
	} {
		var err error
		func() {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("panic: %v", r)
				}
			}()
			var ex *executor.Executor
			if ex, err = executor.New(p, tc.opt); err == nil {
				ex.Close()
			}
		}()
		if want := tc.option + "((*executor_test.memLimiter)(nil))"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s with a nil *memLimiter: New: %v, want an error naming %s", tc.option, err, want)
		}
	}
}

// TestClusterStress runs random load with cancellations and panics through
// a global and a group limiter whose permits trickle in: no more permits
// are out than given, every permit comes back once, every handle completes.
func TestClusterStress(t *testing.T) {
	glob, grp := newMemLimiter(), newMemLimiter()
	ex := newExec(t, []policy.Option{policy.WithGlobalMaxInFlight(8), policy.WithDefaultMaxConcurrency(3),
		policy.WithQueueTimeout(200 * time.Millisecond)},
		executor.WithGlobalLimiter(glob), executor.WithGroupLimiter(grp))
	const groups, perGroup, global = 5, 2, 6
	var running [groups]atomic.Int32
	var total atomic.Int32
	var bad atomic.Value
	var wg sync.WaitGroup
	var handles sync.Map
	stop := make(chan struct{})
	closeAtEnd(t, stop)
	go func() { // permits trickle in, as refills would
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			if i < global {
				glob.give("", 1)
			}
			if i < groups*perGroup {
				grp.give(fmt.Sprint("g", i%groups), 1)
			}
			glob.notify("")
		}
	}()
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 7))
			for i := range 300 {
				gi, wt := r.IntN(groups), int32(1+r.IntN(2))
				ctx, cancel := context.WithCancel(bg)
				h, _ := executor.Submit(ex, ctx, executor.Task[int]{Group: fmt.Sprint("g", gi), ID: fmt.Sprint(w, "-", i),
					Weight: int(wt), Fn: func(ctx context.Context) (int, error) {
						if n := running[gi].Add(wt); n > perGroup {
							bad.Store(fmt.Sprintf("group g%d: %d running over its cluster limit %d", gi, n, perGroup))
						}
						if n := total.Add(wt); n > global {
							bad.Store(fmt.Sprintf("%d running over the cluster global limit %d", n, global))
						}
						defer running[gi].Add(-wt)
						defer total.Add(-wt)
						if rand.IntN(10) == 0 {
							panic("boom")
						}
						time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
						return 0, nil
					}})
				handles.Store(h, struct{}{})
				if r.IntN(4) == 0 {
					cancel()
				}
				defer cancel()
			}
		}()
	}
	waitAll(t, &wg, "every submitter returned")
	handles.Range(func(k, _ any) bool { wait(t, k.(*executor.Handle[int])); return true })
	close(stop)
	if v := bad.Load(); v != nil {
		t.Fatal(v)
	}
	if glob.outstanding() != 0 || grp.outstanding() != 0 {
		t.Fatalf("permits leaked: global %d, group %d", glob.outstanding(), grp.outstanding())
	}
	if glob.doubles.Load()+grp.doubles.Load() != 0 {
		t.Fatal("a permit was released twice")
	}
	if s := ex.Stats(); s.Running != 0 || s.Waiting != 0 {
		t.Fatalf("after the run: %+v", s)
	}
}

// A limiter that returns a permit together with an error refuses the task:
// the permit is released, global or group.
func TestClusterPermitWithErrorIsReleased(t *testing.T) {
	for _, global := range []bool{true, false} {
		t.Run(fmt.Sprint("global=", global), func(t *testing.T) {
			lim, other := newMemLimiter(), newMemLimiter()
			lim.errWith = errors.New("refused, permit attached")
			var opts []executor.Option
			if global {
				opts = append(opts, executor.WithGlobalLimiter(lim), executor.WithGroupLimiter(other))
				lim.avail[""] = 5
				other.avail["a"] = 5
			} else {
				opts = append(opts, executor.WithGlobalLimiter(other), executor.WithGroupLimiter(lim))
				other.avail[""] = 5
				lim.avail["a"] = 5
			}
			ex := newExec(t, nil, opts...)
			_, err := executor.Submit(ex, bg, executor.Task[int]{Group: "a", Fn: func(context.Context) (int, error) { return 1, nil }})
			if !errors.Is(err, executor.ErrRejected) || !errors.Is(err, lim.errWith) {
				t.Fatalf("Submit: %v, want a rejection with the limiter's error", err)
			}
			if a, b := lim.outstanding(), other.outstanding(); a != 0 || b != 0 {
				t.Fatalf("permits out after the refusal: %d and %d, want 0", a, b)
			}
		})
	}
}

// A Bind that panics or calls runtime.Goexit fails the task without running
// Fn; its permits and its worker are released.
func TestClusterBindPanicOrGoexitReleases(t *testing.T) {
	for _, tc := range []struct {
		name string
		bind func()
		want func(error) bool
	}{
		{"panic", func() { panic("bind boom") }, func(err error) bool {
			var pe *executor.PanicError
			return errors.As(err, &pe) && pe.Value == "bind boom"
		}},
		{"goexit", runtime.Goexit, func(err error) bool { return errors.Is(err, executor.ErrGoexit) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			glob, grp := newMemLimiter(), newMemLimiter()
			grp.onBind = tc.bind
			ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)},
				executor.WithGlobalLimiter(glob), executor.WithGroupLimiter(grp))
			glob.give("", 1)
			grp.give("a", 1)
			var ran atomic.Bool
			h := submit(t, ex, executor.Task[int]{Group: "a", Fn: func(context.Context) (int, error) { ran.Store(true); return 1, nil }})
			if r := wait(t, h); r.Status != executor.Failed || !tc.want(r.Err) || ran.Load() {
				t.Fatalf("status %v err %v (Fn ran: %v), want Failed without running Fn", r.Status, r.Err, ran.Load())
			}
			if a, b := glob.outstanding(), grp.outstanding(); a != 0 || b != 0 {
				t.Fatalf("permits out: global %d group %d, want 0", a, b)
			}
			grp.onBind = nil
			h = submit(t, ex, executor.Task[int]{Group: "a", Fn: func(context.Context) (int, error) { return 1, nil }})
			if r := wait(t, h); r.Status != executor.Success {
				t.Fatalf("the next task: %v %v, want Success", r.Status, r.Err)
			}
			if msg := ex.CheckInvariants(); msg != "" {
				t.Fatal(msg)
			}
		})
	}
}

// limiterListErr is an error of a type that == cannot compare: a Limiter
// may refuse with one.
type limiterListErr struct{ reasons []string }

func (e limiterListErr) Error() string { return fmt.Sprint("refused: ", e.reasons) }

// A group refused again the same way reuses its last refusal's error, which
// compares the limiter's errors: one whose type is not comparable must not
// panic there, under the group's lock, and leave the group locked.
func TestClusterRefusalWithUncomparableError(t *testing.T) {
	lim := newMemLimiter()
	lim.refuse = limiterListErr{reasons: []string{"quota"}}
	p, err := policy.New()
	if err != nil {
		t.Fatal(err)
	}
	ex, err := executor.New(p, executor.WithGroupLimiter(lim))
	if err != nil {
		t.Fatal(err)
	}
	fn := func(context.Context) error { return nil }
	calls := map[string]func() error{
		"Go": func() error { return ex.Go(bg, "a", fn) },
		"Do": func() error { return ex.Do(bg, "a", fn) },
		"Submit": func() error {
			_, err := executor.Submit(ex, bg, executor.Task[int]{Group: "a", Fn: func(context.Context) (int, error) { return 0, nil }})
			return err
		},
	}
	for _, name := range []string{"Go", "Do", "Submit", "Go", "Do", "Submit"} {
		var got error
		panicked := func() (p any) {
			defer func() { p = recover() }()
			got = calls[name]()
			return nil
		}()
		if panicked != nil {
			// The group's lock may be held: Close would wait for ever.
			t.Fatalf("%s refused by the limiter panicked: %v", name, panicked)
		}
		var le limiterListErr
		if !errors.Is(got, executor.ErrRejected) || !errors.As(got, &le) {
			t.Fatalf("%s: %v, want a refusal carrying the limiter's error", name, got)
		}
	}
	if s, ok := ex.GroupStats("a"); !ok || s.Rejected != 6 {
		t.Fatalf("group a: %+v, want 6 rejected", s)
	}
	ex.Close()
}

// panickyLimiter is a memLimiter whose TryAcquire panics while acquire is
// set, and whose permits' Release panics while release is set.
type panickyLimiter struct {
	*memLimiter
	acquire, release atomic.Bool
}

func (l *panickyLimiter) TryAcquire(key string, n int) (executor.LimiterPermit, error) {
	if l.acquire.Load() {
		panic("limiter bug")
	}
	p, err := l.memLimiter.TryAcquire(key, n)
	if p == nil {
		return nil, err
	}
	return panickyPermit{p, l}, err
}

type panickyPermit struct {
	executor.LimiterPermit
	l *panickyLimiter
}

func (p panickyPermit) Release() {
	p.LimiterPermit.Release()
	if p.l.release.Load() {
		panic("limiter bug")
	}
}

// TryAcquire and Release run under the executor's locks: a panic in them
// must not go on up with the locks held. A panicking TryAcquire refuses the
// task with a *PanicError, at admission and at dispatch; a panicking
// Release counts as given back.
func TestClusterLimiterPanicHoldsNoLock(t *testing.T) {
	lim := &panickyLimiter{memLimiter: newMemLimiter()}
	p, err := policy.New(policy.WithDefaultMaxConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	ex, err := executor.New(p, executor.WithGroupLimiter(lim))
	if err != nil {
		t.Fatal(err)
	}
	fn := func(context.Context) (int, error) { return 1, nil }
	refusedByPanic := func(what string, r executor.Result[int]) {
		t.Helper()
		var pe *executor.PanicError
		if r.Status != executor.Rejected || !errors.Is(r.Err, executor.ErrRejected) || !errors.As(r.Err, &pe) || pe.Value != "limiter bug" {
			t.Fatalf("%s: %v %v, want Rejected with the limiter's panic", what, r.Status, r.Err)
		}
	}
	ctx, cancel := context.WithTimeout(bg, 10*time.Second) // a hang guard
	defer cancel()

	// At admission.
	lim.acquire.Store(true)
	var h *executor.Handle[int]
	mustNotPanic(t, "Submit", func() { h, _ = executor.Submit(ex, bg, executor.Task[int]{Group: "a", Fn: fn}) })
	r, err := h.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	refusedByPanic("at admission", r)

	// At dispatch: the task waits for the limiter, whose notify finds it
	// panicking.
	lim.acquire.Store(false)
	mustNotPanic(t, "Submit", func() { h, _ = executor.Submit(ex, bg, executor.Task[int]{Group: "a", Fn: fn}) })
	if s, _ := ex.GroupStats("a"); s.Waiting != 1 {
		t.Fatalf("waiting %d, want 1 (no permit)", s.Waiting)
	}
	lim.acquire.Store(true)
	mustNotPanic(t, "the limiter's notify", func() { lim.give("a", 1) })
	if r, err = h.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	refusedByPanic("at dispatch", r)

	// At release.
	lim.acquire.Store(false)
	lim.release.Store(true)
	for i := range 2 {
		mustNotPanic(t, "Submit", func() { h, _ = executor.Submit(ex, bg, executor.Task[int]{Group: "a", Fn: fn}) })
		if r, err := h.Wait(ctx); err != nil || r.Status != executor.Success {
			t.Fatalf("task %d with a panicking Release: %+v %v", i, r, err)
		}
	}
	if msg := ex.CheckInvariants(); msg != "" {
		t.Fatal(msg)
	}
	if err := ex.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	ex.Close()
}
