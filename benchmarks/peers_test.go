package benchmarks

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alitto/pond/v2"
	"github.com/panjf2000/ants/v2"
	"golang.org/x/sync/semaphore"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// This file holds the workload runners: one per peer, each running a batch
// of n tiny tasks and returning only when every one of them has run. The
// flat and grouped benchmarks and the correctness tests share them.

// batch is the most tasks a runner has submitted and not yet waited for:
// "submit 100,000, then wait for all 100,000". A benchmark of b.N tasks runs
// ceil(b.N/batch) batches, so one benchmark op is one task.
const batch = 100_000

// counter is what every tiny task does: one atomic add. It is padded to its
// own cache line. Tests set onRun to watch the tasks; benchmarks leave it
// nil.
type counter struct {
	n     atomic.Int64
	onRun func()
	spins int // the work each task does first (work_test.go); 0: none
	_     [40]byte
}

func (c *counter) tiny() {
	if c.spins > 0 {
		work(c.spins)
	}
	c.n.Add(1)
	if c.onRun != nil {
		c.onRun()
	}
}

// runner runs batches of tiny tasks. run(n) submits n tasks (task i to group
// keys[i%len(keys)] where the runner has groups) and returns once all have
// run. close releases the runner and waits for its goroutines.
type runner interface {
	run(n int) error
	close() error
}

// groupKeys returns n deterministic group keys.
func groupKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("group-%04d", i)
	}
	return keys
}

// ---------------------------------------------------------------------------
// ours: the grouped executor.

// antsSpawn is the executor.WithSpawn adapter backed by an ants pool. The
// pool is non-blocking and large enough for Submit never to fail; if it ever
// did, f runs on a fresh goroutine so that it still runs exactly once
// (WithSpawn's contract). fallbacks counts those cases; spawns counts calls.
type antsSpawn struct {
	pool      *ants.Pool
	spawns    atomic.Int64
	fallbacks atomic.Int64
}

func newAntsSpawn(size int) (*antsSpawn, error) {
	p, err := ants.NewPool(size, ants.WithNonblocking(true))
	if err != nil {
		return nil, err
	}
	return &antsSpawn{pool: p}, nil
}

func (a *antsSpawn) spawn(f func()) {
	a.spawns.Add(1)
	if err := a.pool.Submit(f); err != nil {
		a.fallbacks.Add(1)
		go f()
	}
}

func (a *antsSpawn) release() error { return a.pool.ReleaseTimeout(10 * time.Second) }

type oursRunner struct {
	ex    *executor.Executor
	keys  []string
	fn    func(context.Context) (struct{}, error)
	hs    []*executor.Handle[struct{}]
	spawn *antsSpawn // nil: the default spawn (go f())
}

// newOurs builds an executor with global limit global, concurrency conc per
// group and no in-flight or queue bound, running tiny tasks on c. With
// antsSize > 0 its workers are spawned on an ants pool of that size.
func newOurs(c *counter, keys []string, global, conc, antsSize int) (*oursRunner, error) {
	p, err := policy.New(
		policy.WithGlobalMaxInFlight(global),
		policy.WithDefaultMaxConcurrency(conc),
		policy.WithDefaultMaxInFlight(policy.Unlimited),
	)
	if err != nil {
		return nil, err
	}
	r := &oursRunner{
		keys: keys,
		fn:   func(context.Context) (struct{}, error) { c.tiny(); return struct{}{}, nil },
		hs:   make([]*executor.Handle[struct{}], 0, batch),
	}
	var opts []executor.Option
	if antsSize > 0 {
		if r.spawn, err = newAntsSpawn(antsSize); err != nil {
			return nil, err
		}
		opts = append(opts, executor.WithSpawn(r.spawn.spawn))
	}
	if r.ex, err = executor.New(p, opts...); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *oursRunner) run(n int) error {
	hs, err := submitAll(r.ex, r.keys, r.fn, r.hs[:0], n)
	r.hs = waitAll(hs, &err)
	return err
}

// inTurn picks indexes 0..n-1 in turn, from a start, without the division
// per task that i%n costs: a cost of the harness, not of the runner, which
// the runners without groups (fixed, ants) never paid.
type inTurn struct{ i, n int }

func (t *inTurn) next() int {
	i := t.i
	if t.i++; t.i == t.n {
		t.i = 0
	}
	return i
}

