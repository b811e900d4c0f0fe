package redislimit_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/cluster/redislimit"
)

// manualRenewals are options under which a test's own RenewNow calls are
// the only renewal rounds: the loop's first round is minutes away.
func manualRenewals() []redislimit.Option {
	return []redislimit.Option{redislimit.WithLeaseTTL(10 * time.Minute), redislimit.WithRenewInterval(3 * time.Minute)}
}

// cancelRecorder is a task's cancel function that records its calls, and
// when the first came.
type cancelRecorder struct {
	mu     sync.Mutex
	causes []error
	first  time.Time
}

func (c *cancelRecorder) cancel(err error) {
	c.mu.Lock()
	if len(c.causes) == 0 {
		c.first = time.Now()
	}
	c.causes = append(c.causes, err)
	c.mu.Unlock()
}

// firstAt returns when the first call came (zero: none yet).
func (c *cancelRecorder) firstAt() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.first
}

func (c *cancelRecorder) calls() []error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]error(nil), c.causes...)
}

// TestFlushedLeaseIsLostOnce: Redis loses its data (FLUSHALL) while a task
// runs on a lease. The next renewal round finds the lease gone: the task is
// cancelled exactly once with a *LeaseLostError, one EventLeaseLost is
// emitted, the counters show no lease, and the next lease of the key has a
// greater fencing token. Once idle, the holder's permits go back to 0.
func TestFlushedLeaseIsLostOnce(t *testing.T) {
	addr := startRedis(t)
	var mu sync.Mutex
	var lostEvs []redislimit.Event
	h := newHolder(t, addr, append(manualRenewals(), redislimit.WithListener(func(e redislimit.Event) {
		if e.Kind == redislimit.EventLeaseLost {
			mu.Lock()
			lostEvs = append(lostEvs, e)
			mu.Unlock()
		}
	}))...)
	l := h.Groups(2)
	n := make(notifier, 16)
	if err := l.Attach(n.notify); err != nil {
		t.Fatal(err)
	}
	p := acquire(t, l, n, "g", 1, 10*time.Second)
	var rec cancelRecorder
	ctx := p.Bind(bg, rec.cancel)
	tok0, ok := redislimit.FencingToken(ctx)
	if !ok || !redislimit.Valid(ctx) {
		t.Fatalf("fresh permit: token %d %v, valid %v", tok0, ok, redislimit.Valid(ctx))
	}
	if err := newClient(t, addr).FlushAll(bg).Err(); err != nil {
		t.Fatal(err)
	}
	redislimit.RenewNow(h)
	redislimit.RenewNow(h)
	causes := rec.calls()
	if len(causes) != 1 || !errors.Is(causes[0], redislimit.ErrLeaseLost) {
		t.Fatalf("cancel calls %v, want one with ErrLeaseLost", causes)
	}
	var lle *redislimit.LeaseLostError
	if !errors.As(causes[0], &lle) || lle.Token != tok0 || lle.Key != "g" {
		t.Fatalf("cause %#v, want a *LeaseLostError for g, token %d", causes[0], tok0)
	}
	if redislimit.Valid(ctx) {
		t.Fatal("Valid after the lease was lost")
	}
	s := h.Stats()
	if s.Leases != 0 || s.PermitsLeased != 0 || s.PermitsInUse != 0 || s.LeasesLost != 1 || s.TasksCancelled != 1 {
		t.Fatalf("stats after the loss: %+v", s)
	}
	mu.Lock()
	if len(lostEvs) != 1 || lostEvs[0].Tasks != 1 || lostEvs[0].Permits != 1 || lostEvs[0].Token != tok0 {
		t.Fatalf("lease-lost events %+v, want one for 1 task, 1 permit, token %d", lostEvs, tok0)
	}
	mu.Unlock()
	p.Release()
	if s := h.Stats(); s.PermitsInUse != 0 || s.PermitsLeased != 0 {
		t.Fatalf("stats after the lost permit's release: %+v", s)
	}

	p2 := acquire(t, l, n, "g", 1, 10*time.Second)
	ctx2 := p2.Bind(bg, func(error) {})
	tok2, _ := redislimit.FencingToken(ctx2)
	if tok2 <= tok0 {
		t.Fatalf("token %d after Redis lost its data, not greater than %d before", tok2, tok0)
	}
	p2.Release()
	if s := h.Stats(); s.PermitsInUse != 0 || s.PermitsLeased != 1 {
		t.Fatalf("stats with the permit free: %+v", s)
	}
	redislimit.RenewNow(h) // the round that sees it free throughout
	redislimit.RenewNow(h) // and gives it back
	if s := h.Stats(); s.PermitsInUse != 0 || s.PermitsLeased != 0 || s.Leases != 0 {
		t.Fatalf("idle holder's stats: %+v", s)
	}
}

