package redislimit_test

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Limit 3, one holder: A holds 2 for a task, and a task of 2 more waits
// (Redis refuses it: 1 is free, and A is recorded as waiting). A's task
// ends: the 2 permits at hand now serve the waiting task. The executor is
// told, and A's waiting record ends then, not at A's next renewal round
// (minutes here): while it lasts, Redis splits the key's limit with a
// holder that waits for nothing.
func TestOwnReleaseServingTheWaitingTaskEndsTheRecord(t *testing.T) {
	addr := startRedis(t)
	rdb := newClient(t, addr)
	a := newHolder(t, addr, manualRenewals()...)
	la := a.Groups(3)
	na := attach(t, la)
	pa := acquire(t, la, na, "g", 2, 5*time.Second)
	if q, err := la.TryAcquire("g", 2); q != nil || err != nil {
		t.Fatalf("TryAcquire of 2 with 1 permit left: %v, %v; want to wait", q, err)
	}
	recorded(t, rdb, a.ID()+"/1")
	drain(na)
	pa.Release()
	waitFor(t, "the executor told that the permits are at hand", na)
	eventually(t, "A's waiting record ends", 5*time.Second, func() bool {
		return errors.Is(rdb.ZScore(bg, "t:"+t.Name()+":{group:g}:w", a.ID()+"/1").Err(), redis.Nil)
	})
	acquire(t, la, na, "g", 2, time.Second).Release()
}

// recorded waits until Redis records the holder of id as waiting for key g.
func recorded(t *testing.T, rdb *redis.Client, id string) {
	t.Helper()
	w := "t:" + t.Name() + ":{group:g}:w"
	eventually(t, id+" recorded as waiting", 5*time.Second, func() bool {
		return rdb.ZScore(bg, w, id).Err() == nil
	})
}
