package executor_test

// golang.org/x/sync's semaphore and errgroup tests, ported to the executor.
//
// Source: golang.org/x/sync (BSD-3-Clause License, Copyright 2016 and 2017
// The Go Authors), commit ec11c4a9: semaphore/semaphore_test.go
// (TestWeighted, TestWeightedPanic, TestWeightedTryAcquire,
// TestWeightedAcquire, TestWeightedDoesntBlockIfTooBig,
// TestLargeAcquireDoesntStarve, TestAllocCancelDoesntStarve,
// TestWeightedAcquireCanceled) and errgroup/errgroup_test.go (TestTryGo,
// TestGoLimit). Each port is named TestXsync and its upstream name. The
// scripts of the cases are ported; no upstream code is.
// bulkhead/xsync_test.go ports the semaphore's cases to package bulkhead.
//
// What was adapted, and why:
//   - A semaphore.Weighted of size n is a limit of n permits. Each case runs
//     on every limit that can play the part, as subtests: the global
//     in-flight limit, its acquirers each in a group of its own with no
//     other limit, so that only the global limit binds and its waiters are
//     served in turn by the dispatcher rather than from one FIFO queue; and
//     a group's concurrency limit, every acquirer in that group, whose queue
//     is FIFO as the semaphore's is.
//   - A permit of weight w is a task of weight w whose function runs until
//     the case releases it, by DoWeighted and by Submit with Task.Weight, as
//     subtests: Acquire is the call, Release its function's return, after
//     which the permits are back before Do returns or the handle completes.
//     x/sync's Acquire(ctx, 0) takes nothing; a weight of 0 here means 1.
//   - TryAcquire is a task under Abort refused at once by a limit that lets
//     nothing wait, with a *RejectedError naming that limit: a queue
//     threshold of 0 (the global one; the group's, for its concurrency
//     limit; or, beside the global limit's waiting acquirers, that of a
//     group kept for tries), or the group's in-flight limit (its bulkhead,
//     which counts waiting tasks too, so it can only refuse). As x/sync's,
//     it fails while another acquirer waits for the room, even if the room
//     is free: a task starts at once only if its group has nothing waiting
//     and no group waits for global room.
//   - Upstream's sleeps are gone: Acquire with a 10 ms timeout
//     (TestWeightedAcquire) gives up once the call is seen waiting in the
//     queue (Stats, GroupStats), a hold of a random time is a
//     runtime.Gosched, and a 100 ms sleep "long enough to be queued" is the
//     queue's depth; so no outcome depends on the machine's speed. Only on
//     the global limit, which has a group for tries, does
//     TestWeightedAcquireCanceled keep the TryAcquire loop it synchronises
//     with.
//   - A request heavier than the limit waits for ever in x/sync, at the back
//     of the queue; here it is refused at once with ErrTooHeavy, whatever
//     the rejection policy. The lighter ones go on either way.
//   - x/sync panics on a Release of what was not acquired
//     (TestWeightedPanic). A permit here is given back by its task's
//     return, exactly once, so no call can release what was not taken; the
//     misuse left is a negative weight, refused with ErrInvalidTask, taking
//     nothing.
//   - An errgroup.Group whose limit is n is a group whose concurrency and
//     in-flight limits are n, or the global limit n with a global queue
//     threshold of 0, under Abort, for TestTryGo: TryGo is Go, refused at
//     once when the limit is full. For TestGoLimit it is the concurrency or
//     global limit n alone: errgroup's Go blocks its caller until a
//     goroutine is free, the executor's queues the task and returns.
//     SetLimit(n) is SetGroupLimits or SetGlobalMaxInFlight. SetLimit(0)
//     has no equal: a limit is at least 1, and 0 is refused with
//     ErrInvalidOption, changing nothing; what takes nothing more is a
//     group shut down (ShutdownGroup), or the executor (Shutdown).
//     errgroup's Wait is waiting until no permit is in flight.
//   - Upstream's t.Parallel is dropped, as in this package's other tests.
//
// Left out: errgroup's TestZeroGroup, TestWithContext and TestCancelCause,
// and its examples: the executor keeps no first error and cancels nothing
// when a task fails, each task having its own outcome (ExecuteAll); the
// benchmarks.

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// xsyncSem is a semaphore.Weighted on an executor.
type xsyncSem struct {
	ex      *executor.Executor
	group   func(i int) string // the group of the i-th acquirer
	try     string             // the group of a TryAcquire, "" if the limit has none beside waiting acquirers
	refusal executor.Limit     // the limit that refuses a TryAcquire
	waiting func() int         // the tasks waiting for the limit
	submit  bool               // permits are Submit tasks, not DoWeighted calls
}

