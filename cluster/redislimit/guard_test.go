package redislimit_test

// What a paused holder's tasks can rely on (fence.go): a holder process is
// stopped (SIGSTOP) past its lease TTL while its tasks write, its slots are
// leased by another process whose tasks write, and it is resumed. Its tasks
// that check Valid before each write see it false and stop; those that
// write without looking are refused by a downstream that fences by slot
// (Fence). Nothing it writes after the resume is accepted.

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/groupexec/groupexec/cluster/redislimit"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
	"github.com/redis/go-redis/v9"
)

// fencedWrite is the downstream: it accepts a write only if its token is at
// least the greatest accepted for each of its slots, and records it for
// them. KEYS: fences accepted refused. ARGV: token slot...
var fencedWrite = redis.NewScript(`
local tok = tonumber(ARGV[1])
for i = 2, #ARGV do
  if tonumber(redis.call('HGET', KEYS[1], ARGV[i]) or '0') > tok then
    redis.call('INCR', KEYS[3])
    return 0
  end
end
for i = 2, #ARGV do redis.call('HSET', KEYS[1], ARGV[i], ARGV[1]) end
redis.call('INCR', KEYS[2])
return 1
`)

// write is one fenced write of the task running with ctx, counted for who.
func write(c *redis.Client, prefix, who string, ctx context.Context) (bool, error) {
	f, ok := redislimit.Fencing(ctx)
	if !ok {
		return false, fmt.Errorf("no fence")
	}
	args := []any{f.Token}
	for _, s := range f.Slots {
		args = append(args, s)
	}
	n, err := fencedWrite.Run(context.Background(), c, []string{prefix + ":fences", prefix + ":accepted:" + who,
		prefix + ":refused:" + who}, args...).Int()
	return n == 1, err
}

// fenced runs n tasks of group "held" (limit n) that write every 2ms: the
// even ones check Valid first and stop (printing INVALID) when it is false;
// the odd ones write without looking, and stop (printing BLIND) 20 writes
// after their context has ended. It prints READY once each has written.
func fenced(h *redislimit.Holder, addr, prefix string, n int) int {
	pc := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 10 * time.Second,
		ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second, MaxRetries: -1, Protocol: 2})
	defer pc.Close()
	p, _ := policy.New(policy.WithDefaultMaxConcurrency(n))
	ex, err := executor.New(p, executor.WithGroupLimiter(h.Groups(n)))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer ex.Close()
	var mu sync.Mutex
	var wrote sync.WaitGroup
	wrote.Add(n)
	var hs []*executor.Handle[int]
	for i := range n {
		hd, _ := executor.Submit(ex, context.Background(), executor.Task[int]{Group: "held", Fn: func(ctx context.Context) (int, error) {
			first, after := true, 0
			for {
				time.Sleep(2 * time.Millisecond)
				if i%2 == 0 && !redislimit.Valid(ctx) {
					mu.Lock()
					fmt.Println("INVALID", i)
					mu.Unlock()
					return 0, nil
				}
				if i%2 == 1 && ctx.Err() != nil {
					if after++; after > 20 {
						mu.Lock()
						fmt.Println("BLIND", i)
						mu.Unlock()
						return 0, nil
					}
				}
				if _, err := write(pc, prefix, "child", ctx); err != nil {
					fmt.Fprintln(os.Stderr, "write:", err)
					os.Exit(1)
				}
				if first {
					first = false
					wrote.Done()
				}
			}
		}})
		hs = append(hs, hd)
	}
	wrote.Wait()
	fmt.Println("READY")
	for _, hd := range hs {
		_, _ = hd.Wait(context.Background())
	}
	return 0
}

func counter(t *testing.T, c *redis.Client, key string) int {
	t.Helper()
	n, err := c.Get(bg, key).Int()
	if err != nil && err != redis.Nil {
		t.Fatal(err)
	}
	return n
}

func TestPausedHolderIsFenced(t *testing.T) {
	addr := startRedis(t)
	prefix := "t:" + t.Name()
	const n = 4
	k := startChild(t, "fenced", addr, prefix, strconv.Itoa(n))
	k.expect(t, "READY", 30*time.Second)
	if err := k.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := true
	defer func() {
		if stopped {
			_ = k.cmd.Process.Signal(syscall.SIGCONT)
		}
	}()

	// This process leases the paused one's slots once they expire, and
	// its tasks write.
	c := newClient(t, addr)
	pc := newClient(t, addr)
	h := newHolder(t, addr, redislimit.WithPrefix(prefix))
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(n)}, h.Groups(n), nil)
	stop := make(chan struct{})
	wrote := make(chan struct{}, n)
	var hs []*executor.Handle[int]
	for range n {
		hd, err := executor.Submit(ex, bg, executor.Task[int]{Group: "held", Fn: func(ctx context.Context) (int, error) {
			for first := true; ; first = false {
				ok, err := write(pc, prefix, "parent", ctx)
				if err != nil {
					return 0, err
				}
				if !ok {
					return 0, fmt.Errorf("the live holder's write was refused")
				}
				if first {
					wrote <- struct{}{}
				}
				select {
				case <-stop:
					return 0, nil
				case <-time.After(2 * time.Millisecond):
				}
			}
		}})
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, hd)
	}
	for i := range n {
		select {
		case <-wrote:
		case <-time.After(time.Minute):
			t.Fatalf("%d of %d slots came to this process", i, n)
		}
	}

	before := counter(t, c, prefix+":accepted:child")
	if err := k.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	stopped = false
	// Each resumed task reports how it ended: the checking ones saw Valid
	// false, the blind ones went on writing.
	var invalid, blind int
	guard := time.After(time.Minute)
	for invalid+blind < n {
		select {
		case l, ok := <-k.lines:
			if !ok {
				<-k.done
				t.Fatalf("the resumed holder exited (%v) with %d tasks reported", k.err, invalid+blind)
			}
			switch {
			case strings.HasPrefix(l, "INVALID"):
				invalid++
			case strings.HasPrefix(l, "BLIND"):
				blind++
			}
		case <-guard:
			t.Fatalf("the resumed holder's tasks did not all end: %d saw Valid false, %d blind ones done", invalid, blind)
		}
	}
	accepted, refused := counter(t, c, prefix+":accepted:child")-before, counter(t, c, prefix+":refused:child")
	t.Logf("after the resume: %d checking tasks saw Valid false; %d blind ones wrote: %d accepted, %d refused",
		invalid, blind, accepted, refused)
	if invalid != n/2 || blind != n/2 {
		t.Fatalf("%d checking tasks saw Valid false, %d blind ones ended; want %d each", invalid, blind, n/2)
	}
	if accepted != 0 {
		t.Fatalf("%d writes of the resumed holder were accepted after its slots were leased again", accepted)
	}
	if refused == 0 {
		t.Fatal("the blind tasks' writes were never refused: the test did not test fencing")
	}
	close(stop)
	for _, hd := range hs {
		if r, err := hd.Wait(ctxTimeout(t, time.Minute)); err != nil || r.Status != executor.Success {
			t.Fatalf("this process's task: %v %v %v", r.Status, r.Err, err)
		}
	}
}
