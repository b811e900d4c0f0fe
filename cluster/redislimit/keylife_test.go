package redislimit_test

import (
	"testing"
	"time"

	"github.com/groupexec/groupexec/cluster/redislimit"
)

// TestKeysOfALimitExpireWithItsLeases: every Redis key a limit key uses
// (its leases, slots, fencing counter, version, waiting records) expires
// within twice the lease TTL of the last call that touched it. Group keys
// are often chosen by clients (a tenant header): a key that outlived its
// leases by much more would let each distinct group ever seen cost Redis
// memory that long, until, under maxmemory-policy noeviction, Redis
// refused every write and every holder sharing it went down.
func TestKeysOfALimitExpireWithItsLeases(t *testing.T) {
	addr := startRedis(t)
	a, b := newHolder(t, addr), newHolder(t, addr)
	la, lb := a.Groups(1), b.Groups(1)
	na := attach(t, la)
	p := acquire(t, la, na, "g", 1, 5*time.Second)
	got := waitingTask(t, lb, "g", 1) // b waits: its records are written too
	if q, err := lb.TryAcquire("g", 1); q != nil || err != nil {
		t.Fatalf("TryAcquire with the limit held elsewhere: %v, %v", q, err)
	}
	c := newClient(t, addr)
	eventually(t, "b recorded as waiting", 5*time.Second, func() bool {
		n, err := c.Exists(bg, "t:"+t.Name()+":{group:g}:w").Result()
		return err == nil && n == 1
	})
	p.Release()
	redislimit.RenewNow(a) // gives a's idle permit back
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("b not granted the permit a gave back")
	}
	keys, err := c.Keys(bg, "t:"+t.Name()+":*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) == 0 {
		t.Fatal("no key under the prefix")
	}
	for _, k := range keys {
		d, err := c.PTTL(bg, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if d <= 0 || d > 2*testTTL {
			t.Errorf("%s expires in %v: want within twice the lease TTL, %v", k, d, 2*testTTL)
		}
	}
}
