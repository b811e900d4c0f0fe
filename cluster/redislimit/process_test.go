package redislimit_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/groupexec/groupexec/cluster/redislimit"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
	"github.com/redis/go-redis/v9"
)

// Holder processes: the test binary re-executed with childEnv set to a mode.
const (
	childEnv    = "GROUPEXEC_REDISLIMIT_CHILD"
	childAddr   = "GROUPEXEC_REDISLIMIT_ADDR"
	childPrefix = "GROUPEXEC_REDISLIMIT_PREFIX"
	childArg    = "GROUPEXEC_REDISLIMIT_ARG"
	childTTL    = "GROUPEXEC_REDISLIMIT_TTL" // the lease TTL, if not testTTL; the renew interval scales with it
)

type child struct {
	cmd   *exec.Cmd
	lines chan string
	done  chan struct{}
	err   error
}

// startChild runs this test binary as a holder process in mode.
func startChild(t *testing.T, mode, addr, prefix, arg string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+mode, childAddr+"="+addr, childPrefix+"="+prefix, childArg+"="+arg)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start child: %v", err)
	}
	c := &child{cmd: cmd, lines: make(chan string, 1024), done: make(chan struct{})}
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			c.lines <- s.Text()
		}
		close(c.lines)
		c.err = cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		<-c.done
	})
	return c
}

// expect reads the child's lines until one starts with prefix, and returns
// the rest of it.
func (c *child) expect(t *testing.T, prefix string, guard time.Duration) string {
	t.Helper()
	timeout := time.After(guard)
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				<-c.done
				t.Fatalf("child exited (%v) before printing %q", c.err, prefix)
			}
			if rest, found := strings.CutPrefix(l, prefix); found {
				return strings.TrimSpace(rest)
			}
		case <-timeout:
			t.Fatalf("child printed no %q within %v", prefix, guard)
		}
	}
}

func childMain(mode string) int {
	addr, prefix, arg := os.Getenv(childAddr), os.Getenv(childPrefix), os.Getenv(childArg)
	c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 200 * time.Millisecond, ReadTimeout: 200 * time.Millisecond,
		WriteTimeout: 200 * time.Millisecond, MaxRetries: -1, Protocol: 2})
	defer c.Close()
	ttl, renew := testTTL, testRenew
	if d, err := time.ParseDuration(os.Getenv(childTTL)); err == nil {
		ttl, renew = d, d/(testTTL/testRenew)
	}
	h, err := redislimit.New(c, redislimit.WithPrefix(prefix), redislimit.WithLeaseTTL(ttl),
		redislimit.WithRenewInterval(renew), redislimit.WithPollInterval(testPoll))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer h.Close()
	switch mode {
	case "load":
		d, _ := time.ParseDuration(arg)
		started, err := runLoad(c, h, prefix, d, 1)
		if err != nil {
			fmt.Fprintln(os.Stderr, "load:", err)
			return 1
		}
		fmt.Println("DONE", started)
		return 0
	case "hold":
		// "n", or "n/limit": n tasks of a group limited to limit (n).
		ns, ls, _ := strings.Cut(arg, "/")
		n, _ := strconv.Atoi(ns)
		limit := n
		if ls != "" {
			limit, _ = strconv.Atoi(ls)
		}
		return hold(h, n, limit)
	case "demand":
		return demand(h, addr, prefix, arg)
	case "fenced":
		n, _ := strconv.Atoi(arg)
		return fenced(h, addr, prefix, n)
	}
	fmt.Fprintln(os.Stderr, "unknown child mode", mode)
	return 2
}

// Load shared by the processes of TestSeparateProcessesShareTheLimit.
const (
	procGroups   = 3
	procPerGroup = 2
)

