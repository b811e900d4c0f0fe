package redislimit_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/groupexec/groupexec/cluster/redislimit"
	"github.com/redis/go-redis/v9"
)

// A contention notice tells each holder of the key how many other holders
// wait, and how many of those wait for room below an even split, as the
// replies to the holder's own calls do: never the listener itself.

// heardAll hands h every notice published on its channel up to now (from
// notices, a subscription of the test's), and returns once it has heard
// them, whether its own subscriber heard them first or not: a notice heard
// twice is older news the second time. A marker published after them, of
// a kind no holder reads, tells when the last has come.
func heardAll(t *testing.T, rdb *redis.Client, h *redislimit.Holder, notices <-chan string) {
	t.Helper()
	marker := "marker|" + t.Name()
	if err := rdb.Publish(bg, redislimit.Channel(h), marker).Err(); err != nil {
		t.Fatal(err)
	}
	for {
		n := waitFor(t, "the marker published after the notices", notices)
		if n == marker {
			return
		}
		redislimit.Hear(h, n)
	}
}

// Limit 3: A holds 2 and waits for 2 more; B is granted the permit left,
// and A still waits, alone: B's grant is published, with the caps, since
// someone (A) still waits. A must not take it for news that another holder
// waits: nobody else does, and A is capped by no one (as the reply to its
// next call would say). Counting B as waiting, A would give back permits
// above a cap of a contention that does not exist until that reply.
func TestAGrantWhileTheListenerWaitsAloneCountsNoOthers(t *testing.T) {
	addr := startRedis(t)
	rdb := newClient(t, addr)
	a, b := newHolder(t, addr, manualRenewals()...), newHolder(t, addr, manualRenewals()...)
	la, lb := a.Groups(3), b.Groups(3)
	na, nb := attach(t, la), attach(t, lb)
	pa := acquire(t, la, na, "g", 2, 5*time.Second)
	defer pa.Release()
	if q, err := la.TryAcquire("g", 2); q != nil || err != nil {
		t.Fatalf("A's TryAcquire of 2 with 1 permit left: %v, %v; want to wait", q, err)
	}
	recorded(t, rdb, a.ID()+"/1")
	notices := noticesOf(t, addr, a)
	pb := acquire(t, lb, nb, "g", 1, 5*time.Second)
	defer pb.Release()
	if o, c, _ := redislimit.Share(lb, "g"); o != 1 || c != 1 {
		t.Fatalf("B's share after its grant: %d others waiting, cap %d; want 1, cap 1 (A waits)", o, c)
	}
	heardAll(t, rdb, a, notices)
	if o, c, d := redislimit.Share(la, "g"); o != 0 || c != 3 || d != 0 {
		t.Fatalf("A's share after B's grant: %d others waiting, cap %d, %d deprived; want 0, cap 3, 0 (A alone waits)", o, c, d)
	}
	if err := rdb.ZScore(bg, "t:"+t.Name()+":{group:g}:w", b.ID()+"/1").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("B's waiting record: %v; want none", err)
	}
}

// Limit 2, all of it at C: A waits for a permit, then B does. Both wait
// for room below an even split (deprived). B's refusal tells A that one
// other holder waits, and that one (B) is deprived: not two, A itself
// being no other holder, as the reply to B tells B of A.
func TestANoticeDoesNotCountTheListenerAsDeprived(t *testing.T) {
	addr := startRedis(t)
	rdb := newClient(t, addr)
	a, b, c := newHolder(t, addr, manualRenewals()...), newHolder(t, addr, manualRenewals()...), newHolder(t, addr, manualRenewals()...)
	la, lb, lc := a.Groups(2), b.Groups(2), c.Groups(2)
	attach(t, la)
	attach(t, lb)
	nc := attach(t, lc)
	pc := acquire(t, lc, nc, "g", 2, 5*time.Second)
	defer pc.Release()
	if q, err := la.TryAcquire("g", 1); q != nil || err != nil {
		t.Fatalf("A's TryAcquire with the limit at C: %v, %v; want to wait", q, err)
	}
	recorded(t, rdb, a.ID()+"/1")
	notices := noticesOf(t, addr, a)
	if q, err := lb.TryAcquire("g", 1); q != nil || err != nil {
		t.Fatalf("B's TryAcquire with the limit at C: %v, %v; want to wait", q, err)
	}
	recorded(t, rdb, b.ID()+"/1")
	eventually(t, "B's refusal used", 5*time.Second, func() bool {
		o, _, _ := redislimit.Share(lb, "g")
		return o == 1
	})
	if o, cb, d := redislimit.Share(lb, "g"); o != 1 || cb != 1 || d != 1 {
		t.Fatalf("B's share after its refusal: %d others waiting, cap %d, %d deprived; want 1, cap 1, 1 (A)", o, cb, d)
	}
	heardAll(t, rdb, a, notices)
	if o, ca, d := redislimit.Share(la, "g"); o != 1 || ca != 1 || d != 1 {
		t.Fatalf("A's share after B's refusal: %d others waiting, cap %d, %d deprived; want 1, cap 1, 1 (B)", o, ca, d)
	}
}

// A notice of the format of an older build ("w|holder|leases_key|version|
// deprived|holder=cap,..."), which did not say who waits, is ignored as a
// missed one: read as this build's, it would count the listener itself.
func TestANoticeOfAnOlderBuildIsIgnored(t *testing.T) {
	addr := startRedis(t)
	a := newHolder(t, addr, manualRenewals()...)
	la := a.Groups(2)
	na := attach(t, la)
	acquire(t, la, na, "g", 1, 5*time.Second).Release()
	old := fmt.Sprintf("w|x|t:%s:{group:g}:l|%d|1|x=1,%s/1=1", t.Name(), int64(1)<<62, a.ID())
	redislimit.Hear(a, old)
	if o, c, d := redislimit.Share(la, "g"); o != 0 || c != 2 || d != 0 {
		t.Fatalf("A's share after an older build's notice: %d others waiting, cap %d, %d deprived; want 0, cap 2, 0 (unchanged)", o, c, d)
	}
}
