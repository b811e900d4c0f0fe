package benchmarks

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// The waiting-memory workload: how many bytes a task costs while it waits.
//
// ours: global limit 1, held by one blocker task (in its own group) that
// waits on a gate; then n tiny tasks go into group "waiting" (in-flight limit
// and queue thresholds Unlimited), none of which can start. The cost is the
// live heap delta (HeapAlloc after runtime.GC) plus the StackInuse delta,
// divided by n. The slice that keeps the n handles is allocated before the
// baseline, so its 8 bytes per task are not counted (a caller needs some
// reference to its handles anyway). Then the gate opens and every task runs.
//
// ours-go: the same with Executor.Go, which keeps no handle.
//
// goroutine-semaphore: the goroutine-per-waiter approach; n goroutines
// blocked in Acquire on a golang.org/x/sync/semaphore.Weighted(1) that is
// held, measured the same way (heap, which includes the goroutines' g
// structs, closures and semaphore waiter entries, plus stacks).
//
// Each measurement runs in a fresh child process (this test binary, running
// TestMemoryChild), so what earlier benchmarks left behind (the runtime
// reuses dead goroutines' g structs and keeps freed stacks and spans) does
// not hide part of the cost. One benchmark op is one whole measurement; read
// the bytes/waiting-task metric, not ns/op.

const (
	oursWaiting      = 1_000_000
	goroutineWaiting = 100_000
	memChildEnv      = "GROUPEXEC_BENCH_MEMCHILD"
)

// memStats returns HeapAlloc and StackInuse after a full collection.
func memStats() (heap, stack uint64) {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc, ms.StackInuse
}

func perTask(h0, s0, h1, s1 uint64, n int) float64 {
	return (float64(h1) - float64(h0) + float64(s1) - float64(s0)) / float64(n)
}

// oursWaitingCost measures ours with n waiting tasks, then runs them all.
func oursWaitingCost(n int) (float64, error) { return waitingCost(n, false) }

// oursGoWaitingCost is oursWaitingCost with tasks started by Executor.Go:
// no handle to keep, so nothing is kept outside the executor.
func oursGoWaitingCost(n int) (float64, error) { return waitingCost(n, true) }

func waitingCost(n int, useGo bool) (float64, error) {
	p, err := policy.New(
		policy.WithGlobalMaxInFlight(1),
		policy.WithDefaultMaxInFlight(policy.Unlimited),
		policy.WithDefaultQueueThreshold(policy.Unlimited),
		policy.WithGlobalQueueThreshold(policy.Unlimited),
	)
	if err != nil {
		return 0, err
	}
	ex, err := executor.New(p)
	if err != nil {
		return 0, err
	}
	defer ex.Close()
	ctx := context.Background()

	gate, started := make(chan struct{}), make(chan struct{})
	blocker, err := executor.Submit(ex, ctx, executor.Task[struct{}]{Group: "blocker",
		Fn: func(context.Context) (struct{}, error) { close(started); <-gate; return struct{}{}, nil }})
	if err != nil {
		return 0, err
	}
	<-started

	var c counter
	var wg sync.WaitGroup
	fn := func(context.Context) (struct{}, error) { c.tiny(); return struct{}{}, nil }
	goFn := func(context.Context) error { c.tiny(); wg.Done(); return nil }
	var hs []*executor.Handle[struct{}]
	if !useGo {
		hs = make([]*executor.Handle[struct{}], n)
	}
	wg.Add(n)
	h0, s0 := memStats()
	for i := range n {
		if useGo {
			err = ex.Go(ctx, "waiting", goFn)
		} else {
			hs[i], err = executor.Submit(ex, ctx, executor.Task[struct{}]{Group: "waiting", Fn: fn})
		}
		if err != nil {
			close(gate)
			return 0, fmt.Errorf("submit %d: %w", i, err)
		}
	}
	h1, s1 := memStats()
	cost := perTask(h0, s0, h1, s1, n)

	// Both readings come before the gate opens: once it does, the waiting
	// tasks run at once.
	st, ran := ex.Stats(), c.n.Load()
	close(gate)
	if st.Waiting != n || ran != 0 {
		return 0, fmt.Errorf("%d tasks waiting and %d run before the gate opened, want %d and 0", st.Waiting, ran, n)
	}
	if _, err := blocker.Wait(ctx); err != nil {
		return 0, err
	}
	for i, h := range hs {
		if r, _ := h.Wait(ctx); r.Status != executor.Success {
			return 0, fmt.Errorf("task %d: %v %v", i, r.Status, r.Err)
		}
		wg.Done()
	}
	wg.Wait()
	if got := c.n.Load(); got != int64(n) {
		return 0, fmt.Errorf("ran %d tasks, want %d", got, n)
	}
	runtime.KeepAlive(hs)
	return cost, nil
}

