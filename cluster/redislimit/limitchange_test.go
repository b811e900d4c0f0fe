package redislimit_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/cluster/redislimit"
	"github.com/groupexec/groupexec/executor"
)

// leasedInRedis returns how many permits of group key g Redis counts as
// leased under the test's prefix.
func leasedInRedis(t *testing.T, addr, g string) int {
	t.Helper()
	vs, err := newClient(t, addr).HVals(bg, "t:"+t.Name()+":{group:"+g+"}:n").Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, v := range vs {
		for _, c := range v {
			n = n*10 + int(c-'0')
		}
	}
	return n
}

// TestLoweredGroupLimitReachesABusyKey: GroupsFunc lowers a group's limit
// from 2 to 1 while a task of the group runs here, the group never idle.
// The next renewal round applies it: the permit a finished task freed
// meanwhile serves no other task (one runs, the new limit) and goes back
// to Redis, and a task of weight 2 is refused as too heavy. The holder
// read the limit only when it first saw the group, and again once the
// group was idle here: a busy group ran under its old limit for as long
// as it stayed busy, and the holders that read the new one were refused.
func TestLoweredGroupLimitReachesABusyKey(t *testing.T) {
	addr := startRedis(t)
	h := newHolder(t, addr, longLease...) // only RenewNow's rounds
	var limit atomic.Int64
	limit.Store(2)
	l := h.GroupsFunc(func(string) int { return int(limit.Load()) })
	n := attach(t, l)
	p1 := acquire(t, l, n, "g", 1, 10*time.Second)
	defer p1.Release()
	p2 := acquire(t, l, n, "g", 1, 10*time.Second)

	limit.Store(1)
	p2.Release()
	redislimit.RenewNow(h)
	if p, err := l.TryAcquire("g", 1); p != nil || err != nil {
		if p != nil {
			p.Release()
		}
		t.Fatalf("TryAcquire(g, 1) with a task running and the limit lowered to 1 = %v, %v; want it to wait", p, err)
	}
	if _, err := l.TryAcquire("g", 2); !errors.Is(err, executor.ErrTooHeavy) {
		t.Fatalf("TryAcquire(g, 2) under the limit lowered to 1: %v; want ErrTooHeavy", err)
	}
	eventually(t, "the permit above the lowered limit given back to Redis", 10*time.Second, func() bool {
		return leasedInRedis(t, addr, "g") == 1
	})
}

// TestRaisedGroupLimitReachesABusyKey: a task waits while the whole limit
// of its group (1) is leased here and in use; GroupsFunc raises the limit
// to 2. The next renewal round applies it and tells the executor to ask
// again: the task is granted a permit of the raised limit, while the first
// task still runs.
func TestRaisedGroupLimitReachesABusyKey(t *testing.T) {
	addr := startRedis(t)
	h := newHolder(t, addr, longLease...)
	var limit atomic.Int64
	limit.Store(1)
	l := h.GroupsFunc(func(string) int { return int(limit.Load()) })
	n := attach(t, l)
	p1 := acquire(t, l, n, "g", 1, 10*time.Second)
	defer p1.Release()
	if p, err := l.TryAcquire("g", 1); p != nil || err != nil {
		t.Fatalf("TryAcquire(g, 1) with the whole limit in use = %v, %v; want it to wait", p, err)
	}

	limit.Store(2)
	redislimit.RenewNow(h)
	p2 := acquire(t, l, n, "g", 1, 10*time.Second)
	p2.Release()
}

// TestLoweredGroupLimitHoldsAcrossHolders: two holders each run a task of
// a group of limit 2; the limit is lowered to 1 for both. Neither holds
// more than the new limit, but together they do: once one's task ends,
// its next task waits for the other's to end (Redis refuses it), rather
// than start at once on the permit its lease still holds (2 running
// across the holders, limit 1).
func TestLoweredGroupLimitHoldsAcrossHolders(t *testing.T) {
	addr := startRedis(t)
	var limit atomic.Int64
	limit.Store(2)
	f := func(string) int { return int(limit.Load()) }
	a, b := newHolder(t, addr, longLease...), newHolder(t, addr, longLease...)
	la, lb := a.GroupsFunc(f), b.GroupsFunc(f)
	na, nb := attach(t, la), attach(t, lb)
	subscribed(t, addr, 2, a, b)
	pa := acquire(t, la, na, "g", 1, 10*time.Second)
	pb := acquire(t, lb, nb, "g", 1, 10*time.Second)

	limit.Store(1)
	redislimit.RenewNow(a)
	redislimit.RenewNow(b)
	pa.Release()
	if p, err := la.TryAcquire("g", 1); p != nil || err != nil {
		if p != nil {
			p.Release()
		}
		t.Fatalf("a's TryAcquire while b's task runs under the limit lowered to 1 = %v, %v; want it to wait", p, err)
	}
	eventually(t, "a's refill refused", 10*time.Second, func() bool { return a.Stats().RefillsDenied > 0 })
	if p, err := la.TryAcquire("g", 1); p != nil || err != nil {
		t.Fatalf("a's TryAcquire after its refusal = %v, %v; want it to wait", p, err)
	}
	pb.Release()
	acquire(t, la, na, "g", 1, 10*time.Second).Release()
}