// runLoad runs random load (cancellations and panics included) through an
// executor limited by h for d. Each task counts itself in Redis, outside
// the limiter's keys, and counts a violation if the group's count passes
// its limit: the in-flight across processes, sampled from inside tasks.
func runLoad(c *redis.Client, h *redislimit.Holder, prefix string, d time.Duration, seed uint64) (uint64, error) {
	// The probe has a client of its own with generous timeouts: a probe
	// call that timed out on a loaded machine would leave the count off
	// and report violations that did not happen. A failed probe call
	// fails the run instead.
	pc := redis.NewClient(&redis.Options{Addr: c.Options().Addr, DialTimeout: 10 * time.Second,
		ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second, MaxRetries: -1, Protocol: 2})
	defer pc.Close()
	p, _ := policy.New(policy.WithDefaultMaxConcurrency(procPerGroup), policy.WithQueueTimeout(2*time.Second))
	ex, err := executor.New(p, executor.WithGroupLimiter(h.Groups(procPerGroup)))
	if err != nil {
		return 0, err
	}
	defer ex.Close()
	r := rand.New(rand.NewPCG(seed, uint64(os.Getpid())))
	var hs []*executor.Handle[int]
	var errMu sync.Mutex
	var taskErr error
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		gi := r.IntN(procGroups)
		probe := fmt.Sprintf("%s:probe:%d", prefix, gi)
		ctx, cancel := context.WithCancel(context.Background())
		panics := r.IntN(20) == 0
		hd, _ := executor.Submit(ex, ctx, executor.Task[int]{Group: fmt.Sprint("g", gi), Fn: func(ctx context.Context) (int, error) {
			fail := func(err error) {
				errMu.Lock()
				taskErr = fmt.Errorf("probe: %w", err)
				errMu.Unlock()
			}
			n, err := pc.Incr(context.Background(), probe).Result()
			if err != nil {
				fail(err)
				return 0, err
			}
			defer func() {
				if err := pc.Decr(context.Background(), probe).Err(); err != nil {
					fail(err)
				}
			}()
			if n > procPerGroup {
				if err := pc.Incr(context.Background(), prefix+":violations").Err(); err != nil {
					fail(err)
				}
			}
			if panics {
				panic("boom")
			}
			time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond)
			return 0, nil
		}})
		hs = append(hs, hd)
		if r.IntN(8) == 0 {
			cancel()
		} else {
			defer cancel()
		}
		time.Sleep(time.Duration(r.IntN(500)) * time.Microsecond)
	}
	for _, hd := range hs {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, err := hd.Wait(ctx)
		cancel()
		if err != nil {
			return 0, errors.New("a handle did not complete")
		}
	}
	errMu.Lock()
	defer errMu.Unlock()
	return ex.Stats().Started, taskErr
}

// hold starts n tasks of group "held" (limited to limit across the
// holders) that run until their context ends, prints each one's fencing
// token, then READY, then LOST lines as their contexts end, and exits when
// all have.
func hold(h *redislimit.Holder, n, limit int) int {
	p, _ := policy.New(policy.WithDefaultMaxConcurrency(n))
	ex, err := executor.New(p, executor.WithGroupLimiter(h.Groups(limit)))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer ex.Close()
	var mu sync.Mutex // one line at a time
	var startedN atomic.Int32
	var hs []*executor.Handle[int]
	for range n {
		hd, _ := executor.Submit(ex, context.Background(), executor.Task[int]{Group: "held", Fn: func(ctx context.Context) (int, error) {
			tok, _ := redislimit.FencingToken(ctx)
			mu.Lock()
			fmt.Println("TOKEN", tok)
			if startedN.Add(1) == int32(n) {
				fmt.Println("READY")
			}
			mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(time.Minute): // a hang guard
			}
			mu.Lock()
			fmt.Println("LOST", tok, errors.Is(context.Cause(ctx), redislimit.ErrLeaseLost), context.Cause(ctx))
			mu.Unlock()
			return 0, nil
		}})
		hs = append(hs, hd)
	}
	for _, hd := range hs {
		_, _ = hd.Wait(context.Background())
	}
	return 0
}

// TestSeparateProcessesShareTheLimit runs two holder processes and this
// one under random load on the same groups: the in-flight per group across
// the three, counted in Redis from inside the tasks, never passes the limit.
func TestSeparateProcessesShareTheLimit(t *testing.T) {
	addr := startRedis(t)
	prefix := "t:" + t.Name()
	const d = 3 * time.Second
	kids := []*child{startChild(t, "load", addr, prefix, d.String()), startChild(t, "load", addr, prefix, d.String())}
	h := newHolder(t, addr)
	c := newClient(t, addr)
	started, err := runLoad(c, h, prefix, d, 99)
	if err != nil {
		t.Fatalf("this process's load: %v", err)
	}
	total := started
	for i, k := range kids {
		n, _ := strconv.ParseUint(k.expect(t, "DONE", time.Minute), 10, 64)
		<-k.done
		if k.err != nil {
			t.Fatalf("child %d: %v", i, k.err)
		}
		if n == 0 {
			t.Fatalf("child %d started no task", i)
		}
		total += n
	}
	v, err := c.Get(bg, prefix+":violations").Int()
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatal(err)
	}
	if v != 0 {
		t.Fatalf("%d times a task saw more than %d of its group running across the processes", v, procPerGroup)
	}
	t.Logf("%d tasks started across 3 processes", total)
}