// xsyncPlace builds a semaphore of size n on a limit of a new executor.
type xsyncPlace struct {
	name string
	make func(t *testing.T, n int) *xsyncSem
}

// xsyncTryGroup is the group of the tries beside the global limit's
// waiting acquirers: it lets nothing wait.
const xsyncTryGroup = "try"

// xsyncGlobal is the global limit, whose acquirers wait; a TryAcquire is a
// task of xsyncTryGroup.
var xsyncGlobal = xsyncPlace{"global", func(t *testing.T, n int) *xsyncSem {
	ex := newExec(t, []policy.Option{
		policy.WithGlobalMaxInFlight(n),
		policy.WithDefaultMaxConcurrency(policy.Unlimited),
		policy.WithDefaultMaxInFlight(policy.Unlimited),
		policy.WithGroupQueueThreshold(xsyncTryGroup, 0),
	})
	return &xsyncSem{
		ex:      ex,
		group:   func(i int) string { return fmt.Sprint("a", i) },
		try:     xsyncTryGroup,
		refusal: executor.LimitGroupQueue,
		// A task waits for global room, so that no later one overtakes
		// it, once its group is placed in the dispatcher's list, a moment
		// after Stats counts it waiting; every acquirer has a group of
		// its own.
		waiting: func() int { return min(ex.Stats().Waiting, executor.GlobalWaiters(ex)) },
	}
}}

// xsyncGroup is a group's concurrency limit, whose acquirers wait.
var xsyncGroup = xsyncPlace{"group", func(t *testing.T, n int) *xsyncSem {
	ex := newExec(t, []policy.Option{
		policy.WithGroupMaxConcurrency("g", n),
		policy.WithGroupMaxInFlight("g", policy.Unlimited),
	})
	return &xsyncSem{
		ex:      ex,
		group:   func(int) string { return "g" },
		waiting: func() int { return groupStats(t, ex, "g").Waiting },
	}
}}

// The limits under which nothing waits: every acquire is a TryAcquire.
var (
	xsyncGlobalNoWait = xsyncPlace{"global", func(t *testing.T, n int) *xsyncSem {
		ex := newExec(t, []policy.Option{
			policy.WithGlobalMaxInFlight(n),
			policy.WithGlobalQueueThreshold(0),
			policy.WithDefaultMaxConcurrency(policy.Unlimited),
			policy.WithDefaultMaxInFlight(policy.Unlimited),
		})
		return &xsyncSem{
			ex:      ex,
			group:   func(i int) string { return fmt.Sprint("a", i) },
			try:     xsyncTryGroup,
			refusal: executor.LimitGlobalQueue,
			waiting: func() int { return ex.Stats().Waiting },
		}
	}}
	xsyncGroupNoWait = xsyncPlace{"group", func(t *testing.T, n int) *xsyncSem {
		ex := newExec(t, []policy.Option{
			policy.WithGroupMaxConcurrency("g", n),
			policy.WithGroupMaxInFlight("g", policy.Unlimited),
			policy.WithGroupQueueThreshold("g", 0),
		})
		return &xsyncSem{
			ex:      ex,
			group:   func(int) string { return "g" },
			try:     "g",
			refusal: executor.LimitGroupQueue,
			waiting: func() int { return groupStats(t, ex, "g").Waiting },
		}
	}}
	xsyncBulkhead = xsyncPlace{"bulkhead", func(t *testing.T, n int) *xsyncSem {
		ex := newExec(t, []policy.Option{
			policy.WithGroupMaxInFlight("g", n),
			policy.WithGroupMaxConcurrency("g", policy.Unlimited),
		})
		return &xsyncSem{
			ex:      ex,
			group:   func(int) string { return "g" },
			try:     "g",
			refusal: executor.LimitGroupInFlight,
			waiting: func() int { return groupStats(t, ex, "g").Waiting },
		}
	}}
)

// xsyncEach runs test on a semaphore of size n on each place, with its
// permits taken by DoWeighted and by Submit.
func xsyncEach(t *testing.T, places []xsyncPlace, n int, test func(t *testing.T, s *xsyncSem)) {
	for _, p := range places {
		for _, submit := range []bool{false, true} {
			name := p.name + "/Do"
			if submit {
				name = p.name + "/Submit"
			}
			t.Run(name, func(t *testing.T) {
				s := p.make(t, n)
				s.submit = submit
				test(t, s)
			})
		}
	}
}

