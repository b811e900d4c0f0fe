package redislimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/groupexec/groupexec/cluster/redislimit"
	"github.com/groupexec/groupexec/cluster/redislimit/redistest"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
	"github.com/redis/go-redis/v9"
)

// A task of weight 4 waits for a group limit of 4 while a task of weight 1
// runs here, so Redis refuses it; then it is cancelled. A task of weight 1
// that comes next fits the 3 free permits at once: the cancelled task's
// weight must not be what the holder keeps asking Redis for. The lease TTL
// is long, so that nothing but the new task's own request can serve it
// within the hang guard.
func TestCancelledHeavyTaskDoesNotHoldUpALightOne(t *testing.T) {
	h, ex, heavy, cancel := refusedHeavyTask(t)
	cancel()
	if r, _ := heavy.Wait(ctxTimeout(t, 10*time.Second)); r.Status != executor.Cancelled {
		t.Fatalf("weight-4 task: %v %v, want Cancelled", r.Status, r.Err)
	}

	light, err := executor.Submit(ex, bg, executor.Task[int]{Group: "g",
		Fn: func(context.Context) (int, error) { return 1, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := light.Wait(ctxTimeout(t, 5*time.Second)); err != nil || r.Status != executor.Success {
		t.Fatalf("weight-1 task with 3 of 4 permits free: %v %v %v (stats %+v)", r.Status, r.Err, err, h.Stats())
	}
}

// As above, with the light task queued behind the heavy one before the
// heavy one is cancelled: the group waited for the limiter on the heavy
// task's behalf, and its new head must ask for itself.
func TestLightTaskBehindACancelledHeavyOneStarts(t *testing.T) {
	h, ex, heavy, cancel := refusedHeavyTask(t)
	light, err := executor.Submit(ex, bg, executor.Task[int]{Group: "g",
		Fn: func(context.Context) (int, error) { return 1, nil }})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if r, _ := heavy.Wait(ctxTimeout(t, 10*time.Second)); r.Status != executor.Cancelled {
		t.Fatalf("weight-4 task: %v %v, want Cancelled", r.Status, r.Err)
	}
	if r, err := light.Wait(ctxTimeout(t, 5*time.Second)); err != nil || r.Status != executor.Success {
		t.Fatalf("weight-1 task with 3 of 4 permits free: %v %v %v (stats %+v)", r.Status, r.Err, err, h.Stats())
	}
}

// One holder alone holds one of a group limit of 2, free: a task of weight
// 2 is refused a block (Redis has one slot free), and the holder's own
// free permit is what is missing. It must give it back and lease the two,
// not wait for a renewal round to return it (the renew interval is long
// here: the hang guard is far shorter).
func TestOwnFreePermitMakesRoomForAHeavyTask(t *testing.T) {
	addr := redistest.Shared(t)
	h := newHolder(t, addr, redislimit.WithLeaseTTL(60*time.Second), redislimit.WithRenewInterval(20*time.Second))
	l := h.Groups(2)
	n := make(notifier, 1)
	if err := l.Attach(n.notify); err != nil {
		t.Fatal(err)
	}
	p1 := acquire(t, l, n, "g", 1, 5*time.Second)
	p1.Release()
	p := acquire(t, l, n, "g", 2, 5*time.Second)
	p.Release()
}

// refusedHeavyTask returns a holder with a long lease TTL, an executor
// whose group limit of 4 it enforces with one task of group "g" running
// until the test ends, and a task of weight 4 for "g" that Redis has
// refused, with the cancel of its context.
func refusedHeavyTask(t *testing.T) (*redislimit.Holder, *executor.Executor, *executor.Handle[int], context.CancelFunc) {
	t.Helper()
	addr := redistest.Shared(t)
	h := newHolder(t, addr, redislimit.WithLeaseTTL(60*time.Second), redislimit.WithRenewInterval(20*time.Second))
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(8)}, h.Groups(4), nil)
	holdTask(t, ex, "g")
	hctx, cancel := context.WithCancel(bg)
	t.Cleanup(cancel)
	heavy, err := executor.Submit(ex, hctx, executor.Task[int]{Group: "g", Weight: 4,
		Fn: func(context.Context) (int, error) { return 0, nil }})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the weight-4 refill refused", 10*time.Second, func() bool { return h.Stats().RefillsDenied > 0 })
	return h, ex, heavy, cancel
}

// A holder refused for its share gives back no free permit when that
// would not bring it within its share. Limit 4: A holds one lease of 2, one
// permit in use; B waits for 3, so A's cap is 1 (B is given what it waits
// for). A task of A's of weight 2 is refused (A then waits too, its cap 2:
// 2 held + 2 > 2), and giving back A's free permit would leave 1 in use +
// 2 > 2: the give-back and the request after it would be round trips for
// nothing, and the free permit lost to A's next task. A's poll interval is
// long: a free permit is idle a poll interval after its last use, and from
// then, while B waits and no task of A's does, A gives it back whatever
// the refusal does (idleLocked); with the tests' 10ms, a test held up that
// long between A hearing of B and asking for 2 saw that give-back.
func TestRefusalForTheShareKeepsFreePermits(t *testing.T) {
	addr := startRedis(t)
	a := newHolder(t, addr, append(manualRenewals(), redislimit.WithPollInterval(3*time.Minute))...)
	b := newHolder(t, addr, manualRenewals()...)
	subscribed(t, addr, 2, a) // A hears that B waits only by its notice
	la, lb := a.Groups(4), b.Groups(4)
	na, _ := make(notifier, 16), attach(t, lb)
	if err := la.Attach(na.notify); err != nil {
		t.Fatal(err)
	}
	acquire(t, la, na, "g", 2, 5*time.Second).Release() // one lease of 2
	p := acquire(t, la, na, "g", 1, 5*time.Second)
	defer p.Release()
	if q, err := lb.TryAcquire("g", 3); q != nil || err != nil {
		t.Fatalf("B's TryAcquire of 3 with 2 free: %v, %v; want to wait", q, err)
	}
	eventually(t, "A hears that B waits", 5*time.Second, func() bool {
		others, c, _ := redislimit.Share(la, "g")
		return others == 1 && c == 1
	})
	if q, err := la.TryAcquire("g", 2); q != nil || err != nil {
		t.Fatalf("A's TryAcquire of 2 with 1 free: %v, %v; want to wait", q, err)
	}
	eventually(t, "A refused", 5*time.Second, func() bool { return a.Stats().RefillsDenied >= 1 })
	// The refiller serves keys in passes, in order: once a refill for
	// another key that is asked for now has been served, what the refusal
	// led to has been done.
	acquire(t, la, na, "other", 1, 5*time.Second).Release()
	if s := a.Stats(); s.Returned != 0 || s.RefillsDenied != 1 {
		t.Fatalf("A's stats %+v: want its free permit kept, and no second request", s)
	}
}

// A holder has the whole limit of 4 free in leases too small for a task of
// weight 3, and another holder waits (its record put in Redis directly, so
// that no notice makes this one give its idle permits back first): the
// refill is refused for the share (cap 2). No task of the key runs here,
// so no release will make the executor ask again: the holder must keep
// waiting for the task, and serve it once the other no longer waits, not
// drop its demand without a notify. The renewal rounds are the test's own:
// a round while the permits sit free gives them back, and a machine held
// up for a round before the refill would make the refusal one with nothing
// here. The other's record lives until the test ends it.
func TestRefusalWithTheLimitHereAllFreeKeepsTheWaiter(t *testing.T) {
	addr := startRedis(t)
	h := newHolder(t, addr, manualRenewals()...)
	l := h.Groups(4)
	n := make(notifier, 16)
	if err := l.Attach(n.notify); err != nil {
		t.Fatal(err)
	}
	leaseInFragments(t, h, l, n)
	c := newClient(t, addr)
	tm, err := c.Time(bg).Result()
	if err != nil {
		t.Fatal(err)
	}
	base := "t:" + t.Name() + ":{group:g}:"
	if err := c.ZAdd(bg, base+"w", redis.Z{Score: float64(tm.Add(time.Hour).UnixMilli()), Member: "other/1"}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.HSet(bg, base+"q", "other/1", 1).Err(); err != nil {
		t.Fatal(err)
	}
	for len(n) > 0 {
		<-n
	}
	if p, err := l.TryAcquire("g", 3); p != nil || err != nil {
		t.Fatalf("TryAcquire of 3 in fragments: %v, %v; want to wait", p, err)
	}
	eventually(t, "the refill refused", 5*time.Second, func() bool { return h.Stats().RefillsDenied >= 1 })
	if s := h.Stats(); s.PermitsLeased != 4 || s.PermitsInUse != 0 {
		t.Fatalf("refused with %+v; want the whole limit here, free", s)
	}
	if others, cp, _ := redislimit.Share(l, "g"); others != 1 || cp != 2 {
		t.Fatalf("refused with %d others waiting and cap %d; want refused for the share: 1 other, cap 2", others, cp)
	}
	// The other no longer waits: its record expires, as Redis's clock
	// judges it. The renewal loop runs a round within a renew interval.
	if tm, err = c.Time(bg).Result(); err != nil {
		t.Fatal(err)
	}
	if err := c.ZAdd(bg, base+"w", redis.Z{Score: float64(tm.UnixMilli() - 1), Member: "other/1"}).Err(); err != nil {
		t.Fatal(err)
	}
	redislimit.RenewNow(h)
	select {
	case <-n:
	case <-time.After(5 * time.Second):
		t.Fatalf("the waiting task was never told to ask again: %+v", h.Stats())
	}
	acquire(t, l, n, "g", 3, 5*time.Second).Release()
}
