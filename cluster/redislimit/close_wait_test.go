package redislimit_test

import (
	"testing"
	"time"
)

// A holder closed while Redis records it as waiting for a key no longer
// waits: Close ends its waiting record, so that the others' caps do not stay
// split with a holder that is gone (and its record is not left in Redis).
func TestCloseEndsTheWaitingRecord(t *testing.T) {
	addr := startRedis(t)
	rdb := newClient(t, addr)
	a, b := newHolder(t, addr), newHolder(t, addr)
	la, lb := a.Groups(1), b.Groups(1)
	na, _ := attach(t, la), attach(t, lb)
	p := acquire(t, la, na, "g", 1, 5*time.Second)
	defer p.Release()
	if q, err := lb.TryAcquire("g", 1); q != nil || err != nil {
		t.Fatalf("TryAcquire with the limit held elsewhere: %v, %v", q, err)
	}
	w := "t:" + t.Name() + ":{group:g}:w"
	bid := b.ID() + "/1"
	eventually(t, "B recorded as waiting", 5*time.Second, func() bool {
		_, err := rdb.ZScore(bg, w, bid).Result()
		return err == nil
	})
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err := rdb.ZScore(bg, w, bid).Result(); err == nil {
		t.Fatalf("after B's Close, Redis still records B as waiting for g (expiry %v)", s)
	}
}
