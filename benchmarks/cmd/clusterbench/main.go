// Command clusterbench measures the cluster limiter (cluster/redislimit)
// with separate OS processes sharing one redis-server: the workload and
// limits of BenchmarkClusterLimit (benchmarks/cluster_test.go), run by N
// child processes at once instead of N executors in one process.
//
//	go run ./cmd/clusterbench -rounds 5 | tee cluster-procs.txt
//
// It starts its own redis-server on a free loopback port
// (cluster/redislimit/redistest) unless -redis names one. Each variant
// starts N children (this binary again, with GROUPEXEC_CLUSTERBENCH_CHILD
// set), each with its own executor and, for the Redis variants, its own
// redislimit.Holder and Redis connection:
//
//   - local xN: every process has local limits only (global 64, 16 running
//     per group), nothing shared: the reference;
//   - redis xN: the same local limits plus h.Groups(16) and h.Global(64)
//     with default holder options, shared by the N processes through Redis.
//
// Every child warms up with one batch, says READY, and waits for "go" on
// stdin, which the parent sends to all of them at once. Each then runs
// -tasks tiny tasks (one atomic add) on 8 groups, submitted round robin by
// batches of -batch (submit all, wait for all), and reports one JSON line:
// tasks, elapsed time, CPU time, allocations, and its holder's round trips.
// The parent adds them up: total tasks/s is all the processes' tasks over
// the longest process's elapsed time. Variants alternate in order from
// round to round; the summary gives medians over the rounds.
//
// It checks what it measures: every task must run and succeed, and no
// holder may go down, refuse, fall back or lose a lease; it exits non-zero
// otherwise. A child exits when its stdin closes, so none outlives the
// parent.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/groupexec/groupexec/benchmarks/internal/stats"

	"github.com/groupexec/groupexec/cluster/redislimit/redistest"
	"github.com/redis/go-redis/v9"
)

// params are the bench's knobs; defaults in main.
type params struct {
	redis  string // Redis address; "" to start a redis-server
	rounds int
	tasks  int   // per process per run
	batch  int   // tasks submitted together
	procs  []int // process counts
	exe    string
	// guard bounds one variant's run (start, warm-up, run, exit).
	guard time.Duration
}

func main() {
	if cfg := os.Getenv(childEnv); cfg != "" {
		os.Exit(childMain(cfg))
	}
	var p params
	var procs string
	flag.StringVar(&p.redis, "redis", "", "address of a running Redis (host:port); empty: start a redis-server on a free loopback port")
	flag.IntVar(&p.rounds, "rounds", 5, "rounds; each runs every variant once, in alternating order")
	flag.IntVar(&p.tasks, "tasks", 2_000_000, "tasks each process runs per variant and round")
	flag.IntVar(&p.batch, "batch", 10_000, "tasks submitted together, then waited for")
	flag.StringVar(&procs, "procs", "1,3", "comma-separated process counts")
	flag.DurationVar(&p.guard, "guard", 5*time.Minute, "give up on a variant run after this long")
	flag.Parse()
	for _, f := range strings.Split(procs, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "clusterbench: bad -procs %q\n", procs)
			os.Exit(2)
		}
		p.procs = append(p.procs, n)
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "clusterbench:", err)
		os.Exit(1)
	}
	p.exe = exe
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if _, err := run(ctx, os.Stdout, p); err != nil {
		fmt.Fprintln(os.Stderr, "clusterbench:", err)
		os.Exit(1)
	}
}

type variant struct {
	redis bool
	procs int
}

func (v variant) String() string {
	if v.redis {
		return fmt.Sprintf("redis x%d", v.procs)
	}
	return fmt.Sprintf("local x%d", v.procs)
}

// measure is one variant's run: all its processes together.
type measure struct {
	v        variant
	children []childResult
	tasks    int64
	wall     time.Duration // the longest child's elapsed time
	rt       uint64
	rtTotal  uint64 // including warm-up
	cpu      time.Duration
	redisCPU time.Duration // redis-server's CPU over the run (INFO cpu)
	mallocs  uint64
	bytes    uint64
}