// xsyncPermit is an acquire: a task that, once it runs, holds its permits
// until released.
type xsyncPermit struct {
	running chan struct{} // closed as its function starts
	release chan struct{} // closed to let its function return
	once    sync.Once     // closes release
	done    chan error    // its error once it returned, or why it never ran
}

// start begins an acquire of w permits in group, with ctx.
func (s *xsyncSem) start(t testing.TB, ctx context.Context, group string, w int) *xsyncPermit {
	p := &xsyncPermit{running: make(chan struct{}), release: make(chan struct{}), done: make(chan error, 1)}
	t.Cleanup(p.let) // its function returns, should the test fail, before Close
	s.startRun(ctx, group, w, func() { close(p.running); <-p.release }, p.done)
	return p
}

// startRun runs body as a task of weight w in group, with ctx, and sends
// the task's error, or why it never ran, to done.
func (s *xsyncSem) startRun(ctx context.Context, group string, w int, body func(), done chan<- error) {
	if !s.submit {
		go func() { done <- s.ex.DoWeighted(ctx, group, w, func(context.Context) error { body(); return nil }) }()
		return
	}
	h, err := executor.Submit(s.ex, ctx, executor.Task[struct{}]{Group: group, Weight: w, Fn: func(context.Context) (struct{}, error) {
		body()
		return struct{}{}, nil
	}})
	if err != nil {
		done <- err
		return
	}
	go func() {
		<-h.Done()
		r, _ := h.Result()
		done <- r.Err
	}()
}

// run runs body as a task of weight w in group, with ctx, and returns the
// task's error, or why it never ran, once its permits are back.
func (s *xsyncSem) run(ctx context.Context, group string, w int, body func()) error {
	done := make(chan error, 1)
	s.startRun(ctx, group, w, body, done)
	return <-done
}

// acquire is start, returning once the acquire holds its permits, or with
// the error it ended with without running.
func (s *xsyncSem) acquire(t testing.TB, ctx context.Context, group string, w int) (*xsyncPermit, error) {
	t.Helper()
	p := s.start(t, ctx, group, w)
	if err := p.acquired(t); err != nil {
		return nil, err
	}
	return p, nil
}

// acquired waits until p holds its permits (nil), or ended without
// running (its error).
func (p *xsyncPermit) acquired(t testing.TB) error {
	t.Helper()
	timer := time.NewTimer(hangGuard)
	defer timer.Stop()
	select {
	case <-p.running:
		return nil
	case err := <-p.done:
		if err == nil {
			err = errors.New("the task completed without running")
		}
		return err
	case <-timer.C:
		t.Fatalf("an acquire neither ran nor ended within %v", hangGuard)
		panic("unreachable")
	}
}

// isRunning reports whether p holds its permits.
func (p *xsyncPermit) isRunning() bool {
	select {
	case <-p.running:
		return true
	default:
		return false
	}
}

// let lets p's function return.
func (p *xsyncPermit) let() { p.once.Do(func() { close(p.release) }) }

// free releases p's permits, returning once they are back.
func (p *xsyncPermit) free(t testing.TB) {
	t.Helper()
	p.let()
	if err := recv(t, p.done, "a released task returned"); err != nil {
		t.Errorf("a released task: %v", err)
	}
}

// wantRefusedBy fails t unless err is a *RejectedError by limit.
func wantRefusedBy(t testing.TB, err error, limit executor.Limit) {
	t.Helper()
	var rej *executor.RejectedError
	if !errors.As(err, &rej) || rej.Limit != limit || !errors.Is(err, executor.ErrRejected) {
		t.Errorf("refused with %v, want a *RejectedError by %s", err, limit)
	}
}