// TestLoweredLimitKeepsAGrantOnItsWay: a task of weight 2 asks for a block
// of a group of limit 3, and Redis grants it; before the reply is used,
// GroupsFunc lowers the limit to 1 and a renewal round applies it (the
// task is now too heavy: its demand is dropped, and the key holds no
// lease here). The grant is the key's all the same: the round must not
// forget the key's state while its request is on its way, or the lease
// lands in a state no renewal round, no give-back and no task sees, and
// keeps its 2 permits from every holder (above the new limit) until its
// local validity ends, 80% of the TTL later. A task of weight 1 asks: it
// is granted once the lease of 2 is given back (the limit was lowered).
func TestLoweredLimitKeepsAGrantOnItsWay(t *testing.T) {
	addr := startRedis(t)
	h := newHolder(t, addr, longLease...) // only RenewNow's rounds; a lease valid for minutes
	var limit atomic.Int64
	limit.Store(3)
	l := h.GroupsFunc(func(string) int { return int(limit.Load()) })
	n := attach(t, l)
	parked, resume := holdCalls(h, redislimit.SetReplyHook)
	defer resume()
	if p, err := l.TryAcquire("g", 2); p != nil || err != nil {
		t.Fatalf("TryAcquire(g, 2) with nothing leased = %v, %v; want it to wait", p, err)
	}
	<-parked // Redis granted the block; its reply waits to be used
	if got := leasedInRedis(t, addr, "g"); got != 2 {
		t.Fatalf("setup: Redis leases %d permits of g; want the block of 2", got)
	}

	limit.Store(1)
	redislimit.RenewNow(h)
	resume()
	eventually(t, "the refill's reply used", 10*time.Second, func() bool { return h.Stats().Refills == 1 })
	p := acquire(t, l, n, "g", 1, 10*time.Second)
	defer p.Release()
	if got := leasedInRedis(t, addr, "g"); got != 1 {
		t.Fatalf("Redis leases %d permits of g under the limit lowered to 1; want 1", got)
	}
}

// TestLoweredLimitEndsTheRecordOfARefusalOnItsWay: a task of weight 2 asks
// for a block of a group of limit 2 while another holder runs a task of
// the group, and Redis refuses it, recording the holder as waiting; before
// the reply is used, GroupsFunc lowers the limit to 1 and a renewal round
// applies it: the task is too heavy now, and its demand is dropped. The
// refusal's record is of a request no task waits for: the holder ends it
// once the reply comes, rather than leave the other holders' shares split
// with it until it expires (two renew intervals: minutes here).
func TestLoweredLimitEndsTheRecordOfARefusalOnItsWay(t *testing.T) {
	loweredDuringARefusal(t, false)
}

// TestLoweredLimitEndsTheRecordOfARefusalWhoseReplyIsLost is
// TestLoweredLimitEndsTheRecordOfARefusalOnItsWay with the refusal's reply
// lost: the holder cannot tell a refusal from a grant, and ends the record
// the call may have made as it gives its lease back.
func TestLoweredLimitEndsTheRecordOfARefusalWhoseReplyIsLost(t *testing.T) {
	loweredDuringARefusal(t, true)
}

func loweredDuringARefusal(t *testing.T, lost bool) {
	addr := startRedis(t)
	var limit atomic.Int64
	limit.Store(2)
	f := func(string) int { return int(limit.Load()) }
	a, b := newHolder(t, addr, longLease...), newHolder(t, addr, longLease...)
	la, lb := a.GroupsFunc(f), b.GroupsFunc(f)
	attach(t, la)
	pb := acquire(t, lb, attach(t, lb), "g", 1, 10*time.Second)
	defer pb.Release()

	parked, gate := make(chan struct{}), make(chan struct{})
	var once sync.Once
	resume := func() { once.Do(func() { close(gate) }) }
	defer resume()
	redislimit.SetReplyHook(a, func() error {
		close(parked)
		<-gate
		if lost {
			return errors.New("the reply was lost")
		}
		return nil
	})
	if p, err := la.TryAcquire("g", 2); p != nil || err != nil {
		t.Fatalf("a's TryAcquire(g, 2) with one of 2 permits leased to b = %v, %v; want it to wait", p, err)
	}
	<-parked // Redis refused the block and recorded a as waiting; the reply waits to be used
	redislimit.SetReplyHook(a, nil)
	c := newClient(t, addr)
	w := "t:" + t.Name() + ":{group:g}:w"
	if n, err := c.ZCard(bg, w).Result(); err != nil || n != 1 {
		t.Fatalf("setup: %d waiting records of g (%v); want a's", n, err)
	}

	limit.Store(1)
	redislimit.RenewNow(a)
	resume()
	eventually(t, "a's waiting record ended", 10*time.Second, func() bool {
		n, err := c.ZCard(bg, w).Result()
		return err == nil && n == 0
	})
}
