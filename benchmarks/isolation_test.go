package benchmarks

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// The isolation workload: does a hot group's backlog delay another group?
//
// Limits: concurrency 4 per group, global 64. A hot group gets a backlog of
// 100,000 tiny tasks. Its tasks are held at a gate until the whole backlog
// is in place (ours: 4 running, 99,996 waiting in the group's queue; xsync:
// all 100,000 goroutines have called their first Acquire), so every peer
// faces exactly the same backlog, and a runtime.GC() has completed, so that
// no collection triggered by building the backlog is still marking during
// the probe (without it, GC mark workers occupied both Ps for up to ~1 ms in
// some of ours' probes, seen in an execution trace). Then the gate opens (the hot group starts
// draining, 4 at a time) and, right after, one task of a cold group is
// submitted. Measured:
//
//   - ns/cold-start: time from the cold Submit (xsync: from the go
//     statement) to the start of its Fn, mean over the ops of a run;
//     p50-ns/cold-start is the median over the same ops;
//   - hot-starts-before-cold: hot tasks that started between the cold
//     task's submission and its start (how far the backlog overtook it);
//   - hot-backlog-at-probe: hot tasks not yet started when the cold task
//     was submitted (checks the backlog was really there).
//
// One benchmark op is one whole experiment (build the backlog, probe once,
// drain); read the custom metrics, not ns/op.
//
// Peers: ours, and the hand-written x/sync version in both acquisition
// orders. With the global permit taken first, the hot group's queued
// goroutines hold global permits while they wait for the group's, and the
// cold goroutine queues behind the whole backlog in the global semaphore's
// FIFO.

const (
	isoBacklog = 100_000
	isoConc    = 4
	isoGlobal  = 64
)

type isoResult struct {
	delay         time.Duration
	hotBefore     int64 // hot tasks started between cold submit and cold start
	backlogAtProb int64 // hot tasks not started when the cold task was submitted
}

// hotState is the hot group's gate and start count.
type hotState struct {
	gate    chan struct{}
	started atomic.Int64
}

func (h *hotState) task() {
	<-h.gate
	h.started.Add(1)
}

// coldProbe records when the cold task started and how many hot tasks had
// started by then.
type coldProbe struct {
	at      time.Time
	hotSeen int64
}

func oursIsolation(backlog int) (isoResult, error) {
	p, err := policy.New(
		policy.WithGlobalMaxInFlight(isoGlobal),
		policy.WithDefaultMaxConcurrency(isoConc),
		policy.WithDefaultMaxInFlight(policy.Unlimited),
	)
	if err != nil {
		return isoResult{}, err
	}
	ex, err := executor.New(p)
	if err != nil {
		return isoResult{}, err
	}
	defer ex.Close()
	ctx := context.Background()
	hot := &hotState{gate: make(chan struct{})}
	hotFn := func(context.Context) (struct{}, error) { hot.task(); return struct{}{}, nil }
	hs := make([]*executor.Handle[struct{}], backlog)
	for i := range hs {
		if hs[i], err = executor.Submit(ex, ctx, executor.Task[struct{}]{Group: "hot", Fn: hotFn}); err != nil {
			close(hot.gate)
			return isoResult{}, err
		}
	}
	if gs, _ := ex.GroupStats("hot"); gs.Waiting != backlog-isoConc || gs.RunningTasks != isoConc {
		close(hot.gate)
		return isoResult{}, fmt.Errorf("hot group: %d waiting, %d running; want %d, %d", gs.Waiting, gs.RunningTasks, backlog-isoConc, isoConc)
	}

	runtime.GC() // settle: no collection in progress at the probe
	var probe coldProbe
	coldFn := func(context.Context) (struct{}, error) {
		probe.at = time.Now()
		probe.hotSeen = hot.started.Load()
		return struct{}{}, nil
	}
	close(hot.gate)
	s0 := hot.started.Load()
	t0 := time.Now()
	cold, err := executor.Submit(ex, ctx, executor.Task[struct{}]{Group: "cold", Fn: coldFn})
	if err != nil {
		return isoResult{}, err
	}
	if r, _ := cold.Wait(ctx); r.Status != executor.Success {
		return isoResult{}, fmt.Errorf("cold task: %v %v", r.Status, r.Err)
	}
	res := isoResult{delay: probe.at.Sub(t0), hotBefore: probe.hotSeen - s0, backlogAtProb: int64(backlog) - s0}
	for i, h := range hs {
		if r, _ := h.Wait(ctx); r.Status != executor.Success {
			return isoResult{}, fmt.Errorf("hot task %d: %v %v", i, r.Status, r.Err)
		}
	}
	if got := hot.started.Load(); got != int64(backlog) {
		return isoResult{}, fmt.Errorf("hot group ran %d tasks, want %d", got, backlog)
	}
	return res, nil
}