// TestXsyncWeighted: acquirers of every weight up to the size, each
// acquiring and releasing over and over, never hold more than the size
// between them, and all get through.
func TestXsyncWeighted(t *testing.T) {
	// x/sync's GOMAXPROCS, but at least 4: the weights 1, 1, 2, 3 of four
	// acquirers sum to more than the size, and those of two or three do not.
	n := max(runtime.GOMAXPROCS(0), 4)
	loops := 10000 / n
	xsyncEach(t, []xsyncPlace{xsyncGlobal, xsyncGroup}, n, func(t *testing.T, s *xsyncSem) {
		var running atomic.Int64
		var v violations
		var wg sync.WaitGroup
		var permits uint64
		for i := range n {
			w := max(i, 1)
			permits += uint64(w * loops)
			wg.Go(func() {
				for range loops {
					err := s.run(bg, s.group(i), i, func() {
						if r := running.Add(int64(w)); r > int64(n) {
							v.add(fmt.Sprintf("%d permits held, size %d", r, n))
						}
						runtime.Gosched()
						running.Add(-int64(w))
					})
					if err != nil {
						v.add(fmt.Sprintf("acquire of %d: %v", i, err))
						return
					}
				}
			})
		}
		waitAll(t, &wg, "every acquirer done")
		v.check(t)
		st := s.ex.Stats()
		if st.Running != 0 || st.Waiting != 0 || st.Succeeded != uint64(n*loops) || st.ServedPermits != permits {
			t.Fatalf("stats %+v, want nothing running or waiting, %d succeeded, %d permits served", st, n*loops, permits)
		}
	})
}

// TestXsyncWeightedPanic: what x/sync refuses with a panic (a release of
// what was not acquired) cannot be written here; the misuse left, a
// negative weight, is refused with ErrInvalidTask, takes nothing, and
// leaves the whole size to the next acquire.
func TestXsyncWeightedPanic(t *testing.T) {
	xsyncEach(t, []xsyncPlace{xsyncGlobal, xsyncGroup}, 1, func(t *testing.T, s *xsyncSem) {
		if p, err := s.acquire(t, bg, s.group(0), -1); !errors.Is(err, executor.ErrInvalidTask) {
			t.Errorf("acquire of -1: %v, want ErrInvalidTask", err)
			if err == nil {
				p.free(t)
			}
		} else {
			wantRefusedBy(t, err, executor.LimitInvalid)
		}
		if st := s.ex.Stats(); st.Running != 0 || st.Waiting != 0 || st.Started != 0 {
			t.Fatalf("stats after the refused acquire %+v", st)
		}
		p, err := s.acquire(t, bg, s.group(0), 1)
		if err != nil {
			t.Fatalf("acquire of the whole size after the misuse: %v", err)
		}
		p.free(t)
	})
}

// xsyncTries runs x/sync's sequence of tries on a semaphore of size 2:
// with 1 held, a try of 1 succeeds and the next fails; once both are
// released one succeeds again, and with the other held the next fails.
// try takes 1 permit if it can, keeping it with keep, and reports whether
// it did.
func xsyncTries(t *testing.T, s *xsyncSem, try func(keep func(*xsyncPermit)) bool) {
	t.Helper()
	var held []*xsyncPermit
	keep := func(p *xsyncPermit) { held = append(held, p) }
	hold := func() {
		t.Helper()
		p, err := s.acquire(t, bg, s.group(0), 1)
		if err != nil {
			t.Fatalf("acquire of 1 with room: %v", err)
		}
		keep(p)
	}
	freeAll := func() {
		for _, p := range held {
			p.free(t)
		}
		held = held[:0]
	}
	defer freeAll()

	hold()
	tries := []bool{try(keep), try(keep)}
	freeAll() // Release(2)
	tries = append(tries, try(keep))
	hold()
	tries = append(tries, try(keep))

	want := []bool{true, false, true, false}
	for i := range tries {
		if tries[i] != want[i] {
			t.Errorf("tries[%d]: got %t, want %t", i, tries[i], want[i])
		}
	}
}

// TestXsyncWeightedTryAcquire: x/sync's sequence of tries (xsyncTries),
// each a TryAcquire, refused by the limit that lets nothing wait.
func TestXsyncWeightedTryAcquire(t *testing.T) {
	xsyncEach(t, []xsyncPlace{xsyncGlobalNoWait, xsyncGroupNoWait, xsyncBulkhead}, 2, func(t *testing.T, s *xsyncSem) {
		xsyncTries(t, s, func(keep func(*xsyncPermit)) bool {
			t.Helper()
			p, err := s.acquire(t, bg, s.try, 1)
			if err != nil {
				wantRefusedBy(t, err, s.refusal)
				return false
			}
			keep(p)
			return true
		})
	})
}

