package executor_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// Close against everything at once: submitters of Submit, Go and Do,
// tasks that block until cancelled, exit their goroutine or submit more,
// a listener, a spawn hook that panics now and then, evictions, a second
// Close and a Shutdown with a short deadline. No worker is started once a
// Close has returned, and none is left running (TestMain's goleak).
func TestCloseRacesEverything(t *testing.T) {
	rounds := 100
	if testing.Short() {
		rounds = 20
	}
	for round := range rounds {
		closeRaceRound(t, uint64(round))
	}
}

func closeRaceRound(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 7))
	p, err := policy.New(policy.WithGlobalMaxInFlight(1+r.IntN(4)), policy.WithDefaultMaxConcurrency(1+r.IntN(2)),
		policy.WithDefaultMaxInFlight(64), policy.WithDefaultQueueThreshold(64))
	if err != nil {
		t.Fatal(err)
	}
	var closedOnce atomic.Bool // a Close has returned
	var late, spawns atomic.Int64
	spawn := func(f func()) {
		if closedOnce.Load() {
			late.Add(1)
		}
		if spawns.Add(1)%5 == 0 {
			panic("spawn refused")
		}
		go f()
	}
	opts := []executor.Option{executor.WithSpawn(spawn), executor.WithMaxIdleGroups(r.IntN(2))}
	if r.IntN(2) == 0 {
		opts = append(opts, executor.WithListener(executor.ListenerFuncs{Completed: func(executor.Event) { runtime.Gosched() }}))
	}
	ex, err := executor.New(p, opts...)
	if err != nil {
		t.Fatal(err)
	}
	var ex2 *executor.Executor = ex
	body := func(mode int) func(context.Context) error {
		return func(ctx context.Context) error {
			switch mode {
			case 0:
				<-ctx.Done()
			case 1:
				runtime.Goexit()
			case 2:
				_ = ex2.Go(ctx, "gx", func(context.Context) error { return nil })
			case 3:
				runtime.Gosched()
			}
			return nil
		}
	}
	var wg sync.WaitGroup
	var stop atomic.Bool
	defer stop.Store(true) // a test failed on a wait below stops them too
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(w)))
			for !stop.Load() {
				runtime.Gosched() // at GOMAXPROCS 1, lets Close make progress between calls
				grp := fmt.Sprint("g", r.IntN(6))
				fn := body(r.IntN(5))
				switch r.IntN(3) {
				case 0:
					_ = ex.Go(bg, grp, fn)
				case 1:
					_, _ = executor.Submit(ex, bg, executor.Task[int]{Group: grp, Fn: func(ctx context.Context) (int, error) { return 0, fn(ctx) }})
				case 2:
					dctx, cancel := context.WithTimeout(bg, time.Millisecond)
					done := make(chan struct{})
					go func() { defer close(done); _ = ex.Do(dctx, grp, fn) }()
					<-done
					cancel()
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		r := rand.New(rand.NewPCG(seed, 99))
		for !stop.Load() {
			ex.EvictGroup(fmt.Sprint("g", r.IntN(6)))
			runtime.Gosched()
		}
	}()
	time.Sleep(time.Duration(r.IntN(300)) * time.Microsecond)
	var cw sync.WaitGroup
	cw.Add(3)
	go func() {
		defer cw.Done()
		ctx, cancel := context.WithTimeout(bg, time.Duration(r.IntN(50))*time.Microsecond)
		defer cancel()
		_ = ex.Shutdown(ctx)
	}()
	for range 2 {
		go func() {
			defer cw.Done()
			ex.Close()
			closedOnce.Store(true)
		}()
	}
	waitAll(t, &cw, "Shutdown and both Close calls returned")
	stop.Store(true)
	waitAll(t, &wg, "the submitters and the evictor stopped")
	ex.Close()
	if n := late.Load(); n != 0 {
		t.Fatalf("seed %d: %d workers spawned after Close returned", seed, n)
	}
}

// A spawn function backed by a bounded, blocking pool: parked workers hold
// its slots. A task started while every slot is taken waits in spawn for
// one; Close lets the parked workers go before it waits for the tasks, so
// the task gets its slot, runs and Close returns.
func TestCloseReleasesParkedWorkersBeforeWaitingForTasks(t *testing.T) {
	spawn, slots := boundedSpawn(2)
	p, err := policy.New(policy.WithGlobalMaxInFlight(3), policy.WithDefaultMaxConcurrency(2))
	if err != nil {
		t.Fatal(err)
	}
	ex, err := executor.New(p, executor.WithSpawn(spawn))
	if err != nil {
		t.Fatal(err)
	}
	ran, submitted := parkHoldingEverySlot(t, ex, slots)
	closed := make(chan struct{})
	go func() { ex.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close still waiting after 10s: the parked workers keep the pool's slots")
	}
	recv(t, submitted, "Go returned")
	recv(t, ran, "the third task ran")
}

// boundedSpawn returns a spawn function (WithSpawn) backed by a pool of n
// slots that blocks while every slot is taken, and its slots.
func boundedSpawn(n int) (spawn func(func()), slots chan struct{}) {
	slots = make(chan struct{}, n)
	return func(f func()) {
		slots <- struct{}{} // blocks while the pool is full
		go func() {
			defer func() { <-slots }()
			f()
		}()
	}, slots
}

// parkHoldingEverySlot fills ex's spawn pool of 2 slots (boundedSpawn) with
// two workers of group a, starts a third task, of group c, whose worker
// waits in spawn for a slot, then lets the two finish and park, holding
// their slots. ex's global limit is 3, its groups' concurrency 2. It
// returns channels closed once the third task has run and once its Go
// call has returned.
func parkHoldingEverySlot(t *testing.T, ex *executor.Executor, slots chan struct{}) (ran, submitted chan struct{}) {
	t.Helper()
	release := make(chan struct{})
	closeAtEnd(t, release)
	for range 2 { // two workers: the pool is full
		if err := ex.Go(bg, "a", func(context.Context) error { <-release; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	ran, submitted = make(chan struct{}), make(chan struct{})
	go func() { // its worker waits in spawn for a slot
		defer close(submitted)
		_ = ex.Go(bg, "c", func(context.Context) error { close(ran); return nil })
	}()
	await(t, "the third task started, its worker waiting for a slot", func() bool { return len(slots) >= 2 && ex.Stats().Running >= 3 })
	close(release) // the two workers park, holding their slots
	await(t, "the two workers parked", func() bool { return ex.Parked() >= 2 })
	return ran, submitted
}