// submitAll submits n tasks running fn, task i to keys[i%len(keys)],
// appending their handles to hs; it stops at the first refusal.
func submitAll(ex *executor.Executor, keys []string, fn func(context.Context) (struct{}, error), hs []*executor.Handle[struct{}], n int) ([]*executor.Handle[struct{}], error) {
	k := inTurn{n: len(keys)}
	for i := range n {
		h, err := executor.Submit(ex, context.Background(), executor.Task[struct{}]{Group: keys[k.next()], Fn: fn})
		if err != nil {
			return hs, fmt.Errorf("submit %d: %w", i, err)
		}
		hs = append(hs, h)
	}
	return hs, nil
}

// waitAll waits for every handle, keeps the first error in *err (a task
// that did not succeed counts as one), and returns hs emptied for reuse.
func waitAll(hs []*executor.Handle[struct{}], err *error) []*executor.Handle[struct{}] {
	for i, h := range hs {
		res, werr := h.Wait(context.Background())
		if werr == nil && res.Status != executor.Success {
			werr = fmt.Errorf("task %d: status %v, err %v", i, res.Status, res.Err)
		}
		if werr != nil && *err == nil {
			*err = werr
		}
	}
	clear(hs)
	return hs[:0]
}

func (r *oursRunner) close() error {
	err := r.ex.Close()
	if r.spawn != nil {
		if rerr := r.spawn.release(); rerr != nil && err == nil {
			err = rerr
		}
	}
	return err
}

// oursGoRunner runs the same executor with Executor.Go: no handle per
// task, completion tracked with a WaitGroup, as the ants and pond-go
// runners do.
type oursGoRunner struct {
	*oursRunner
	wg   sync.WaitGroup
	task func(context.Context) error
}

func newOursGo(c *counter, keys []string, global, conc int) (*oursGoRunner, error) {
	o, err := newOurs(c, keys, global, conc, 0)
	if err != nil {
		return nil, err
	}
	r := &oursGoRunner{oursRunner: o}
	r.task = func(context.Context) error { c.tiny(); r.wg.Done(); return nil }
	return r, nil
}

func (r *oursGoRunner) run(n int) error {
	r.wg.Add(n)
	k := inTurn{n: len(r.keys)}
	for i := range n {
		if err := r.ex.Go(context.Background(), r.keys[k.next()], r.task); err != nil {
			r.wg.Add(-(n - i))
			r.wg.Wait()
			return fmt.Errorf("go %d: %w", i, err)
		}
	}
	r.wg.Wait()
	return nil
}

// ---------------------------------------------------------------------------
// ants: a blocking pool of fixed size, completion tracked with a WaitGroup.

type antsRunner struct {
	pool *ants.Pool
	wg   sync.WaitGroup
	task func()
}

func newAnts(c *counter, size int) (*antsRunner, error) {
	p, err := ants.NewPool(size) // blocking: Submit waits for a free worker
	if err != nil {
		return nil, err
	}
	r := &antsRunner{pool: p}
	r.task = func() { c.tiny(); r.wg.Done() }
	return r, nil
}

func (r *antsRunner) run(n int) error {
	r.wg.Add(n)
	for i := range n {
		if err := r.pool.Submit(r.task); err != nil {
			r.wg.Add(-(n - i))
			r.wg.Wait()
			return fmt.Errorf("ants submit %d: %w", i, err)
		}
	}
	r.wg.Wait()
	return nil
}

func (r *antsRunner) close() error { return r.pool.ReleaseTimeout(10 * time.Second) }

// ---------------------------------------------------------------------------
// pond v2: a pool (flat), or one subpool per group under a parent (grouped).
// With useGo, tasks go in with Go and a WaitGroup (no future per task);
// otherwise with Submit and a Wait on each returned Task.

type pondRunner struct {
	parent pond.Pool
	pools  []pond.Pool // per key; flat: just the parent
	fn     func()
	useGo  bool
	wg     sync.WaitGroup
	goTask func()
	tasks  []pond.Task
}

// newPond returns a pond runner: with groups == 0 a single pool of size
// global; otherwise a parent pool of size global with one subpool of
// concurrency conc per group.
func newPond(c *counter, global, groups, conc int, useGo bool) *pondRunner {
	r := &pondRunner{parent: pond.NewPool(global), fn: c.tiny, useGo: useGo}
	r.goTask = func() { c.tiny(); r.wg.Done() }
	if groups == 0 {
		r.pools = []pond.Pool{r.parent}
	} else {
		r.pools = make([]pond.Pool, groups)
		for i := range r.pools {
			r.pools[i] = r.parent.NewSubpool(conc)
		}
	}
	if !useGo {
		r.tasks = make([]pond.Task, 0, batch)
	}
	return r
}