// TestXsyncWeightedAcquire is TestXsyncWeightedTryAcquire with acquires that
// wait, and give up once they wait: x/sync's give up after 10 ms.
func TestXsyncWeightedAcquire(t *testing.T) {
	xsyncEach(t, []xsyncPlace{xsyncGlobal, xsyncGroup}, 2, func(t *testing.T, s *xsyncSem) {
		xsyncTries(t, s, func(keep func(*xsyncPermit)) bool {
			t.Helper()
			ctx, cancel := context.WithCancel(bg)
			defer cancel()
			p := s.start(t, ctx, s.group(1), 1)
			await(t, "the acquire ran or waited", func() bool { return p.isRunning() || s.waiting() == 1 })
			if p.isRunning() {
				keep(p)
				return true
			}
			cancel() // nothing is released meanwhile: it cannot have started
			if err := p.acquired(t); !errors.Is(err, context.Canceled) {
				t.Errorf("acquire given up while waiting: %v, want context.Canceled", err)
			}
			return false
		})
	})
}

// TestXsyncWeightedDoesntBlockIfTooBig: an acquire heavier than the size
// does not hold up the lighter ones. x/sync's waits for ever; here it is
// refused at once with ErrTooHeavy.
func TestXsyncWeightedDoesntBlockIfTooBig(t *testing.T) {
	const n = 2
	xsyncEach(t, []xsyncPlace{xsyncGlobal, xsyncGroup}, n, func(t *testing.T, s *xsyncSem) {
		ctx, cancel := context.WithCancel(bg)
		defer cancel()
		big := s.start(t, ctx, s.group(0), n+1)

		var v violations
		var wg sync.WaitGroup
		for i := range n * 3 {
			wg.Go(func() {
				if err := s.run(bg, s.group(1+i), 1, runtime.Gosched); err != nil {
					v.add(fmt.Sprintf("acquire of 1 with an acquire of %d pending on a size of %d: %v", n+1, n, err))
				}
			})
		}
		waitAll(t, &wg, "the acquires of 1 returned")
		v.check(t)
		err := big.acquired(t)
		if err == nil {
			big.free(t)
			t.Fatalf("acquire of %d on a size of %d ran", n+1, n)
		}
		if !errors.Is(err, executor.ErrTooHeavy) {
			t.Fatalf("acquire of %d on a size of %d: %v, want ErrTooHeavy", n+1, n, err)
		}
		var rej *executor.RejectedError
		if !errors.As(err, &rej) || rej.Weight != n+1 || rej.Max != n {
			t.Fatalf("acquire of %d on a size of %d: %#v", n+1, n, rej)
		}
	})
}

// TestXsyncLargeAcquireDoesntStarve: an acquire of the whole size gets
// through although small acquirers keep releasing and acquiring the
// permits. Returning is x/sync's test.
//
// Returning bounds nothing that a test can wait for, and small acquirers
// that overtake a waiting large one starve it only when they never all
// release at once, which is up to the scheduler. So, beside it: once the
// large acquire waits, no small one admitted after it runs before it
// (FIFO in a group; on the global limit, the large one's turn, which it
// keeps until it starts). Only those admitted before, at most one per small
// acquirer, may run meanwhile.
func TestXsyncLargeAcquireDoesntStarve(t *testing.T) {
	n := max(runtime.GOMAXPROCS(0), 2)
	xsyncEach(t, []xsyncPlace{xsyncGlobal, xsyncGroup}, n, func(t *testing.T, s *xsyncSem) {
		var stop atomic.Bool
		t.Cleanup(func() { stop.Store(true) }) // before Close, should the test fail
		var v violations
		var wg sync.WaitGroup
		holding := make(chan struct{}, n)
		var runs atomic.Int64 // small acquires run
		for i := range n {
			wg.Go(func() {
				first := true
				for !stop.Load() {
					err := s.run(bg, s.group(1+i), 1, func() {
						runs.Add(1)
						if first {
							first = false
							holding <- struct{}{}
						}
						runtime.Gosched()
					})
					if err != nil {
						v.add(fmt.Sprintf("small acquire: %v", err))
						return
					}
				}
			})
		}
		for range n {
			recv(t, holding, "every small acquirer held its permit")
		}
		done, ran := make(chan error, 1), make(chan struct{})
		var atRun int64 // the small acquires run when the large one ran
		go func() {
			done <- s.run(bg, s.group(0), n, func() {
				atRun = runs.Load()
				stop.Store(true)
				close(ran)
			})
		}()
		// Small acquirers wait only behind the large one, or while it runs.
		atWait := int64(-1) // the small acquires run when it was seen waiting
		await(t, "the acquire of the whole size ran or waited", func() bool {
			select {
			case <-ran:
				return true
			default:
			}
			if s.waiting() > 0 {
				atWait = runs.Load()
				return true
			}
			return false
		})
		if err := recv(t, done, "the acquire of the whole size ran amid small acquirers"); err != nil {
			t.Fatalf("acquire of %d: %v", n, err)
		}
		if atWait >= 0 && atRun-atWait > int64(n) {
			t.Errorf("%d small acquires ran while the acquire of %d waited, want at most %d: those admitted before it", atRun-atWait, n, n)
		}
		waitAll(t, &wg, "the small acquirers stopped")
		v.check(t)
	})
}