// goroutineWaitingCost measures n goroutines blocked on a held semaphore,
// then releases it and waits for all of them.
func goroutineWaitingCost(n int) (float64, error) {
	ctx := context.Background()
	sem := semaphore.NewWeighted(1)
	if err := sem.Acquire(ctx, 1); err != nil {
		return 0, err
	}
	var c counter
	var entered, failed atomic.Int64
	var wg sync.WaitGroup
	h0, s0 := memStats()
	wg.Add(n)
	for range n {
		go func() {
			defer wg.Done()
			entered.Add(1)
			if sem.Acquire(ctx, 1) != nil {
				failed.Add(1)
				return
			}
			c.tiny()
			sem.Release(1)
		}()
	}
	for entered.Load() < int64(n) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // let the last ones park in Acquire
	h1, s1 := memStats()
	cost := perTask(h0, s0, h1, s1, n)
	ran := c.n.Load()
	sem.Release(1)
	wg.Wait()
	if ran != 0 || failed.Load() != 0 || c.n.Load() != int64(n) {
		return 0, fmt.Errorf("ran %d before release, %d failed, %d total; want 0, 0, %d", ran, failed.Load(), c.n.Load(), n)
	}
	return cost, nil
}

var memKinds = map[string]func(int) (float64, error){
	"ours":                oursWaitingCost,
	"ours-go":             oursGoWaitingCost,
	"goroutine-semaphore": goroutineWaitingCost,
}

// TestMemoryChild is the child process of measureInChild; run directly it
// skips.
func TestMemoryChild(t *testing.T) {
	spec := os.Getenv(memChildEnv)
	if spec == "" {
		t.Skip("helper process for the waiting-memory benchmark")
	}
	kind, ns, _ := strings.Cut(spec, ":")
	n, err := strconv.Atoi(ns)
	f := memKinds[kind]
	if err != nil || f == nil {
		t.Fatalf("bad %s=%q", memChildEnv, spec)
	}
	cost, err := f(n)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("MEMRESULT %s %d %.3f\n", kind, n, cost)
}

// measureInChild runs one measurement of kind with n waiters in a fresh
// process and returns its bytes per waiter.
func measureInChild(kind string, n int) (float64, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestMemoryChild$", "-test.bench=^$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s:%d", memChildEnv, kind, n))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("child %s: %w\n%s", kind, err, out.String())
	}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var k string
		var got int
		var cost float64
		if _, err := fmt.Sscanf(sc.Text(), "MEMRESULT %s %d %f", &k, &got, &cost); err == nil && k == kind && got == n {
			return cost, nil
		}
	}
	return 0, fmt.Errorf("child %s: no result in output:\n%s", kind, out.String())
}

func BenchmarkWaitingMemory(b *testing.B) {
	for _, c := range []struct {
		kind string
		n    int
	}{{"ours", oursWaiting}, {"ours-go", oursWaiting}, {"goroutine-semaphore", goroutineWaiting}} {
		b.Run(c.kind, func(b *testing.B) {
			var sum float64
			for range b.N {
				cost, err := measureInChild(c.kind, c.n)
				if err != nil {
					b.Fatal(err)
				}
				sum += cost
			}
			b.ReportMetric(sum/float64(b.N), "bytes/waiting-task")
			b.ReportMetric(float64(c.n), "waiting-tasks")
		})
	}
}