// TestFailOpenOutageAndRecovery: renewals fail three times in a row, so the
// holder is down; a FailOpen task gets a fallback permit, no lease counted
// for it. The next round that reaches Redis ends the outage: one
// EventUnavailable and one EventRecovered, the leased permit renewed and
// still valid, the fallback's release changes no count.
func TestFailOpenOutageAndRecovery(t *testing.T) {
	addr := startRedis(t)
	var mu sync.Mutex
	evs := map[redislimit.EventKind]int{}
	h := newHolder(t, addr, append(manualRenewals(), redislimit.WithFailurePolicy(redislimit.FailOpen),
		redislimit.WithListener(func(e redislimit.Event) {
			mu.Lock()
			evs[e.Kind]++
			mu.Unlock()
		}))...)
	l := h.Groups(1)
	n := make(notifier, 16)
	if err := l.Attach(n.notify); err != nil {
		t.Fatal(err)
	}
	p := acquire(t, l, n, "g", 1, 10*time.Second)
	ctx := p.Bind(bg, func(error) { t.Error("the lease's task was cancelled") })
	redislimit.SetRenewHook(h, func() error { return errors.New("cut off") })
	for range 3 {
		redislimit.RenewNow(h)
	}
	if s := h.Stats(); s.Mode != redislimit.ModeDown || s.Outages != 1 {
		t.Fatalf("after three failed rounds: %+v", s)
	}
	fp, err := l.TryAcquire("g", 1)
	if err != nil || fp == nil {
		t.Fatalf("fail-open TryAcquire while down: %v, %v", fp, err)
	}
	fctx := fp.Bind(bg, func(error) { t.Error("the fallback task was cancelled") })
	if _, ok := redislimit.FencingToken(fctx); ok || redislimit.Valid(fctx) {
		t.Fatal("a fallback permit has a token or is valid")
	}
	if s := h.Stats(); s.PermitsInUse != 1 || s.PermitsLeased != 1 || s.Fallbacks != 1 {
		t.Fatalf("stats while down: %+v", s)
	}
	redislimit.SetRenewHook(h, nil)
	redislimit.RenewNow(h)
	if s := h.Stats(); s.Mode != redislimit.ModeUp || s.LeasesLost != 0 {
		t.Fatalf("after a round that reached Redis: %+v", s)
	}
	if !redislimit.Valid(ctx) {
		t.Fatal("the renewed lease is not valid")
	}
	fp.Release()
	p.Release()
	if s := h.Stats(); s.PermitsInUse != 0 || s.PermitsLeased != 1 || s.Leases != 1 {
		t.Fatalf("stats after both releases: %+v", s)
	}
	redislimit.RenewNow(h)
	redislimit.RenewNow(h)
	mu.Lock()
	defer mu.Unlock()
	if evs[redislimit.EventUnavailable] != 1 || evs[redislimit.EventRecovered] != 1 || evs[redislimit.EventLeaseLost] != 0 {
		t.Fatalf("events %v", evs)
	}
	if s := h.Stats(); s.PermitsLeased != 0 || s.Leases != 0 {
		t.Fatalf("idle holder's stats: %+v", s)
	}
}