// TestXsyncAllocCancelDoesntStarve: an acquire of 1 queued behind an
// acquire of the whole size, which cannot start while 1 is held, gets
// through once the large one gives up.
//
// x/sync's cancels the large one and acquires 1 at the same moment, in
// either order; here the acquire of 1 is seen waiting behind the large one
// first, the state the test is about, every time.
func TestXsyncAllocCancelDoesntStarve(t *testing.T) {
	xsyncEach(t, []xsyncPlace{xsyncGlobal, xsyncGroup}, 10, func(t *testing.T, s *xsyncSem) {
		held, err := s.acquire(t, bg, s.group(0), 1)
		if err != nil {
			t.Fatal(err)
		}
		defer held.free(t)
		ctx, cancel := context.WithCancel(bg)
		defer cancel()
		large := s.start(t, ctx, s.group(1), 10)
		await(t, "the acquire of 10 waited", func() bool { return s.waiting() == 1 })
		small := s.start(t, bg, s.group(2), 1)
		await(t, "the acquire of 1 waited behind it", func() bool { return small.isRunning() || s.waiting() == 2 })
		if small.isRunning() {
			t.Fatal("the acquire of 1 overtook the acquire of 10 waiting before it")
		}
		cancel()
		if err := large.acquired(t); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled acquire of 10: %v, want context.Canceled", err)
		}
		if err := small.acquired(t); err != nil {
			t.Fatalf("acquire of 1 once the acquire of 10 gave up: %v", err)
		}
		small.free(t)
	})
}

// TestXsyncWeightedAcquireCanceled (golang/go#63615): an acquire whose
// context ends before enough permits are free fails, although the permits
// free up right after, and they all go back; an acquire with an ended
// context fails even when it need not wait. The race between the end and
// the grant is not forced (TestDoStartedAfterItsContextEndedIsNotStarted
// forces it for Do); looping makes it likely.
func TestXsyncWeightedAcquireCanceled(t *testing.T) {
	rounds := 300
	if testing.Short() {
		rounds = 50
	}
	xsyncEach(t, []xsyncPlace{xsyncGlobal, xsyncGroup}, 2, func(t *testing.T, s *xsyncSem) {
		for i := range rounds {
			xsyncAcquireCanceled(t, s, i)
			if t.Failed() {
				return
			}
		}
	})
}

func xsyncAcquireCanceled(t *testing.T, s *xsyncSem, round int) {
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	held, err := s.acquire(t, bg, s.group(0), 1)
	if err != nil {
		t.Fatal(err)
	}
	// The goroutine below ends before the round does, even a failed one.
	ch, quit := make(chan struct{}), make(chan struct{})
	defer func() { close(quit); recv(t, ch, "the releasing goroutine ended") }()
	go func() {
		defer close(ch)
		if s.try != "" {
			// Synchronise with the acquire of 2 below: once it waits, a
			// TryAcquire (a task of the try group, which never waits) fails.
			for {
				err := s.run(bg, s.try, 1, func() {})
				if err != nil {
					if !errors.Is(err, executor.ErrRejected) {
						t.Errorf("round %d: TryAcquire: %v", round, err)
					}
					break
				}
				select {
				case <-quit:
					return
				default:
					runtime.Gosched()
				}
			}
		} else {
			for s.waiting() != 1 {
				select {
				case <-quit:
					return
				default:
					runtime.Gosched()
				}
			}
		}
		// Now end ctx, and then release the permit.
		cancel()
		held.let()
		select {
		case err := <-held.done:
			if err != nil {
				t.Errorf("round %d: the permit held at the start: %v", round, err)
			}
		case <-quit:
		}
	}()
	// ctx ends before enough permits are free: the acquire must fail.
	if p, err := s.acquire(t, ctx, s.group(1), 2); !errors.Is(err, context.Canceled) {
		t.Errorf("round %d: acquire with a context ended before its permits were free: %v, want context.Canceled", round, err)
		if err == nil {
			p.free(t)
		}
	}
	// Both permits are back once the other goroutine has released the one
	// held at the start.
	recv(t, ch, "the permit held at the start released")
	if t.Failed() {
		return
	}
	if st := s.ex.Stats(); st.Running != 0 || st.Waiting != 0 {
		t.Fatalf("round %d: stats after the cancelled acquire %+v", round, st)
	}
	group := s.try
	if group == "" {
		group = s.group(2)
	}
	p, err := s.acquire(t, bg, group, 2)
	if err != nil {
		t.Fatalf("round %d: TryAcquire of 2 after the cancelled acquire: %v", round, err)
	}
	p.free(t)
	if p, err := s.acquire(t, ctx, s.group(1), 1); !errors.Is(err, context.Canceled) {
		t.Errorf("round %d: acquire with an ended context and room: %v, want context.Canceled", round, err)
		if err == nil {
			p.free(t)
		}
	}
}

