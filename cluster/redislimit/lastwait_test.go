package redislimit_test

import (
	"testing"
	"time"

	"github.com/groupexec/groupexec/cluster/redislimit"
)

// A waits for a task of weight 2 while B is granted the permit left: B's
// grant, which leaves A waiting, tells A a cap below the limit. Then A's
// own permits serve its waiting task, and A ends its waiting record, the
// last one: nobody waits any more, and Redis publishes it without caps.
// Nothing else tells A so (no reply of Redis to A carries a share since
// B's notice): A must take that notice, its own, or it holds to a cap of
// a contention that is over until its next renewal round (minutes here).
func TestEndingTheLastWaitLiftsTheOwnCap(t *testing.T) {
	addr := startRedis(t)
	rdb := newClient(t, addr)
	a, b := newHolder(t, addr, manualRenewals()...), newHolder(t, addr, manualRenewals()...)
	subscribed(t, addr, 2, a)
	la, lb := a.Groups(3), b.Groups(3)
	na, nb := attach(t, la), attach(t, lb)
	pa := acquire(t, la, na, "g", 2, 5*time.Second)
	if q, err := la.TryAcquire("g", 2); q != nil || err != nil {
		t.Fatalf("A's TryAcquire of 2 with 1 permit left: %v, %v; want to wait", q, err)
	}
	w := "t:" + t.Name() + ":{group:g}:w"
	eventually(t, "A recorded as waiting", 5*time.Second, func() bool {
		return rdb.ZScore(bg, w, a.ID()+"/1").Err() == nil
	})
	pb := acquire(t, lb, nb, "g", 1, 5*time.Second)
	defer pb.Release()
	if o, c, _ := redislimit.Share(lb, "g"); o != 1 || c != 1 {
		t.Fatalf("B's share after its grant: %d others waiting, cap %d; want 1, cap 1 (A waits)", o, c)
	}
	// A's lease of 2 now serves its waiting task: the wait ends.
	pa.Release()
	eventually(t, "A's waiting record ends", 5*time.Second, func() bool {
		n, err := rdb.ZCard(bg, w).Result()
		return err == nil && n == 0
	})
	for _, s := range []struct {
		name string
		l    *redislimit.Limiter
	}{{"B", lb}, {"A", la}} {
		eventually(t, s.name+" hears that nobody waits", 5*time.Second, func() bool {
			o, c, d := redislimit.Share(s.l, "g")
			return o == 0 && c == 3 && d == 0
		})
	}
}