func xsyncIsolation(backlog int, globalFirst bool) (isoResult, error) {
	hot := &hotState{gate: make(chan struct{})}
	var c counter // unused by the hot and cold tasks; the runner needs one
	r := newXsync(&c, nil, isoGlobal, isoConc, globalFirst)
	ctx := context.Background()
	var wg sync.WaitGroup
	var entered, failed atomic.Int64
	enter := func() { entered.Add(1) }
	wg.Add(backlog)
	for range backlog {
		go func() {
			defer wg.Done()
			if r.do(ctx, "hot", hot.task, enter) != nil {
				failed.Add(1)
			}
		}()
	}
	for entered.Load() < int64(backlog) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // let the last ones park in Acquire
	runtime.GC()                      // settle: no collection in progress at the probe

	var probe coldProbe
	coldFn := func() {
		probe.at = time.Now()
		probe.hotSeen = hot.started.Load()
	}
	done := make(chan struct{})
	close(hot.gate)
	s0 := hot.started.Load()
	t0 := time.Now()
	go func() {
		defer close(done)
		if r.do(ctx, "cold", coldFn, nil) != nil {
			failed.Add(1)
		}
	}()
	<-done
	res := isoResult{delay: probe.at.Sub(t0), hotBefore: probe.hotSeen - s0, backlogAtProb: int64(backlog) - s0}
	wg.Wait()
	if failed.Load() != 0 || hot.started.Load() != int64(backlog) {
		return isoResult{}, fmt.Errorf("xsync: %d failed, hot ran %d, want 0, %d", failed.Load(), hot.started.Load(), backlog)
	}
	return res, nil
}

var isoPeers = []struct {
	name string
	run  func(backlog int) (isoResult, error)
}{
	{"ours", oursIsolation},
	{"xsync-group-first", func(n int) (isoResult, error) { return xsyncIsolation(n, false) }},
	{"xsync-global-first", func(n int) (isoResult, error) { return xsyncIsolation(n, true) }},
}

func BenchmarkIsolation(b *testing.B) {
	for _, pc := range isoPeers {
		b.Run(pc.name, func(b *testing.B) {
			delays := make([]time.Duration, 0, b.N)
			var before, backlog int64
			for range b.N {
				res, err := pc.run(isoBacklog)
				if err != nil {
					b.Fatal(err)
				}
				delays = append(delays, res.delay)
				before += res.hotBefore
				backlog += res.backlogAtProb
			}
			n := float64(b.N)
			var sum time.Duration
			for _, d := range delays {
				sum += d
			}
			slices.Sort(delays)
			b.ReportMetric(float64(sum.Nanoseconds())/n, "ns/cold-start")
			b.ReportMetric(float64(delays[len(delays)/2].Nanoseconds()), "p50-ns/cold-start")
			b.ReportMetric(float64(before)/n, "hot-starts-before-cold")
			b.ReportMetric(float64(backlog)/n, "hot-backlog-at-probe")
		})
	}
}
