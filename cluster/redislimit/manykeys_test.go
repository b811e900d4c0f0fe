package redislimit_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/groupexec/groupexec/cluster/redislimit"
	"github.com/groupexec/groupexec/executor"
	"github.com/redis/go-redis/v9"
)

// costPerCall is a client hook that makes every pipeline take per for
// each call it carries before it goes to Redis, as a Redis takes longer
// for a longer pipeline of scripts: the time a round trip takes grows with
// the keys it serves.
type costPerCall struct{ per time.Duration }

func (costPerCall) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (costPerCall) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (c costPerCall) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		t := time.NewTimer(time.Duration(len(cmds)) * c.per)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
		return next(ctx, cmds)
	}
}

// TestRenewalOfManyKeysFitsTheOpTimeout: a holder holds leases of more keys
// (a group limiter's tenants) than one round trip renews within the op
// timeout. The renewal round still renews every lease: it goes to Redis in
// round trips of a bounded number of keys, each within the op timeout, as
// the refiller's passes do; one round trip for all would grow with the
// keys until it timed out, and every lease of the process would be lost at
// once.
func TestRenewalOfManyKeysFitsTheOpTimeout(t *testing.T) {
	addr := startRedis(t)
	c := newClient(t, addr)
	const per, opTimeout = 2 * time.Millisecond, time.Second
	keys := 2 * int(opTimeout/per) // one round trip for all of them: twice the op timeout
	h, err := redislimit.New(c, append(manualRenewals(), redislimit.WithPrefix("t:"+t.Name()),
		redislimit.WithOpTimeout(opTimeout))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	l := h.Groups(1)
	n := attach(t, l)
	ps := make([]executor.LimiterPermit, 0, keys)
	t.Cleanup(func() {
		for _, p := range ps {
			p.Release()
		}
	})
	// Redis learns the renewal script with the first key's round alone: a
	// round sent again after NOSCRIPT would cost the hook twice.
	ps = append(ps, acquire(t, l, n, "g0", 1, 10*time.Second))
	redislimit.RenewNow(h)
	for i := 1; i < keys; i++ {
		ps = append(ps, acquire(t, l, n, fmt.Sprint("g", i), 1, 10*time.Second))
	}
	before := h.Stats()
	c.AddHook(costPerCall{per})
	redislimit.RenewNow(h)
	s := h.Stats()
	if !redislimit.LastFailure(h).IsZero() || s.Renewals != before.Renewals+1 || s.Mode != redislimit.ModeUp {
		t.Fatalf("renewing %d keys: renewals %d -> %d, mode %v, a call failed at %v; want one more renewal and no failure",
			keys, before.Renewals, s.Renewals, s.Mode, redislimit.LastFailure(h))
	}
	if s.Leases != keys || s.LeasesLost != 0 {
		t.Fatalf("%d leases held, %d lost: want %d held, none lost", s.Leases, s.LeasesLost, keys)
	}
}

// TestCloseOfManyKeysGivesEveryLeaseBack: Close gives back the leases of
// more keys than one round trip carries within the op timeout. Every one
// is given back: in one round trip, none would be, and each would keep its
// permit from every other holder for the rest of its TTL.
func TestCloseOfManyKeysGivesEveryLeaseBack(t *testing.T) {
	addr := startRedis(t)
	c := newClient(t, addr)
	const per, opTimeout = 2 * time.Millisecond, time.Second
	keys := 2 * int(opTimeout/per)
	prefix := "t:" + t.Name()
	h, err := redislimit.New(c, append(manualRenewals(), redislimit.WithPrefix(prefix),
		redislimit.WithOpTimeout(opTimeout))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	l := h.Groups(1)
	n := attach(t, l)
	for i := range keys {
		acquire(t, l, n, fmt.Sprint("g", i), 1, 10*time.Second) // held by a task that Close cancels
	}
	// Redis learns the release script first, as a holder's give-backs teach
	// it: a round trip sent again after NOSCRIPT would cost the hook twice.
	if err := redislimit.LoadReleaseScript(bg, c); err != nil {
		t.Fatal(err)
	}
	c.AddHook(costPerCall{per})
	if err := h.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	check := newClient(t, addr)
	leased := 0
	iter := check.Scan(bg, 0, prefix+":*:l", 1000).Iterator()
	for iter.Next(bg) {
		n, err := check.ZCard(bg, iter.Val()).Result()
		if err != nil {
			t.Fatal(err)
		}
		leased += int(n)
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	if leased != 0 {
		t.Fatalf("%d of %d leases still in Redis after Close", leased, keys)
	}
}
