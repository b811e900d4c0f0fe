package executor_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

var bg = context.Background()

// wantServes fails t unless group serves a Do call: one whose permits were
// kept makes it wait for ever. A hang guard, not a timing assertion: the
// bound is far above any wait of a served call. after says what came
// before.
func wantServes(t *testing.T, ex *executor.Executor, group, after string) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- ex.Do(bg, group, func(context.Context) error { return nil }) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("next Do: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the group serves no call %s: its permits are kept", after)
	}
}

// hangGuard bounds a wait for something the executor must do, so that a
// test whose rule breaks fails, naming what did not happen, rather than
// hanging until the test binary's timeout. Not a timing assertion: it is
// far above any such wait on a loaded machine.
const hangGuard = 30 * time.Second

// recv returns what c yields, failing t if nothing comes within hangGuard:
// what says what did not happen then.
func recv[T any](t testing.TB, c <-chan T, what string) T {
	t.Helper()
	timer := time.NewTimer(hangGuard)
	defer timer.Stop()
	select {
	case v := <-c:
		return v
	case <-timer.C:
		t.Fatalf("%s: not within %v", what, hangGuard)
		panic("unreachable")
	}
}

// await yields until cond holds, failing t if it does not within
// hangGuard: what says what did not happen then.
func await(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(hangGuard); !cond(); runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, hangGuard)
		}
	}
}

// waitAll waits for wg, failing t if it is not done within hangGuard: what
// says what did not happen then.
func waitAll(t testing.TB, wg *sync.WaitGroup, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	recv(t, done, what)
}

// closeWithin closes ex, failing t if Close does not return within
// hangGuard: what says what did not happen then.
func closeWithin(t testing.TB, ex *executor.Executor, what string) error {
	t.Helper()
	closed := make(chan error, 1)
	go func() { closed <- ex.Close() }()
	return recv(t, closed, what)
}

// guardCtx returns a context that ends hangGuard from now: given to a call
// that waits for tasks (Shutdown, ShutdownGroup), it makes a task that
// never finishes fail the test, by the call's error, rather than hang it.
func guardCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(bg, hangGuard)
	t.Cleanup(cancel)
	return ctx
}

// closeAtEnd closes c as the test ends, unless the test has: the tasks of
// a test that failed early, waiting on c, return, and Close with them.
// Called after newExec, it runs before the executor is closed.
func closeAtEnd(t testing.TB, c chan struct{}) {
	t.Cleanup(func() {
		select {
		case <-c:
		default:
			close(c)
		}
	})
}

// waitingCtx is a context that never ends, and whose Done closes asked
// the first time it is called: given to a Shutdown, it says that Shutdown
// has begun its wait for the tasks, which selects on it, without a sleep.
type waitingCtx struct {
	context.Context // Background
	asked           chan struct{}
	once            sync.Once
}

func newWaitingCtx() *waitingCtx { return &waitingCtx{Context: bg, asked: make(chan struct{})} }

func (c *waitingCtx) Done() <-chan struct{} {
	c.once.Do(func() { close(c.asked) })
	return nil
}

// wantInvariants reports, as an error, an executor bookkeeping invariant
// that does not hold.
func wantInvariants(t *testing.T, ex *executor.Executor) {
	t.Helper()
	if msg := ex.CheckInvariants(); msg != "" {
		t.Error(msg)
	}
}

// newExec builds an executor from policy options and closes it when the test
// ends, checking its bookkeeping first.
func newExec(t testing.TB, popts []policy.Option, eopts ...executor.Option) *executor.Executor {
	t.Helper()
	p, err := policy.New(popts...)
	if err != nil {
		t.Fatalf("policy.New: %v", err)
	}
	ex, err := executor.New(p, eopts...)
	if err != nil {
		t.Fatalf("executor.New: %v", err)
	}
	t.Cleanup(func() {
		if msg := ex.CheckInvariants(); msg != "" {
			t.Errorf("invariant broken before Close: %s", msg)
		}
		// A test whose rule broke may leave a task that never finishes:
		// Close would wait for it for ever.
		closed := make(chan struct{})
		go func() { ex.Close(); close(closed) }()
		select {
		case <-closed:
		case <-time.After(hangGuard):
			t.Errorf("Close did not return within %v: a task never finished, or kept its permits", hangGuard)
			return
		}
		if n := executor.DoubleCompletions(); n != 0 {
			t.Errorf("%d handles were completed twice", n)
		}
	})
	return ex
}

func fakeClock() *clock.Fake { return clock.NewFake(time.Unix(1_000_000, 0)) }

// gate is a task body that reports its start and blocks until released.
type gate struct {
	started chan string
	release chan struct{}
	once    sync.Once
}

func newGate() *gate { return &gate{started: make(chan string, 1024), release: make(chan struct{})} }

func (g *gate) open() { g.once.Do(func() { close(g.release) }) }

func (g *gate) fn(name string) func(context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		g.started <- name
		<-g.release
		return name, nil
	}
}