func (m measure) tps() float64       { return float64(m.tasks) / m.wall.Seconds() }
func (m measure) nsPerTask() float64 { return float64(m.wall.Nanoseconds()) / float64(m.tasks) }
func (m measure) rtPerTask() float64 { return float64(m.rt) / float64(m.tasks) }
func (m measure) cpuPerTask() float64 {
	return float64((m.cpu + m.redisCPU).Nanoseconds()) / float64(m.tasks)
}
func (m measure) allocsPerTask() float64 {
	return float64(m.mallocs) / float64(m.tasks)
}

// run runs every variant p.rounds times and prints each run and a summary.
// It returns the runs by variant, in the order of the variants.
func run(ctx context.Context, out io.Writer, p params) (map[variant][]measure, error) {
	if p.rounds < 1 || p.tasks < 1 || p.batch < 1 || len(p.procs) == 0 {
		return nil, errors.New("rounds, tasks, batch and procs must be positive")
	}
	addr, started := p.redis, "given"
	if addr == "" {
		srv, err := redistest.StartServer()
		if err != nil {
			return nil, err
		}
		defer srv.Stop()
		addr, started = srv.Addr(), "started here"
	}
	rc := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer rc.Close()
	ver, err := redisInfo(ctx, rc, "server", "redis_version")
	if err != nil {
		return nil, fmt.Errorf("redis at %s: %w", addr, err)
	}
	fmt.Fprintf(out, "clusterbench: %s %s/%s, NumCPU %d, GOMAXPROCS %d (each process), redis-server %s at %s (%s), %s\n",
		runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.GOMAXPROCS(0), ver, addr, started,
		time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(out, "workload: %d groups, tiny tasks, local limits global %d and %d running per group; redis variants add h.Groups(%d), h.Global(%d), default holder options\n",
		groups, global, perGroup, perGroup, global)
	fmt.Fprintf(out, "each process: warm-up %d tasks, then %d tasks by batches of %d; %d rounds, variant order alternating\n",
		p.batch, p.tasks, p.batch, p.rounds)

	var vs []variant
	for _, n := range p.procs {
		vs = append(vs, variant{false, n}, variant{true, n})
	}
	runs := map[variant][]measure{}
	prefix := fmt.Sprintf("clusterbench:%d:%d", os.Getpid(), time.Now().UnixNano())
	for r := range p.rounds {
		order := slices.Clone(vs)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, v := range order {
			if err := ctx.Err(); err != nil {
				return runs, err
			}
			cfg := childConfig{Tasks: p.tasks, Batch: p.batch}
			if v.redis {
				cfg.Addr, cfg.Prefix = addr, fmt.Sprintf("%s:%d:%d", prefix, r, v.procs)
			}
			m, err := runVariant(ctx, p, v, cfg, rc)
			if err != nil {
				return runs, fmt.Errorf("round %d, %v: %w", r+1, v, err)
			}
			runs[v] = append(runs[v], m)
			fmt.Fprintf(out, "round %d %-9s %s\n", r+1, v.String()+":", describe(m))
		}
	}
	summary(out, vs, runs)
	return runs, nil
}

func describe(m measure) string {
	var el []string
	for _, c := range m.children {
		el = append(el, fmt.Sprintf("%.3f", c.Elapsed.Seconds()))
	}
	return fmt.Sprintf("%d tasks in %.3fs: %.3f M tasks/s, %.0f ns/task, rt/task %.5f (%d rt; %d with warm-up), "+
		"CPU %.0f ns/task (redis-server %.0f), allocs/task %.2f, B/task %.0f; per process s [%s]",
		m.tasks, m.wall.Seconds(), m.tps()/1e6, m.nsPerTask(), m.rtPerTask(), m.rt, m.rtTotal,
		m.cpuPerTask(), float64(m.redisCPU.Nanoseconds())/float64(m.tasks), m.allocsPerTask(),
		float64(m.bytes)/float64(m.tasks), strings.Join(el, " "))
}

// summary prints the medians over the rounds as a Markdown table, and each
// Redis variant's throughput as a ratio to local-only with as many
// processes in the same round (median and range).
func summary(out io.Writer, vs []variant, runs map[variant][]measure) {
	col := func(v variant, f func(measure) float64) []float64 {
		var xs []float64
		for _, m := range runs[v] {
			xs = append(xs, f(m))
		}
		return xs
	}
	fmt.Fprintf(out, "\nmedians over %d rounds:\n\n", len(runs[vs[0]]))
	fmt.Fprintln(out, "| variant | processes | total tasks/s | ns/task (wall) | rt/task | CPU ns/task (all processes + redis) | allocs/task | tasks/s ratio to local-only, same processes (median, range) |")
	fmt.Fprintln(out, "|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, v := range vs {
		ratio := "1 (reference)"
		if v.redis {
			var rs []float64
			loc := runs[variant{false, v.procs}]
			for i, m := range runs[v] {
				if i < len(loc) {
					rs = append(rs, m.tps()/loc[i].tps())
				}
			}
			ratio = fmt.Sprintf("%.3f (%.3f-%.3f)", stats.Median(rs), slices.Min(rs), slices.Max(rs))
		}
		name := "local limits only"
		if v.redis {
			name = "Redis limits, shared"
		}
		fmt.Fprintf(out, "| %s | %d | %.3f M | %.0f | %.5f | %.0f | %.2f | %s |\n", name, v.procs,
			stats.Median(col(v, measure.tps))/1e6, stats.Median(col(v, measure.nsPerTask)), stats.Median(col(v, measure.rtPerTask)),
			stats.Median(col(v, measure.cpuPerTask)), stats.Median(col(v, measure.allocsPerTask)), ratio)
	}
}

// child is one running child process.
type child struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	stderr *stderrBuf
}

