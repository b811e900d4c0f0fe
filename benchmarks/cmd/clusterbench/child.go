package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/groupexec/groupexec/benchmarks/internal/stats"

	"github.com/groupexec/groupexec/cluster/redislimit"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
	"github.com/redis/go-redis/v9"
)

// childEnv, when set, makes the binary (this command, or its test binary)
// a child: the value is a childConfig in JSON.
const childEnv = "GROUPEXEC_CLUSTERBENCH_CHILD"

// The workload and limits of BenchmarkClusterLimit (benchmarks/cluster_test.go).
const (
	groups   = 8
	perGroup = 16
	global   = 64
)

// childConfig is what the parent tells a child.
type childConfig struct {
	Addr   string `json:"addr"`   // Redis; "" for local limits only
	Prefix string `json:"prefix"` // the holder's key prefix
	Tasks  int    `json:"tasks"`  // tasks in the measured run
	Batch  int    `json:"batch"`  // submitted together, then waited for
}

// childResult is a child's report, one JSON line on stdout.
type childResult struct {
	Tasks     int64         `json:"tasks"`      // tasks that ended with Success
	Ran       int64         `json:"ran"`        // tasks that counted themselves
	Failed    int64         `json:"failed"`     // tasks that did not end with Success
	Elapsed   time.Duration `json:"elapsed_ns"` // the measured run, from "go" to the last task waited for
	CPU       time.Duration `json:"cpu_ns"`     // this process's CPU time (user+system) over the run
	Mallocs   uint64        `json:"mallocs"`    // heap allocations over the run
	Bytes     uint64        `json:"bytes"`      // heap bytes allocated over the run
	RoundTrip uint64        `json:"rt"`         // Redis round trips over the run (holder Stats)
	RTTotal   uint64        `json:"rt_total"`   // ... including the warm-up
	Refills   uint64        `json:"refills"`    // blocks leased over the run
	Returned  uint64        `json:"returned"`   // permits given back over the run
	Errors    []string      `json:"errors,omitempty"`
}

// childMain runs one child: it builds its executor (and holder), warms up
// with one batch, prints READY, waits for "go" on stdin, runs the tasks and
// prints its result. It exits as soon as stdin closes (the parent is gone),
// whatever it is doing, so that no child outlives a failed parent.
func childMain(cfgJSON string) int {
	var cfg childConfig
	if err := json.Unmarshal([]byte(cfgJSON), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "clusterbench child: bad config:", err)
		return 2
	}
	if cfg.Tasks <= 0 || cfg.Batch <= 0 {
		fmt.Fprintln(os.Stderr, "clusterbench child: tasks and batch must be positive")
		return 2
	}
	in := bufio.NewReader(os.Stdin)
	goLine := make(chan struct{})
	var reported atomic.Bool
	go func() {
		line, err := in.ReadString('\n')
		if err == nil && strings.TrimSpace(line) != "go" {
			err = fmt.Errorf("unexpected line %q", line)
		}
		if err != nil { // the parent is gone, or confused: stop now
			fmt.Fprintln(os.Stderr, "clusterbench child: waiting for go:", err)
			os.Exit(3)
		}
		close(goLine)
		// After "go" the parent sends nothing more; EOF before our result
		// means it is gone.
		_, _ = io.Copy(io.Discard, in)
		if !reported.Load() {
			os.Exit(3)
		}
	}()

	r, err := newRig(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "clusterbench child:", err)
		return 2
	}
	defer r.close()
	if _, err := r.run(cfg.Batch); err != nil { // warm up: leases held, workers parked
		fmt.Fprintln(os.Stderr, "clusterbench child: warm-up:", err)
		return 1
	}
	if r.ran.Load() != int64(cfg.Batch) {
		fmt.Fprintf(os.Stderr, "clusterbench child: warm-up ran %d tasks, want %d\n", r.ran.Load(), cfg.Batch)
		return 1
	}
	r.ran.Store(0)
	runtime.GC()
	fmt.Println("READY")
	<-goLine

	res := childResult{}
	st0 := r.stats()
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	cpu0 := stats.ProcessCPU()
	start := time.Now()
	for left := cfg.Tasks; left > 0; left -= cfg.Batch {
		failed, err := r.run(min(left, cfg.Batch))
		res.Failed += failed
		if err != nil {
			res.Errors = append(res.Errors, err.Error())
			break
		}
	}
	res.Elapsed = time.Since(start)
	res.CPU = stats.ProcessCPU() - cpu0
	runtime.ReadMemStats(&ms1)
	st1 := r.stats()
	res.Mallocs, res.Bytes = ms1.Mallocs-ms0.Mallocs, ms1.TotalAlloc-ms0.TotalAlloc
	res.Ran = r.ran.Load()
	res.Tasks = int64(cfg.Tasks) - res.Failed
	if res.Ran != int64(cfg.Tasks) {
		res.Errors = append(res.Errors, fmt.Sprintf("%d tasks ran, want %d", res.Ran, cfg.Tasks))
	}
	if res.Failed > 0 {
		res.Errors = append(res.Errors, fmt.Sprintf("%d tasks did not end with Success", res.Failed))
	}
	if r.holder != nil {
		res.RoundTrip, res.RTTotal = st1.RoundTrips-st0.RoundTrips, st1.RoundTrips
		res.Refills, res.Returned = st1.Refills-st0.Refills, st1.Returned-st0.Returned
		// The holder must never have been down or fallen back, refused,
		// or lost a lease: none of that belongs in a steady-load run.
		if st1.Mode != redislimit.ModeUp || st1.Outages > 0 {
			res.Errors = append(res.Errors, fmt.Sprintf("holder went down: mode %v, %d outages", st1.Mode, st1.Outages))
		}
		if st1.Rejected+st1.Fallbacks > 0 {
			res.Errors = append(res.Errors, fmt.Sprintf("holder refused %d tasks and fell back for %d", st1.Rejected, st1.Fallbacks))
		}
		if st1.LeasesLost+st1.TasksCancelled > 0 {
			res.Errors = append(res.Errors, fmt.Sprintf("holder lost %d leases, %d tasks cancelled", st1.LeasesLost, st1.TasksCancelled))
		}
	}
	b, err := json.Marshal(res)
	if err != nil {
		fmt.Fprintln(os.Stderr, "clusterbench child:", err)
		return 1
	}
	reported.Store(true)
	fmt.Printf("RESULT %s\n", b)
	return 0
}

