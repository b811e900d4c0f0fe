package redislimit_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/groupexec/groupexec/cluster/redislimit"
	"github.com/groupexec/groupexec/cluster/redislimit/redistest"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
	"github.com/redis/go-redis/v9"
)

var bg = context.Background()

type ctxT = context.Context

// Short leases keep the suite fast; the bounds below are hang guards or
// generous multiples of them.
const (
	testTTL   = time.Second
	testRenew = 250 * time.Millisecond
	testPoll  = 10 * time.Millisecond
)

// newClient is a client for the tests' own reads and writes of Redis. Its
// timeouts are failure bounds: a stall of the machine or of redis-server
// longer than the holders' 200ms must not fail a read that checks them.
func newClient(t testing.TB, addr string) *redis.Client {
	t.Helper()
	return dial(t, addr, 10*time.Second)
}

// holderClient is a holder's client: short timeouts, as the tests of
// stalls and outages expect of it.
func holderClient(t testing.TB, addr string) *redis.Client {
	t.Helper()
	return dial(t, addr, 200*time.Millisecond)
}

func dial(t testing.TB, addr string, timeout time.Duration) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: timeout,
		ReadTimeout: timeout, WriteTimeout: timeout, MaxRetries: -1, Protocol: 2})
	t.Cleanup(func() { c.Close() })
	return c
}

func newHolder(t testing.TB, addr string, opts ...redislimit.Option) *redislimit.Holder {
	t.Helper()
	base := []redislimit.Option{redislimit.WithPrefix("t:" + t.Name()), redislimit.WithLeaseTTL(testTTL),
		redislimit.WithRenewInterval(testRenew), redislimit.WithPollInterval(testPoll)}
	h, err := redislimit.New(holderClient(t, addr), append(base, opts...)...)
	if err != nil {
		t.Fatalf("redislimit.New: %v", err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// subscribed waits until n holders hear the notices on hs[0]'s channel
// (each holder subscribes in a goroutine of its own, from New): a notice
// published before a holder has subscribed never reaches it.
func subscribed(t testing.TB, addr string, n int64, hs ...*redislimit.Holder) {
	t.Helper()
	c := newClient(t, addr)
	ch := redislimit.Channel(hs[0])
	eventually(t, "the holders subscribed to "+ch, 10*time.Second, func() bool {
		m, err := c.PubSubNumSub(bg, ch).Result()
		return err == nil && m[ch] >= n
	})
}

// newExec builds an executor whose groups are limited by lim (and the
// global limit by glob, if not nil), closed (before the holder) when the
// test ends.
func newExec(t testing.TB, popts []policy.Option, group, glob *redislimit.Limiter) *executor.Executor {
	t.Helper()
	p, err := policy.New(popts...)
	if err != nil {
		t.Fatalf("policy.New: %v", err)
	}
	var eopts []executor.Option
	if group != nil {
		eopts = append(eopts, executor.WithGroupLimiter(group))
	}
	if glob != nil {
		eopts = append(eopts, executor.WithGlobalLimiter(glob))
	}
	ex, err := executor.New(p, eopts...)
	if err != nil {
		t.Fatalf("executor.New: %v", err)
	}
	t.Cleanup(func() { ex.Close() })
	return ex
}

// eventually polls cond until it holds or the hang guard runs out.
func eventually(t testing.TB, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", limit, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// startRedis starts a redis-server of the test's own: tests that kill,
// pause or restart processes, or count keys, do not share one.
func startRedis(t testing.TB) string { return redistest.Start(t).Addr() }

// parkRenewals holds h's renewal loop: it returns once a round is parked
// before it calls Redis, and what it returns lets that round, and the ones
// after it, go on.
func parkRenewals(h *redislimit.Holder) (resume func()) {
	return park(h, redislimit.SetRenewHook)
}

// park sets h's hook with set to one that holds the calls it is run for:
// it returns once one is parked, and what it returns lets that call, and
// the ones after it, go on.
func park(h *redislimit.Holder, set func(*redislimit.Holder, func() error)) (resume func()) {
	parked, resume := holdCalls(h, set)
	<-parked
	return resume
}

// holdCalls is park for a call that the caller makes next: parked receives once
// one is held. resume may be called more than once.
func holdCalls(h *redislimit.Holder, set func(*redislimit.Holder, func() error)) (parked <-chan struct{}, resume func()) {
	held, gate := make(chan struct{}, 1), make(chan struct{})
	set(h, func() error {
		select {
		case held <- struct{}{}:
		default:
		}
		<-gate
		return nil
	})
	var once sync.Once
	return held, func() {
		once.Do(func() {
			set(h, nil)
			close(gate)
		})
	}
}

// holdTask starts a task of group on ex that runs until the test ends, and
// returns once it runs. Registered after ex's cleanup, its release runs
// before ex is closed.
func holdTask(t testing.TB, ex *executor.Executor, group string) {
	t.Helper()
	release, started := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(release) })
	if _, err := executor.Submit(ex, bg, executor.Task[int]{Group: group, Fn: func(context.Context) (int, error) {
		close(started)
		<-release
		return 0, nil
	}}); err != nil {
		t.Fatal(err)
	}
	<-started
}