// xsyncGoPlace is where an errgroup's limit sits: on one group's limits or
// on the global limit, the tasks of a Go spread over groups.
type xsyncGoPlace struct {
	name  string
	opts  func(n int, wait bool) []policy.Option // wait: tasks may wait (TestGoLimit)
	group func(i int) string                     // the group of the i-th Go
	// setLimit is SetLimit(n): the limit changed at runtime.
	setLimit func(t *testing.T, ex *executor.Executor, n int) error
	limit    func(t *testing.T, ex *executor.Executor) int // the limit in force
	refusal  executor.Limit                                // the limit that refuses a TryGo
	// stop makes everything refused, and the error it is refused with.
	stop    func(t *testing.T, ex *executor.Executor) error
	stopped error
	idle    func(t *testing.T, ex *executor.Executor) bool // Wait's condition: nothing in flight
	waiting func(t *testing.T, ex *executor.Executor) int
}

var xsyncGoPlaces = []xsyncGoPlace{{
	name: "group",
	opts: func(n int, wait bool) []policy.Option {
		inFlight := n
		if wait {
			inFlight = policy.Unlimited
		}
		return []policy.Option{policy.WithGroupMaxConcurrency("g", n), policy.WithGroupMaxInFlight("g", inFlight)}
	},
	group: func(int) string { return "g" },
	setLimit: func(t *testing.T, ex *executor.Executor, n int) error {
		st := groupStats(t, ex, "g")
		return ex.SetGroupLimits("g", policy.GroupLimits{MaxInFlight: n, MaxConcurrency: n, QueueThreshold: st.QueueThreshold, Share: st.Share})
	},
	limit:   func(t *testing.T, ex *executor.Executor) int { return groupStats(t, ex, "g").MaxInFlight },
	refusal: executor.LimitGroupInFlight,
	stop:    func(t *testing.T, ex *executor.Executor) error { return ex.ShutdownGroup(guardCtx(t), "g") },
	stopped: executor.ErrGroupShutdown,
	idle: func(t *testing.T, ex *executor.Executor) bool {
		st := groupStats(t, ex, "g")
		return st.InFlight == 0 && st.RunningTasks == 0
	},
	waiting: func(t *testing.T, ex *executor.Executor) int { return groupStats(t, ex, "g").Waiting },
}, {
	name: "global",
	opts: func(n int, wait bool) []policy.Option {
		opts := []policy.Option{
			policy.WithGlobalMaxInFlight(n),
			policy.WithDefaultMaxConcurrency(policy.Unlimited),
			policy.WithDefaultMaxInFlight(policy.Unlimited),
		}
		if !wait {
			opts = append(opts, policy.WithGlobalQueueThreshold(0))
		}
		return opts
	},
	group:    func(i int) string { return fmt.Sprint("a", i%3) },
	setLimit: func(_ *testing.T, ex *executor.Executor, n int) error { return ex.SetGlobalMaxInFlight(n) },
	limit:    func(_ *testing.T, ex *executor.Executor) int { return ex.Stats().GlobalMaxInFlight },
	refusal:  executor.LimitGlobalQueue,
	stop:     func(t *testing.T, ex *executor.Executor) error { return ex.Shutdown(guardCtx(t)) },
	stopped:  executor.ErrShutdown,
	idle: func(_ *testing.T, ex *executor.Executor) bool {
		st := ex.Stats()
		return st.Running == 0 && st.RunningTasks == 0 && st.Waiting == 0
	},
	waiting: func(_ *testing.T, ex *executor.Executor) int { return ex.Stats().Waiting },
}}

