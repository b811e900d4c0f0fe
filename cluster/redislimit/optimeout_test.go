package redislimit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/groupexec/groupexec/cluster/redislimit"
	"github.com/groupexec/groupexec/cluster/redislimit/redistest"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
	"github.com/redis/go-redis/v9"
)

// WithOpTimeout bounds every call whatever the client's settings: with a
// client that ignores context deadlines (ContextTimeoutEnabled false, as
// by default) and reads for up to 30s, a Redis that stops answering (a
// proxy that stops forwarding) takes the holder down after three calls of
// one op timeout each, and a task waiting for a refill meets the failure
// policy (FailClosed: refused with ErrUnavailable). A client left to its
// own read timeout would take 90s to fail three calls.
func TestOpTimeoutHoldsWhateverTheClient(t *testing.T) {
	srv := redistest.Start(t)
	proxy := redistest.StartProxy(t, srv.Addr())
	const opTimeout = 200 * time.Millisecond
	slow := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: -1, Protocol: 2,
		DialTimeout: 30 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second})
	t.Cleanup(func() { slow.Close() })
	h, err := redislimit.New(slow, redislimit.WithPrefix("t:"+t.Name()), redislimit.WithLeaseTTL(3*time.Second),
		redislimit.WithRenewInterval(time.Second), redislimit.WithPollInterval(testPoll), redislimit.WithOpTimeout(opTimeout))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })

	// Another holder, not behind the proxy, holds the whole limit: this
	// one's task waits for a refill.
	other := newHolder(t, srv.Addr(), redislimit.WithPrefix("t:"+t.Name()))
	lo := other.Groups(1)
	no := attach(t, lo)
	held := acquire(t, lo, no, "g", 1, 10*time.Second)
	defer held.Release()

	ex := newExec(t, []policy.Option{policy.WithQueueTimeout(20 * time.Second)}, h.Groups(1), nil)
	hd, err := executor.Submit(ex, bg, executor.Task[int]{Group: "g", Fn: func(context.Context) (int, error) { return 0, nil }})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the waiting holder is refused by Redis", 10*time.Second, func() bool { return h.Stats().RefillsDenied > 0 })

	proxy.Stall()
	stalled := time.Now()
	defer proxy.Resume()
	r, err := hd.Wait(ctxTimeout(t, time.Minute))
	if err != nil {
		t.Fatal("the waiting task never completed")
	}
	took := time.Since(stalled)
	if r.Status != executor.Rejected || !errors.Is(r.Err, redislimit.ErrUnavailable) {
		t.Fatalf("the waiting task: %v %v, want Rejected with ErrUnavailable", r.Status, r.Err)
	}
	if s := h.Stats(); s.Mode != redislimit.ModeDown {
		t.Fatalf("stats %+v, want down", s)
	}
	t.Logf("down and the waiting task refused %v after the stall (op timeout %v)", took, opTimeout)
	// Three calls of one op timeout each, one poll apart; the bound is
	// generous for a loaded machine and far below one 30s read.
	if bound := 10 * time.Second; took > bound {
		t.Fatalf("the holder took %v to go down behind a stalled Redis with op timeout %v, want within %v", took, opTimeout, bound)
	}
}