func (r *pondRunner) run(n int) error {
	if r.useGo {
		r.wg.Add(n)
		k := inTurn{n: len(r.pools)}
		for i := range n {
			if err := r.pools[k.next()].Go(r.goTask); err != nil {
				r.wg.Add(-(n - i))
				r.wg.Wait()
				return fmt.Errorf("pond go %d: %w", i, err)
			}
		}
		r.wg.Wait()
		return nil
	}
	ts := r.tasks[:0]
	k := inTurn{n: len(r.pools)}
	for range n {
		ts = append(ts, r.pools[k.next()].Submit(r.fn))
	}
	var err error
	for i, t := range ts {
		if werr := t.Wait(); werr != nil && err == nil {
			err = fmt.Errorf("pond task %d: %w", i, werr)
		}
	}
	clear(ts)
	r.tasks = ts[:0]
	return err
}

func (r *pondRunner) close() error {
	if len(r.pools) > 1 || r.pools[0] != r.parent {
		for _, p := range r.pools {
			p.StopAndWait()
		}
	}
	r.parent.StopAndWait()
	return nil
}

// ---------------------------------------------------------------------------
// fixed: the practical floor, a hand-written pool of size goroutines
// draining a buffered channel of func().

type fixedRunner struct {
	ch      chan func()
	wg      sync.WaitGroup // tasks
	workers sync.WaitGroup
	task    func()
}

// fixedChanBuf is the fixed pool's channel buffer.
const fixedChanBuf = 1024

func newFixed(c *counter, size int) *fixedRunner {
	r := &fixedRunner{ch: make(chan func(), fixedChanBuf)}
	r.task = func() { c.tiny(); r.wg.Done() }
	r.workers.Add(size)
	for range size {
		go func() {
			defer r.workers.Done()
			for f := range r.ch {
				f()
			}
		}()
	}
	return r
}

func (r *fixedRunner) run(n int) error {
	r.wg.Add(n)
	for range n {
		r.ch <- r.task
	}
	r.wg.Wait()
	return nil
}

func (r *fixedRunner) close() error {
	close(r.ch)
	r.workers.Wait()
	return nil
}

// ---------------------------------------------------------------------------
// xsync: what a user writes by hand with golang.org/x/sync/semaphore: a
// global Weighted, a map of per-group Weighted guarded by a mutex, and a
// goroutine per task that acquires both. With globalFirst the goroutine
// takes the global permit before the group's (the naive order, which lets a
// hot group's queued goroutines pin global permits); otherwise the group's
// first, then the global one.

type xsyncRunner struct {
	global      *semaphore.Weighted
	perGroup    int64
	globalFirst bool
	keys        []string
	fn          func()
	wg          sync.WaitGroup

	mu     sync.Mutex
	groups map[string]*semaphore.Weighted
}

func newXsync(c *counter, keys []string, global, conc int, globalFirst bool) *xsyncRunner {
	return &xsyncRunner{
		global:      semaphore.NewWeighted(int64(global)),
		perGroup:    int64(conc),
		globalFirst: globalFirst,
		keys:        keys,
		fn:          c.tiny,
		groups:      make(map[string]*semaphore.Weighted),
	}
}

func (r *xsyncRunner) groupSem(key string) *semaphore.Weighted {
	r.mu.Lock()
	s := r.groups[key]
	if s == nil {
		s = semaphore.NewWeighted(r.perGroup)
		r.groups[key] = s
	}
	r.mu.Unlock()
	return s
}

// do runs fn under key's group permit and a global permit, in the runner's
// acquisition order; entered, if not nil, is called just before the first
// Acquire.
func (r *xsyncRunner) do(ctx context.Context, key string, fn, entered func()) error {
	first, second := r.groupSem(key), r.global
	if r.globalFirst {
		first, second = second, first
	}
	if entered != nil {
		entered()
	}
	if err := first.Acquire(ctx, 1); err != nil {
		return err
	}
	if err := second.Acquire(ctx, 1); err != nil {
		first.Release(1)
		return err
	}
	fn()
	second.Release(1)
	first.Release(1)
	return nil
}

func (r *xsyncRunner) run(n int) error {
	ctx := context.Background()
	var failed atomic.Int64
	r.wg.Add(n)
	k := inTurn{n: len(r.keys)}
	for range n {
		key := r.keys[k.next()]
		go func() {
			defer r.wg.Done()
			if r.do(ctx, key, r.fn, nil) != nil {
				failed.Add(1)
			}
		}()
	}
	r.wg.Wait()
	if f := failed.Load(); f > 0 {
		return fmt.Errorf("xsync: %d tasks failed to acquire", f)
	}
	return nil
}

func (r *xsyncRunner) close() error { return nil }
