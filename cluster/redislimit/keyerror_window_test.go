package redislimit_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/cluster/redislimit"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// A key Redis answered with an error reply (ErrKeyFailed) has its tasks
// refused for a renew interval with no call to Redis, as the package doc
// says: a renewal round within that interval must not forget the key's
// state (it holds no lease and no task waits), or the next task would ask
// Redis again, wait for its answer and be refused only then.
func TestKeyFailedRefusalOutlivesARenewalRound(t *testing.T) {
	addr := startRedis(t)
	if err := newClient(t, addr).HSet(bg, "t:"+t.Name()+":{group:g}:v", "x", 1).Err(); err != nil {
		t.Fatal(err)
	}
	var reported atomic.Int64
	h := newHolder(t, addr, append(manualRenewals(), redislimit.WithListener(func(e redislimit.Event) {
		if e.Kind == redislimit.EventKeyFailed {
			reported.Add(int64(e.Count))
		}
	}))...)
	l := h.Groups(2)
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(4)}, l, nil)
	r, err := runOne(t, ex, "g")
	if err != nil || r.Status != executor.Rejected || !errors.Is(r.Err, redislimit.ErrKeyFailed) {
		t.Fatalf("task of a key whose data Redis cannot use: %v %v %v; want Rejected with ErrKeyFailed", r.Status, r.Err, err)
	}
	// The refusal reported, and the lease the failed call may have been
	// granted given back (with the end of its waiting record, in the
	// same round trip): nothing of the key is left to do.
	eventually(t, "the refusal reported and the key's calls done", 10*time.Second, func() bool {
		return reported.Load() >= 1 && redislimit.Orphans(l, "g") == 0
	})
	calls := h.Stats().RoundTrips
	redislimit.RenewNow(h) // minutes before the key's renew interval is over
	p, err := l.TryAcquire("g", 1)
	if p != nil || !errors.Is(err, redislimit.ErrKeyFailed) {
		t.Fatalf("TryAcquire of the failed key after a renewal round: %v, %v; want ErrKeyFailed", p, err)
	}
	if n := h.Stats().RoundTrips; n != calls {
		t.Fatalf("%d round trips since the refusal; want none", n-calls)
	}
}