// TestRenewalGiveBackWakesAWaiter: a holder's renewal round gives back a
// permit no task used during the round, lowering a lease that keeps its
// other permit, while another holder waits for the key. The waiter is told
// at once and gets the permit, without waiting for its own renewal round.
func TestRenewalGiveBackWakesAWaiter(t *testing.T) {
	addr := startRedis(t)
	// A's poll interval keeps its idle permit from going back before the
	// round, so that the round gives it back.
	a := newHolder(t, addr, append(manualRenewals(), redislimit.WithPollInterval(3*time.Minute))...)
	b := newHolder(t, addr, manualRenewals()...)
	// A hears of B's refusal only by its notice: no renewal round runs
	// until the test's own.
	subscribed(t, addr, 2, a)
	la, lb := a.Groups(2), b.Groups(2)
	na, nb := make(notifier, 16), make(notifier, 16)
	if err := la.Attach(na.notify); err != nil {
		t.Fatal(err)
	}
	if err := lb.Attach(nb.notify); err != nil {
		t.Fatal(err)
	}
	p2 := acquire(t, la, na, "g", 2, 10*time.Second) // one lease of 2
	p2.Release()
	p1 := acquire(t, la, na, "g", 1, 10*time.Second) // from it: 1 in use, 1 free
	defer p1.Release()
	if s := a.Stats(); s.Leases != 1 || s.PermitsLeased != 2 || s.PermitsInUse != 1 {
		t.Fatalf("A's stats: %+v", s)
	}
	redislimit.RenewNow(a) // the round starts with 1 free

	if p, err := lb.TryAcquire("g", 1); p != nil || err != nil {
		t.Fatalf("B's TryAcquire with the limit held by A: %v, %v", p, err)
	}
	eventually(t, "B is refused and A hears it", 10*time.Second, func() bool {
		others, _, _ := redislimit.Share(la, "g")
		return b.Stats().RefillsDenied >= 1 && others == 1
	})
	// As an executor does, B asks again only when told to.
	for len(nb) > 0 {
		<-nb
	}
	redislimit.RenewNow(a) // free throughout: given back
	if s := a.Stats(); s.Returned != 1 || s.PermitsLeased != 1 || s.PermitsInUse != 1 || s.Leases != 1 {
		t.Fatalf("A's stats after the round: %+v", s)
	}
	deadline := time.After(10 * time.Second) // a hang guard: B's own round is minutes away
	for {
		select {
		case <-nb:
		case <-deadline:
			t.Fatal("B was not told of the permit A's renewal round gave back")
		}
		p, err := lb.TryAcquire("g", 1)
		if err != nil {
			t.Fatal(err)
		}
		if p != nil {
			p.Release()
			return
		}
	}
}

// A task runs on a global and a group permit of one holder, bound as an
// executor with both limiters binds them. When both leases are lost (here
// Redis lost them: the next renewal round finds them gone) its context is
// cancelled for each, but it is one task: TasksCancelled counts the tasks,
// so two such tasks count two.
func TestTasksCancelledCountsEachTaskOnce(t *testing.T) {
	addr := startRedis(t)
	h := newHolder(t, addr, manualRenewals()...)
	glob, groups := h.Global(2), h.Groups(2)
	ng, nr := attach(t, glob), attach(t, groups)
	for _, group := range []string{"a", "b"} {
		gp := acquire(t, glob, ng, "", 1, 5*time.Second)
		defer gp.Release()
		p := acquire(t, groups, nr, group, 1, 5*time.Second)
		defer p.Release()
		cancel := func(error) {}
		p.Bind(gp.Bind(bg, cancel), cancel)
	}
	if err := newClient(t, addr).FlushAll(bg).Err(); err != nil {
		t.Fatal(err)
	}
	redislimit.RenewNow(h)
	if s := h.Stats(); s.TasksCancelled != 2 || s.Leases != 0 {
		t.Fatalf("stats after every lease of two running tasks was lost: %+v; want TasksCancelled 2, no lease", s)
	}
}

