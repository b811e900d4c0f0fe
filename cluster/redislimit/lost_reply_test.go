package redislimit_test

import (
	"context"
	"errors"
	"strings"
	"sync"
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
	parked, open := holdCalls(h, redislimit.SetRefillHook)
	defer open()
	if p, err := lh.TryAcquire("a", 1); p != nil || err != nil {
		t.Fatalf("TryAcquire(a) = %v, %v; want it to wait for a refill", p, err)
	}
	<-parked
	p1.Release()
	if p, err := lh.TryAcquire("b", 1); p != nil || err != nil {
		t.Fatalf("TryAcquire(b) = %v, %v; want it to wait for a refill", p, err)
	}
	hook.armed.Store(true)
	open()
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

// TestRenewalBeforeAFailedResendIsUsed: one renewal round renews the lease
// of a running task of key "a" and gives back the permit of key "b" that no
// task needed (its script unknown to Redis: NOSCRIPT). The give-back is
// sent again with its script, and that second round trip fails. The
// renewal of "a" is the holder's all the same: the lease stays valid here
// as long as Redis keeps it, and its task runs on, rather than being
// cancelled with a *LeaseLostError when the validity of the round before
// ends.
//
// The validity is the monotonic clock's (no clock is injected into a
// holder), so the judgement is of events, not of when the test looks: the
// second round's validity v2 is read back at once, and a cancellation of
// the task fails the test only if it came before v2, which a holder that
// used the renewal never does however late its timer or the test runs
// (its timer checks the validity it fires for). A try in which the second
// round returned only after the first validity v1 ended (the task's lease
// rightly lost meanwhile), or in which the machine stalled past v2 before
// the test saw a cancellation or its absence, judges nothing, and the
// test tries again, a bounded number of times.
func TestRenewalBeforeAFailedResendIsUsed(t *testing.T) {
	const tries = 3
	for i := range tries {
		if renewalBeforeAFailedResendIsUsed(t) {
			return
		}
		t.Logf("try %d: the machine stalled past a validity; it judged nothing", i+1)
	}
	t.Fatalf("%d tries stalled past a validity: nothing judged", tries)
}

// renewalBeforeAFailedResendIsUsed is a try of
// TestRenewalBeforeAFailedResendIsUsed, on a redis-server of its own (no
// script loaded yet). It reports whether it judged: false if the machine
// stalled past a validity at a point where that decides the outcome.
func renewalBeforeAFailedResendIsUsed(t *testing.T) (judged bool) {
	const ttl = 6 * time.Second
	addr := startRedis(t)
	hook := &failResend{fired: make(chan struct{})}
	c := holderClient(t, addr)
	c.AddHook(hook)
	h, err := redislimit.New(c, redislimit.WithPrefix("t:"+t.Name()), redislimit.WithPollInterval(testPoll),
		redislimit.WithLeaseTTL(ttl), redislimit.WithRenewInterval(ttl/3))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	l := h.Groups(1)
	n := attach(t, l)
	pa := acquire(t, l, n, "a", 1, 10*time.Second)
	defer pa.Release()
	var rec cancelRecorder
	ctx := pa.Bind(bg, rec.cancel)

	// The renewal loop's rounds wait until the try ends: the rounds below
	// are the only ones.
	resume := parkRenewals(h)
	defer resume()
	redislimit.SetRenewHook(h, nil)

	pb := acquire(t, l, n, "b", 1, 10*time.Second)
	pb.Release()
	redislimit.RenewNow(h) // loads the renewal script; sees "b" free throughout
	v1, ok := redislimit.ValidUntil(ctx)
	if !ok {
		return false // the machine stalled past the first round's validity
	}
	if s := h.Stats(); s.Leases != 2 || s.LeasesLost != 0 {
		t.Fatalf("stats after the first round: %+v, want the leases of a and b", s)
	}

	time.Sleep(time.Until(v1) / 2)
	hook.armed.Store(true)
	redislimit.RenewNow(h) // renews "a", gives "b" back: its first release
	if !time.Now().Before(v1) {
		return false // the round may have been sent after a's lease ended here
	}
	select {
	case <-hook.fired:
	default:
		t.Fatal("the round re-sent no call after NOSCRIPT")
	}
	v2, ok := redislimit.ValidUntil(ctx)
	if !ok || !v2.After(v1) {
		t.Fatalf("the lease of a is valid until %v (%v), want later than %v", v2, ok, v1)
	}
	if s := h.Stats(); s.LeasesLost != 0 || s.Leases != 1 {
		t.Fatalf("stats after the second round: %+v, want the lease of a alone", s)
	}

	// Past v1, where a lease whose renewal was not used is lost.
	time.Sleep(time.Until(v1) + 300*time.Millisecond)
	if at := rec.firstAt(); !at.IsZero() && at.Before(v2) {
		t.Fatalf("the task of a was cancelled (%v) %v before the end of its renewed validity, though Redis renewed its lease",
			rec.calls(), v2.Sub(at))
	}
	return time.Now().Before(v2)
}

// TestLostGrantIsGivenBack: Redis grants a block of a limit-1 key and the
// reply is lost. The holder gives that lease back by its id with its next
// call for the key, before it asks again: its task gets the permit at once,
// rather than after the lease TTL (minutes), and Redis holds one lease of
// the key, the task's.
func TestLostGrantIsGivenBack(t *testing.T) {
	addr := startRedis(t)
	h := newHolder(t, addr, longLease...)
	l := h.Groups(1)
	n := attach(t, l)
	var lost atomic.Bool
	redislimit.SetReplyHook(h, func() error {
		if lost.CompareAndSwap(false, true) {
			return errors.New("a lost reply (test)")
		}
		return nil
	})
	p := acquire(t, l, n, "g", 1, 30*time.Second)
	defer p.Release()
	if !lost.Load() {
		t.Fatal("no reply was lost")
	}
	c := newClient(t, addr)
	if m, err := c.ZCard(bg, "t:"+t.Name()+":{group:g}:l").Result(); err != nil || m != 1 {
		t.Fatalf("leases of the key in Redis: %d (%v), want 1, the task's", m, err)
	}
}

// TestLostGrantGiveBackSparesTheNextHolder: the give-back of a lease whose
// grant's reply was lost reaches Redis only after that lease expired and
// another holder was leased its slot (the holder was cut off meanwhile, and
// its calls were held up on their way). It frees nothing of the other
// holder's, and the acquires held up with it, which reach Redis late, lease
// nothing: the other holder's lease is the key's only one, and keeps its
// slot.
func TestLostGrantGiveBackSparesTheNextHolder(t *testing.T) {
	addr := startRedis(t)
	h := newHolder(t, addr)
	lh := h.Groups(1)
	attach(t, lh)
	// The first grant's reply is lost; the holder's next refills (with the
	// give-back) are held on their way, and its renewal rounds fail: it is
	// cut off from Redis.
	gate := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(gate) }) }
	t.Cleanup(open)
	var lost atomic.Bool
	redislimit.SetRenewHook(h, func() error { return errors.New("cut off (test)") })
	redislimit.SetReplyHook(h, func() error {
		if !lost.CompareAndSwap(false, true) {
			return nil
		}
		redislimit.SetRefillHook(h, func() error { <-gate; return nil })
		return errors.New("a lost reply (test)")
	})
	if p, err := lh.TryAcquire("g", 1); p != nil || err != nil {
		t.Fatalf("TryAcquire = %v, %v; want it to wait for a refill", p, err)
	}
	eventually(t, "the holder is down", 30*time.Second, func() bool { return h.Stats().Mode == redislimit.ModeDown })
	if !lost.Load() || redislimit.Orphans(lh, "g") == 0 {
		t.Fatalf("lost reply %v, leases to give back %d; want a lost grant", lost.Load(), redislimit.Orphans(lh, "g"))
	}

	// The lost lease expires in Redis, and another holder is leased its slot
	// (asked again at its renewal rounds, the suite's; on a long lease: its
	// loss, should the machine stall, is not the test's).
	o := newHolder(t, addr, redislimit.WithLeaseTTL(time.Minute))
	lo := o.Groups(1)
	po := acquire(t, lo, attach(t, lo), "g", 1, 30*time.Second)
	defer po.Release()

	// The held calls reach Redis; the holder is back, and gives back what it
	// may have been granted without a reply.
	redislimit.SetRefillHook(h, nil)
	redislimit.SetRenewHook(h, nil)
	open()
	eventually(t, "the holder gave its lost grants back", 30*time.Second, func() bool {
		return h.Stats().Mode == redislimit.ModeUp && redislimit.Orphans(lh, "g") == 0
	})
	c := newClient(t, addr)
	base := "t:" + t.Name() + ":{group:g}:"
	ids, err := c.ZRange(bg, base+"l", 0, -1).Result()
	if err != nil || len(ids) != 1 || !strings.HasPrefix(ids[0], o.ID()+"/") {
		t.Fatalf("leases of the key in Redis: %v (%v), want the other holder's alone", ids, err)
	}
	if slots, err := c.HGet(bg, base+"s", ids[0]).Result(); err != nil || slots != "0" {
		t.Fatalf("the other holder's lease holds slots %q (%v), want 0", slots, err)
	}
	if bit, err := c.GetBit(bg, base+"b", 0).Result(); err != nil || bit != 1 {
		t.Fatalf("slot 0 leased: %d (%v), want 1", bit, err)
	}
	if s := o.Stats(); s.LeasesLost != 0 || s.Leases != 1 {
		t.Fatalf("the other holder: %+v, want its lease", s)
	}
}
