package redislimit_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/cluster/redislimit"
	"github.com/redis/go-redis/v9"
)

// failResend is a client hook that fails, once armed, the next pipeline
// the holder sends with its scripts' source (EVAL: the calls re-sent after
// NOSCRIPT), as a connection dropped before the replies came would.
type failResend struct {
	armed atomic.Bool
	fired chan struct{}
}

func (f *failResend) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f *failResend) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (f *failResend) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 && cmds[0].Name() == "eval" && f.armed.CompareAndSwap(true, false) {
			err := errors.New("connection reset by peer (failResend)")
			for _, c := range cmds {
				c.SetErr(err)
			}
			close(f.fired)
			return err
		}
		return next(ctx, cmds)
	}
}

// longLease makes a lease lost in Redis cost minutes: a permit that comes
// within the tests' hang guards did not wait for one to expire.
var longLease = []redislimit.Option{redislimit.WithLeaseTTL(3 * time.Minute), redislimit.WithRenewInterval(time.Minute)}

// limitAB gives key "a" a limit of 2 and every other key a limit of 1.
func limitAB(g string) int {
	if g == "a" {
		return 2
	}
	return 1
}

// TestGrantBeforeAFailedResendIsUsed: one round trip of the refiller ends
// a waiting record of key "a" (its script unknown to Redis: NOSCRIPT) and
// leases the limit-1 key "b" (granted). The end of the record is sent
// again with its script, and that second round trip fails. The grant of
// "b" is the holder's all the same: its task gets the permit at once,
// rather than waiting minutes, the lease TTL, for the unused lease of the
// lost reply to expire in Redis.
func TestGrantBeforeAFailedResendIsUsed(t *testing.T) {
	addr := startRedis(t) // its own: no script is loaded yet
	o := newHolder(t, addr, longLease...)
	lo := o.GroupsFunc(limitAB)
	po := acquire(t, lo, attach(t, lo), "a", 1, 10*time.Second)
	defer po.Release()

	hook := &failResend{fired: make(chan struct{})}
	c := holderClient(t, addr)
	c.AddHook(hook)
	h, err := redislimit.New(c, append([]redislimit.Option{redislimit.WithPrefix("t:" + t.Name()),
		redislimit.WithPollInterval(testPoll)}, longLease...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	lh := h.GroupsFunc(limitAB)
	nh := attach(t, lh)
	p1 := acquire(t, lh, nh, "a", 1, 10*time.Second) // "a" is now all leased: o 1, h 1

	// Hold the refill of a second task of "a" on its way to Redis; meanwhile
	// the first one ends here, and a task of "b" asks.
	parked, gate := make(chan struct{}, 1), make(chan struct{})
	redislimit.SetRefillHook(h, func() error {
		select {
		case parked <- struct{}{}:
		default:
		}
		<-gate
		return nil
	})
	if p, err := lh.TryAcquire("a", 1); p != nil || err != nil {
		t.Fatalf("TryAcquire(a) = %v, %v; want it to wait for a refill", p, err)
	}
	<-parked
	p1.Release()
	if p, err := lh.TryAcquire("b", 1); p != nil || err != nil {
		t.Fatalf("TryAcquire(b) = %v, %v; want it to wait for a refill", p, err)
	}
	hook.armed.Store(true)
	redislimit.SetRefillHook(h, nil)
	close(gate)
	// Redis refuses "a" (it is all leased) and records the holder as
	// waiting; the permit freed here serves the task, so the next round
	// trip ends that record (its first call of that script) along with
	// the refill of "b".
	select {
	case <-hook.fired:
	case <-time.After(30 * time.Second):
		t.Fatal("no calls were re-sent after NOSCRIPT")
	}
	pb := acquire(t, lh, nh, "b", 1, 30*time.Second)
	pb.Release()
}