// TestXsyncTryGo: with a limit of 42, 42 TryGo calls succeed and the next
// fails; once they are done one succeeds again; with the limit changed to
// 1, one succeeds and the next fails; and once nothing may start, every
// call fails.
func TestXsyncTryGo(t *testing.T) {
	for _, place := range xsyncGoPlaces {
		t.Run(place.name, func(t *testing.T) {
			const n = 42
			ex := newExec(t, place.opts(n, false))
			ch := make(chan struct{})
			fn := func(ctx context.Context) error {
				select {
				case ch <- struct{}{}:
				case <-ctx.Done(): // Close, should the test fail
				}
				return nil
			}
			tryGo := func(i int) error { return ex.Go(bg, place.group(i), fn) }
			wait := func() { await(t, "every task done (Wait)", func() bool { return place.idle(t, ex) }) }
			drain := func(k int) {
				for range k {
					recv(t, ch, "a task ran")
				}
			}

			for i := range n {
				if err := tryGo(i); err != nil {
					t.Fatalf("TryGo should succeed but failed at call %d: %v", i, err)
				}
			}
			if err := tryGo(n); err == nil {
				t.Fatal("TryGo is expected to fail but succeeded")
			} else {
				wantRefusedBy(t, err, place.refusal)
			}
			drain(n)
			wait()

			if err := tryGo(0); err != nil {
				t.Fatalf("TryGo should succeed once every task is done: %v", err)
			}
			drain(1)
			wait()

			// Change the limit.
			if err := place.setLimit(t, ex, 1); err != nil {
				t.Fatalf("SetLimit(1): %v", err)
			}
			if err := tryGo(0); err != nil {
				t.Fatalf("TryGo should succeed under the limit of 1: %v", err)
			}
			if err := tryGo(1); err == nil {
				t.Fatal("TryGo should fail under the limit of 1 but succeeded")
			} else {
				wantRefusedBy(t, err, place.refusal)
			}
			drain(1)
			wait()

			// A limit of 0 is invalid, and changes nothing.
			if err := place.setLimit(t, ex, 0); !errors.Is(err, policy.ErrInvalidOption) {
				t.Fatalf("SetLimit(0): %v, want ErrInvalidOption", err)
			}
			if l := place.limit(t, ex); l != 1 {
				t.Fatalf("the limit after SetLimit(0) is %d, want 1", l)
			}
			// Refuse every call: stop.
			if err := place.stop(t, ex); err != nil {
				t.Fatalf("stop: %v", err)
			}
			for i := range 1 << 10 {
				if err := tryGo(i); !errors.Is(err, place.stopped) || !errors.Is(err, executor.ErrRejected) {
					t.Fatalf("TryGo %d once stopped: %v, want %v", i, err, place.stopped)
				}
			}
			wait()
		})
	}
}

// TestXsyncGoLimit: of 1025 tasks under a limit of 10, never more than 10
// run at once.
//
// Beside x/sync's count of running tasks, taken by each task as it runs,
// the tasks are held until every Go has returned: then exactly 10 run and
// the rest wait, which does not depend on how the tasks interleave.
func TestXsyncGoLimit(t *testing.T) {
	const limit = 10
	const tasks = 1<<10 + 1
	for _, place := range xsyncGoPlaces {
		t.Run(place.name, func(t *testing.T) {
			ex := newExec(t, place.opts(limit, true))
			gate := make(chan struct{})
			closeAtEnd(t, gate)
			var active atomic.Int32
			var v violations
			for i := range tasks {
				err := ex.Go(bg, place.group(i), func(context.Context) error {
					n := active.Add(1)
					defer active.Add(-1)
					if n > limit {
						err := fmt.Errorf("saw %d active tasks; want ≤ %d", n, limit)
						v.add(err.Error())
						return err
					}
					<-gate
					runtime.Gosched() // give other tasks a chance to increment active
					return nil
				})
				if err != nil {
					t.Fatalf("Go %d: %v", i, err)
				}
			}
			await(t, "the first tasks held", func() bool { return active.Load() >= limit })
			if w := place.waiting(t, ex); w != tasks-limit {
				t.Errorf("%d tasks wait with %d running, want %d", w, active.Load(), tasks-limit)
			}
			close(gate)
			await(t, "every task done (Wait)", func() bool { return place.idle(t, ex) })
			v.check(t)
			if st := ex.Stats(); st.Succeeded != tasks || st.Failed != 0 {
				t.Fatalf("stats %+v, want %d succeeded", st, tasks)
			}
		})
	}
}