// runVariant starts v.procs children, starts them together, collects their
// results and waits for them to exit. Whatever fails, every child is killed
// and waited for before it returns.
func runVariant(ctx context.Context, p params, v variant, cfg childConfig, rc *redis.Client) (m measure, err error) {
	ctx, cancel := context.WithTimeout(ctx, p.guard)
	defer cancel()
	cj, err := json.Marshal(cfg)
	if err != nil {
		return m, err
	}
	var kids []*child
	defer func() {
		if err != nil {
			cancel() // kills the children still running
		}
		for i, k := range kids {
			_ = k.stdin.Close()
			werr := k.cmd.Wait()
			for range k.lines { // Wait closed stdout: the reader ends
			}
			if werr != nil && err == nil {
				err = fmt.Errorf("child %d: %v%s", i, werr, k.stderr.suffix())
			}
		}
		if e, ok := err.(*exitedEarly); ok {
			// Waited for, the child has all its stderr in the buffer.
			err = fmt.Errorf("%v%s", e, e.k.stderr.suffix())
		}
	}()
	for range v.procs {
		cmd := exec.CommandContext(ctx, p.exe)
		cmd.Env = append(os.Environ(), childEnv+"="+string(cj))
		cmd.WaitDelay = 5 * time.Second
		k := &child{cmd: cmd, lines: make(chan string, 4), stderr: &stderrBuf{}}
		cmd.Stderr = k.stderr
		if k.stdin, err = cmd.StdinPipe(); err != nil {
			return m, err
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return m, err
		}
		if err := cmd.Start(); err != nil {
			return m, fmt.Errorf("start child: %w", err)
		}
		kids = append(kids, k)
		go func() { // ends when the child's stdout closes: it exited or was killed
			s := bufio.NewScanner(stdout)
			for s.Scan() {
				k.lines <- s.Text()
			}
			close(k.lines)
		}()
	}
	expect := func(i int, k *child, prefix string) (string, error) {
		select {
		case l, ok := <-k.lines:
			if !ok {
				return "", &exitedEarly{i, strings.TrimSpace(prefix), k}
			}
			rest, found := strings.CutPrefix(l, prefix)
			if !found {
				return "", fmt.Errorf("child %d printed %q, want %s", i, l, strings.TrimSpace(prefix))
			}
			return rest, nil
		case <-ctx.Done():
			return "", fmt.Errorf("child %d: no %s: %w", i, strings.TrimSpace(prefix), ctx.Err())
		}
	}
	for i, k := range kids {
		if _, err := expect(i, k, "READY"); err != nil {
			return m, err
		}
	}
	var cpu0 time.Duration
	if v.redis {
		if cpu0, err = redisCPU(ctx, rc); err != nil {
			return m, err
		}
	}
	for i, k := range kids {
		if _, err := io.WriteString(k.stdin, "go\n"); err != nil {
			return m, fmt.Errorf("child %d: %w", i, err)
		}
	}
	m.v = v
	var errs []error
	for i, k := range kids {
		line, err := expect(i, k, "RESULT ")
		if err != nil {
			return m, err
		}
		var r childResult
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			return m, fmt.Errorf("child %d: %w in %q", i, err, line)
		}
		for _, e := range r.Errors {
			errs = append(errs, fmt.Errorf("child %d: %s", i, e))
		}
		if r.Tasks <= 0 || r.Elapsed <= 0 {
			errs = append(errs, fmt.Errorf("child %d reported %d tasks in %v", i, r.Tasks, r.Elapsed))
		}
		if v.redis && r.RTTotal == 0 {
			errs = append(errs, fmt.Errorf("child %d counted no Redis round trip, not even to lease its first blocks", i))
		}
		m.children = append(m.children, r)
		m.tasks += r.Tasks
		m.rt += r.RoundTrip
		m.rtTotal += r.RTTotal
		m.cpu += r.CPU
		m.mallocs += r.Mallocs
		m.bytes += r.Bytes
		if r.Elapsed > m.wall {
			m.wall = r.Elapsed
		}
	}
	if v.redis {
		cpu1, err := redisCPU(ctx, rc)
		if err != nil {
			return m, err
		}
		m.redisCPU = cpu1 - cpu0
	}
	return m, errors.Join(errs...)
}