// waitStarted receives the names of n started tasks.
func (g *gate) waitStarted(t testing.TB, n int) []string {
	t.Helper()
	var names []string
	for range n {
		select {
		case s := <-g.started:
			names = append(names, s)
		case <-time.After(10 * time.Second): // a hang guard, not a timing assertion
			t.Fatalf("only %d of %d tasks started: %v", len(names), n, names)
		}
	}
	return names
}

// noneStarted fails if a task has reported its start.
func (g *gate) noneStarted(t testing.TB) {
	t.Helper()
	select {
	case s := <-g.started:
		t.Fatalf("task %q started, want none", s)
	default:
	}
}

func submit[T any](t testing.TB, ex *executor.Executor, task executor.Task[T]) *executor.Handle[T] {
	t.Helper()
	h, err := executor.Submit(ex, bg, task)
	if err != nil {
		t.Fatalf("Submit(%s/%s): %v", task.Group, task.ID, err)
	}
	return h
}

func wait[T any](t testing.TB, h *executor.Handle[T]) executor.Result[T] {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg, 10*time.Second) // a hang guard
	defer cancel()
	r, err := h.Wait(ctx)
	if err != nil {
		t.Fatalf("Wait(%s/%s): %v", h.Group(), h.ID(), err)
	}
	return r
}

func groupStats(t testing.TB, ex *executor.Executor, g string) executor.GroupStats {
	t.Helper()
	s, ok := ex.GroupStats(g)
	if !ok {
		t.Fatalf("no stats for group %q", g)
	}
	return s
}

func isDone[T any](h *executor.Handle[T]) bool {
	select {
	case <-h.Done():
		return true
	default:
		return false
	}
}

// atProcs runs test as subtests at GOMAXPROCS 1, 2 and 8: more
// goroutines than cores is still a real interleaving on a small machine.
func atProcs(t *testing.T, test func(t *testing.T)) {
	for _, procs := range []int{1, 2, 8} {
		t.Run(fmt.Sprint("GOMAXPROCS=", procs), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			test(t)
		})
	}
}

// background runs loops beside a stress test until halted: each calls its
// step over and over, yielding between calls.
type background struct {
	stop chan struct{}
	wg   sync.WaitGroup
}

func newBackground() *background { return &background{stop: make(chan struct{})} }

func (bg *background) loop(step func()) {
	bg.wg.Go(func() {
		for {
			select {
			case <-bg.stop:
				return
			default:
				step()
				runtime.Gosched()
			}
		}
	})
}

// checkInvariants checks the executor's books over and over while everything
// moves, reporting a broken one to violate.
func (bg *background) checkInvariants(ex *executor.Executor, violate func(string)) {
	bg.loop(func() {
		if msg := ex.CheckInvariants(); msg != "" {
			violate("invariant: " + msg)
		}
	})
}

func (bg *background) halt() {
	close(bg.stop)
	bg.wg.Wait()
}

// violations collects the broken invariants that stress tasks and
// background loops see; add is their violate func.
type violations struct {
	n     atomic.Int64
	first atomic.Value
}

func (v *violations) add(msg string) {
	v.n.Add(1)
	v.first.CompareAndSwap(nil, msg)
}

// check fails t if anything was reported.
func (v *violations) check(t *testing.T) {
	t.Helper()
	if n := v.n.Load(); n != 0 {
		t.Fatalf("%d violations; first: %v", n, v.first.Load())
	}
}

// sharedRand returns a seeded random source that background loops share.
func sharedRand(seed uint64) func(n int) int {
	r := rand.New(rand.NewPCG(seed, 1))
	var mu sync.Mutex
	return func(n int) int { mu.Lock(); defer mu.Unlock(); return r.IntN(n) }
}

// sometimes returns a background step that does f once in about every
// steps calls.
func sometimes(rnd func(int) int, every int, f func()) func() {
	return func() {
		if rnd(every) == 0 {
			f()
		}
	}
}

// churn adds background loops that, each about once in every steps, evict
// a group, set a group's limits, or set the global limit, among groups g0..
// g(groups-1). A group's concurrency limit stays at least 2 and at most
// maxConc: a limit lowered under a waiting task's weight (stress tasks
// weigh up to 2) would leave it waiting, by design, until the limit is
// raised, which Shutdown forbids. The global limit stays in
// [minGlobal, maxGlobal].
func (bg *background) churn(ex *executor.Executor, rnd func(int) int, every, groups, maxConc, minGlobal, maxGlobal int, violate func(string)) {
	bg.loop(sometimes(rnd, every, func() { ex.EvictGroup(fmt.Sprint("g", rnd(groups))) }))
	bg.loop(sometimes(rnd, every, func() {
		g := fmt.Sprint("g", rnd(groups))
		l := policy.GroupLimits{MaxInFlight: 8 + rnd(2000), MaxConcurrency: 2 + rnd(maxConc-1), QueueThreshold: 4 + rnd(1500), Share: 1}
		if err := ex.SetGroupLimits(g, l); err != nil && !errors.Is(err, executor.ErrShutdown) {
			violate("SetGroupLimits: " + err.Error())
		}
	}))
	bg.loop(sometimes(rnd, every, func() {
		if err := ex.SetGlobalMaxInFlight(minGlobal + rnd(maxGlobal-minGlobal+1)); err != nil && !errors.Is(err, executor.ErrShutdown) {
			violate("SetGlobalMaxInFlight: " + err.Error())
		}
	}))
}