// A renewal sent while the lease was valid, whose reply is used only after
// the lease's local validity has ended (the holder was held up: here its
// lock is held, as in a process paused), must not bring the lease back:
// Valid has said it was no longer valid, and its timer is due. The lease
// is lost, its task cancelled and the lease given back, whether the reply
// or the timer runs first (here the reply: it waits for the lock first).
func TestRenewalUsedAfterTheLocalValidityDoesNotRevive(t *testing.T) {
	addr := startRedis(t)
	h := newHolder(t, addr, redislimit.WithRenewInterval(testTTL/3))
	l := h.Groups(1)
	p := acquire(t, l, attach(t, l), "g", 1, 5*time.Second)
	defer p.Release()
	causes := make(chan error, 1)
	ctx := p.Bind(bg, func(err error) {
		select {
		case causes <- err:
		default:
		}
	})
	// The first round renews as usual; the second is held before it
	// calls Redis, so that the renewal it sends is a renew interval later
	// than the one the validity counts from, and would extend it.
	var rounds atomic.Int32
	parked, gate := make(chan struct{}), make(chan struct{})
	redislimit.SetRenewHook(h, func() error {
		if rounds.Add(1) == 2 {
			parked <- struct{}{}
			<-gate
		}
		return nil
	})
	<-parked
	until, ok := redislimit.ValidUntil(ctx)
	if !ok {
		close(gate)
		t.Fatal("no validity on a live lease")
	}
	c := newClient(t, addr)
	lKey := "t:" + t.Name() + ":{group:g}:l"
	expiry := func() float64 {
		zs, err := c.ZRangeWithScores(bg, lKey, 0, -1).Result()
		if err != nil || len(zs) != 1 {
			t.Fatalf("ZRANGE %s: %v, %v; want the one lease", lKey, zs, err)
		}
		return zs[0].Score
	}
	before := expiry()
	unlock := redislimit.HoldLock(h)
	close(gate)
	eventually(t, "the held round's renewal reaches Redis", 5*time.Second, func() bool { return expiry() > before })
	time.Sleep(time.Until(until) + 10*time.Millisecond) // the local validity ends, the reply waiting for the lock
	valid := redislimit.Valid(ctx)
	unlock()
	if valid {
		t.Fatal("Valid past the lease's local validity")
	}
	select {
	case err := <-causes:
		if !errors.Is(err, redislimit.ErrLeaseLost) {
			t.Fatalf("cause %v, want ErrLeaseLost", err)
		}
	case <-time.After(5 * time.Second): // a hang guard: the timer alone would have run by now
		t.Fatalf("the task was not cancelled: the late renewal revived the lease (valid now: %v)", redislimit.Valid(ctx))
	}
	nKey := "t:" + t.Name() + ":{group:g}:n"
	eventually(t, "the lease is given back", 5*time.Second, func() bool {
		n, err := c.HLen(bg, nKey).Result()
		return err == nil && n == 0
	})
}

// A task whose group lease is lost before the executor binds it is
// cancelled by Bind; when its global lease is lost later, it is the same
// task: TasksCancelled counts it once, not zero times.
func TestTaskCancelledAtBindIsCountedOnce(t *testing.T) {
	addr := startRedis(t)
	h := newHolder(t, addr, manualRenewals()...)
	glob, groups := h.Global(2), h.Groups(2)
	gp := acquire(t, glob, attach(t, glob), "", 1, 5*time.Second)
	defer gp.Release()
	p := acquire(t, groups, attach(t, groups), "a", 1, 5*time.Second)
	defer p.Release()
	if err := newClient(t, addr).Del(bg, "t:"+t.Name()+":{group:a}:l").Err(); err != nil {
		t.Fatal(err)
	}
	redislimit.RenewNow(h) // finds the group lease gone: lost before its task is bound
	var rec cancelRecorder
	p.Bind(gp.Bind(bg, rec.cancel), rec.cancel)
	if causes := rec.calls(); len(causes) != 1 || !errors.Is(causes[0], redislimit.ErrLeaseLost) {
		t.Fatalf("cancel calls at Bind %v, want one with ErrLeaseLost", causes)
	}
	if err := newClient(t, addr).Del(bg, "t:"+t.Name()+":{global:}:l").Err(); err != nil {
		t.Fatal(err)
	}
	redislimit.RenewNow(h) // finds the global lease gone
	if s := h.Stats(); s.LeasesLost != 2 || s.TasksCancelled != 1 {
		t.Fatalf("stats after both leases of the one task were lost: %+v; want LeasesLost 2, TasksCancelled 1", s)
	}
}

// Stats.Renewals counts the rounds that renewed leases in Redis: a round
// that has no lease to renew, and only gives back the permits no task
// needed, renews nothing.
func TestRenewalsCountsOnlyRoundsThatRenew(t *testing.T) {
	addr := startRedis(t)
	h := newHolder(t, addr, manualRenewals()...)
	l := h.Groups(2)
	n := attach(t, l)
	acquire(t, l, n, "g", 1, 5*time.Second).Release()
	redislimit.RenewNow(h) // renews the lease; its permit has been free since
	if s := h.Stats(); s.Renewals != 1 || s.Leases != 1 {
		t.Fatalf("after a round that renewed the lease: %+v; want 1 renewal, 1 lease", s)
	}
	redislimit.RenewNow(h) // free throughout the round: given back, nothing left to renew
	s := h.Stats()
	if s.Leases != 0 || s.Returned != 1 {
		t.Fatalf("after a round that gave the free permit back: %+v; want no lease, 1 returned", s)
	}
	if s.Renewals != 1 {
		t.Fatalf("Renewals %d after a round that only gave permits back, want 1", s.Renewals)
	}
}