// rig is one process's executor with, for the Redis variants, its own
// holder and Redis connection.
type rig struct {
	ex     *executor.Executor
	holder *redislimit.Holder
	client *redis.Client
	keys   []string
	ran    atomic.Int64
	fn     func(context.Context) (struct{}, error)
	hs     []*executor.Handle[struct{}]
}

func newRig(cfg childConfig) (*rig, error) {
	r := &rig{}
	for i := range groups {
		r.keys = append(r.keys, fmt.Sprint("g", i))
	}
	r.fn = func(context.Context) (struct{}, error) { r.ran.Add(1); return struct{}{}, nil }
	p, err := policy.New(policy.WithGlobalMaxInFlight(global), policy.WithDefaultMaxConcurrency(perGroup),
		policy.WithDefaultMaxInFlight(policy.Unlimited))
	if err != nil {
		return nil, err
	}
	var opts []executor.Option
	if cfg.Addr != "" {
		r.client = redis.NewClient(&redis.Options{Addr: cfg.Addr, MaxRetries: -1})
		if err := r.client.Ping(context.Background()).Err(); err != nil {
			r.client.Close()
			return nil, fmt.Errorf("redis at %s: %w", cfg.Addr, err)
		}
		r.holder, err = redislimit.New(r.client, redislimit.WithPrefix(cfg.Prefix))
		if err != nil {
			r.client.Close()
			return nil, err
		}
		opts = append(opts, executor.WithGroupLimiter(r.holder.Groups(perGroup)), executor.WithGlobalLimiter(r.holder.Global(global)))
	}
	r.ex, err = executor.New(p, opts...)
	if err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

func (r *rig) close() {
	if r.ex != nil {
		r.ex.Close()
	}
	if r.holder != nil {
		r.holder.Close()
	}
	if r.client != nil {
		r.client.Close()
	}
}

func (r *rig) stats() redislimit.Stats {
	if r.holder == nil {
		return redislimit.Stats{}
	}
	return r.holder.Stats()
}

// run submits k tasks round robin over the groups, then waits for all of
// them, as BenchmarkClusterLimit does. It returns how many did not end with
// Success; an error if one could not be submitted.
func (r *rig) run(k int) (failed int64, err error) {
	r.hs = r.hs[:0]
	for i := range k {
		h, err := executor.Submit(r.ex, context.Background(), executor.Task[struct{}]{Group: r.keys[i%len(r.keys)], Fn: r.fn})
		if err != nil {
			err = fmt.Errorf("submit: %w", err)
			for _, h := range r.hs {
				_, _ = h.Wait(context.Background())
			}
			return failed, err
		}
		r.hs = append(r.hs, h)
	}
	var first error
	for _, h := range r.hs {
		res, _ := h.Wait(context.Background())
		if res.Status != executor.Success {
			failed++
			if first == nil {
				first = fmt.Errorf("task: %v %v", res.Status, res.Err)
			}
		}
	}
	return failed, first
}