// What a stress test's task does once its checks are done.
type stressKind int

const (
	stressPanics stressKind = iota
	stressFails
	stressWaitsCancel // returns only when its context is cancelled
	stressHolds       // holds its permits a while (hold), then succeeds
	stressSucceeds
)

// stressRunning counts running permits, the executor's and a group's, from
// inside stress tasks, against the most either may have.
type stressRunning struct {
	global, group       *atomic.Int64
	globalMax, groupMax int64
	groupName           string
}

// stressBody returns a stress task's Fn: it reports a second run and a
// running count over its limit to violate, then does what kind says,
// succeeding with v.
func stressBody(runs *atomic.Int32, weight int, c stressRunning, violate func(string), kind stressKind, hold func(), v int) func(context.Context) (int, error) {
	return func(ctx context.Context) (int, error) {
		if runs.Add(1) > 1 {
			violate("a task ran twice")
		}
		w := int64(max(weight, 1))
		defer c.global.Add(-w)
		defer c.group.Add(-w)
		if n := c.global.Add(w); n > c.globalMax {
			violate(fmt.Sprintf("global running %d > %d", n, c.globalMax))
		}
		if n := c.group.Add(w); n > c.groupMax {
			violate(fmt.Sprintf("group %s running %d > %d", c.groupName, n, c.groupMax))
		}
		switch kind {
		case stressPanics:
			panic("stress panic")
		case stressFails:
			return 0, errStress
		case stressWaitsCancel:
			<-ctx.Done()
			return 0, ctx.Err()
		case stressHolds:
			hold()
		}
		return v, nil
	}
}

var errStress = errors.New("stress failure")

// checkRuns fails t if a task's outcome contradicts how often its Fn ran.
func checkRuns(t *testing.T, id string, r executor.Result[int], runs int32) {
	t.Helper()
	switch {
	case r.Status == executor.Rejected && runs != 0:
		t.Errorf("rejected task %s ran", id)
	case (r.Status == executor.Success || r.Status == executor.Failed) && runs != 1:
		t.Errorf("task %s ended %v after %d runs", id, r.Status, runs)
	case r.Status == executor.Cancelled && runs > 1:
		t.Errorf("cancelled task %s ran %d times", id, runs)
	}
}

// mustNotPanic makes one call that may panic, and fails the test if it
// does, leaving the executor unclosed: a lock may be held.
func mustNotPanic(t *testing.T, what string, f func()) {
	t.Helper()
	if v := func() (v any) {
		defer func() { v = recover() }()
		f()
		return nil
	}(); v != nil {
		t.Fatalf("%s panicked: %v", what, v)
	}
}

// seededRuns runs run once per seed, at each GOMAXPROCS of atProcs: runs
// seeds (short under -short) from the clock, other seeds at each
// GOMAXPROCS. The environment variables named after prefix replay a seed
// (prefix_SEED, one run unless prefix_RUNS says more) and set the number
// of seeds (prefix_RUNS). Each subtest is named by its seed.
func seededRuns(t *testing.T, prefix string, runs, short int, run func(t *testing.T, seed uint64)) {
	t.Helper()
	if testing.Short() {
		runs = short
	}
	if s := os.Getenv(prefix + "_RUNS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("%s_RUNS=%q: want a count >= 1", prefix, s)
		}
		runs = n
	}
	base, fixed := uint64(time.Now().UnixNano()), false
	if s := os.Getenv(prefix + "_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s_SEED=%q: want an unsigned integer", prefix, s)
		}
		base, fixed = n, true
		if os.Getenv(prefix+"_RUNS") == "" {
			runs = 1
		}
	}
	atProcs(t, func(t *testing.T) {
		for i := range runs {
			seed := base + uint64(i)
			if !fixed {
				seed += uint64(runtime.GOMAXPROCS(0)) << 32 // other seeds at each GOMAXPROCS
			}
			// One failing seed is enough to replay: the rest, each waiting
			// out its guards on a broken executor, would only delay the
			// report past the binary's timeout.
			if !t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { run(t, seed) }) {
				break
			}
		}
	})
}

// peak counts, from inside the tasks, those running at once in one scope
// (an executor, a group), and the most seen at once.
type peak struct{ now, max atomic.Int64 }

func (r *peak) enter() {
	n := r.now.Add(1)
	for m := r.max.Load(); n > m && !r.max.CompareAndSwap(m, n); m = r.max.Load() {
	}
}

func (r *peak) leave() { r.now.Add(-1) }