// redisCPU returns redis-server's CPU time, user and system, from INFO cpu.
func redisCPU(ctx context.Context, rc *redis.Client) (time.Duration, error) {
	var sum time.Duration
	for _, f := range []string{"used_cpu_user", "used_cpu_sys"} {
		s, err := redisInfo(ctx, rc, "cpu", f)
		if err != nil {
			return 0, err
		}
		x, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return 0, fmt.Errorf("INFO cpu %s: %w", f, err)
		}
		sum += time.Duration(x * float64(time.Second))
	}
	return sum, nil
}

// redisInfo returns one field of a section of INFO.
func redisInfo(ctx context.Context, rc *redis.Client, section, field string) (string, error) {
	s, err := rc.Info(ctx, section).Result()
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(s, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), field+":"); ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("INFO %s has no %s", section, field)
}

// exitedEarly is a child that exited before it printed what its parent
// expected. Its stderr is added to the error once the child has been
// waited for: until then, exec may still be copying it, and the reason the
// child gave could be missing.
type exitedEarly struct {
	i    int
	want string
	k    *child
}

func (e *exitedEarly) Error() string { return fmt.Sprintf("child %d exited before %s", e.i, e.want) }

// stderrBuf keeps the first few KiB a child writes to stderr, for errors.
type stderrBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *stderrBuf) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.b.Len() < 4096 {
		w.b.Write(p[:min(len(p), 4096-w.b.Len())])
	}
	return len(p), nil
}

func (w *stderrBuf) suffix() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.b.Len() == 0 {
		return ""
	}
	return "; its stderr: " + strings.TrimSpace(w.b.String())
}
