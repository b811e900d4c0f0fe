package redislimit_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/cluster/redislimit"
	"github.com/groupexec/groupexec/cluster/redislimit/redistest"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
	"github.com/redis/go-redis/v9"
)

// A holder closed while Redis records it as waiting for a key no longer
// waits: Close ends its waiting record, so that the others' caps do not stay
// split with a holder that is gone (and its record is not left in Redis).
func TestCloseEndsTheWaitingRecord(t *testing.T) {
	addr := startRedis(t)
	rdb := newClient(t, addr)
	a, b := newHolder(t, addr), newHolder(t, addr)
	la, lb := a.Groups(1), b.Groups(1)
	na := attach(t, la)
	waitingTask(t, lb, "g", 1)
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

// A lease whose local validity ended before Close is given back by its
// timer's goroutine: Close waits for that give-back, so that nothing of a
// closed holder talks to Redis once Close has returned.
func TestCloseWaitsForAnExpiredLeaseGiveBack(t *testing.T) {
	addr := startRedis(t)
	h := newHolder(t, addr)
	l := h.Groups(1)
	p := acquire(t, l, attach(t, l), "g", 1, 5*time.Second)
	defer p.Release()
	redislimit.SetRenewHook(h, func() error { return errors.New("renewals cut (test)") })
	resume := park(h, redislimit.SetReleaseHook) // the lease ran out here, and its give-back waits
	closed := make(chan error, 1)
	go func() { closed <- h.Close() }()
	select {
	case err := <-closed:
		resume()
		t.Fatalf("Close returned (%v) before the expired lease's give-back was sent", err)
	case <-time.After(testRenew):
		// Close, with nothing else to do, would have returned by now:
		// it waits for the give-back.
	}
	resume()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	nKey := "t:" + t.Name() + ":{group:g}:n"
	if n, err := newClient(t, addr).HLen(bg, nKey).Result(); err != nil || n != 0 {
		t.Fatalf("HLEN %s = %d, %v after Close; want the expired lease given back", nKey, n, err)
	}
}

// A lease whose local validity ends while Close waits for the holder's
// goroutines (here a renewal round held before it calls Redis) is lost by
// its timer, not by Close: Close must still give it back with the others,
// not leave it in Redis for the rest of its TTL.
func TestLeaseExpiringDuringCloseIsGivenBack(t *testing.T) {
	addr := startRedis(t)
	h := newHolder(t, addr, redislimit.WithLeaseTTL(2*time.Second), redislimit.WithRenewInterval(500*time.Millisecond))
	l := h.Groups(1)
	p := acquire(t, l, attach(t, l), "g", 1, 5*time.Second)
	defer p.Release()
	ctx := p.Bind(bg, func(error) {})
	parked, gate := make(chan struct{}, 1), make(chan struct{})
	redislimit.SetRenewHook(h, func() error {
		select {
		case parked <- struct{}{}:
		default:
		}
		<-gate
		return errors.New("renewal held (test)") // the held round renews nothing
	})
	<-parked
	closed := make(chan error, 1)
	go func() { closed <- h.Close() }()
	eventually(t, "Close has begun", 5*time.Second, func() bool {
		_, err := l.TryAcquire("g", 1)
		return errors.Is(err, redislimit.ErrClosed)
	})
	if !redislimit.Valid(ctx) {
		close(gate)
		t.Fatal("the lease ran out before Close began: the test tested nothing")
	}
	eventually(t, "the lease is lost", 10*time.Second, func() bool { return h.Stats().LeasesLost == 1 })
	close(gate)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	nKey := "t:" + t.Name() + ":{group:g}:n"
	if n, err := newClient(t, addr).HLen(bg, nKey).Result(); err != nil || n != 0 {
		t.Fatalf("HLEN %s = %d, %v after Close; want the lease that ran out during Close given back", nKey, n, err)
	}
}

// The leases Close gives back are not lost: it cancels the tasks still
// running on them (TestCloseCancelsWithErrClosed), but counts no lost
// lease and no cancelled task, and emits no EventLeaseLost, so that
// stopping a process does not read as leases lost to an outage or a pause:
// neither a task bound before Close nor one whose permit, taken before
// Close, is bound after it. A closed holder leases nothing more: its mode
// no longer reads up.
func TestCloseCountsNoLostLease(t *testing.T) {
	addr := startRedis(t)
	var mu sync.Mutex
	var evs []redislimit.Event
	h := newHolder(t, addr, redislimit.WithListener(func(e redislimit.Event) {
		mu.Lock()
		evs = append(evs, e)
		mu.Unlock()
	}))
	l := h.Groups(2)
	n := attach(t, l)
	p := acquire(t, l, n, "g", 1, 5*time.Second)
	q := acquire(t, l, n, "g", 1, 5*time.Second)
	var rec, late cancelRecorder
	p.Bind(bg, rec.cancel)
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	q.Bind(bg, late.cancel)
	for _, got := range [][]error{rec.calls(), late.calls()} {
		if len(got) != 1 || !errors.Is(got[0], redislimit.ErrClosed) {
			t.Fatalf("a task's cancel calls %v, want one with ErrClosed", got)
		}
	}
	p.Release()
	q.Release()
	if s := h.Stats(); s.LeasesLost != 0 || s.TasksCancelled != 0 || s.Mode != redislimit.ModeClosed {
		t.Fatalf("after Close: leases lost %d, tasks cancelled %d, mode %v; want 0, 0, closed",
			s.LeasesLost, s.TasksCancelled, s.Mode)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, e := range evs {
		if e.Kind == redislimit.EventLeaseLost {
			t.Fatalf("Close emitted %v for lease %d", e.Kind, e.Token)
		}
	}
}

// The free permits of the leases Close gives back are permits given back
// unused, as a renewal round's give-backs are: Stats.Returned counts them,
// and not those of the tasks still running.
func TestCloseCountsTheFreePermitsReturned(t *testing.T) {
	addr := startRedis(t)
	h := newHolder(t, addr, manualRenewals()...)
	l := h.Groups(4)
	n := attach(t, l)
	p1 := acquire(t, l, n, "g", 1, 5*time.Second)
	p2 := acquire(t, l, n, "g", 1, 5*time.Second)
	defer p2.Release()
	p1.Release()
	s := h.Stats()
	free := s.PermitsLeased - s.PermitsInUse
	if free < 1 || s.PermitsInUse != 1 || s.Returned != 0 {
		t.Fatalf("before Close: %+v; want a permit in use, at least one free, none returned", s)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if got := h.Stats().Returned; got != uint64(free) {
		t.Fatalf("Returned after Close %d, want the %d free permits it gave back", got, free)
	}
}

// The fallbacks a holder granted that its refiller has not reported yet
// when Close stops it are reported by Close: Stats counts them, and so must
// the listener's EventFallback. Here the refiller is held up in a pass for
// another key (a refill on its way to Redis) while the fallback is granted,
// and Close begins before that pass ends.
func TestCloseReportsPendingFallbacks(t *testing.T) {
	addr := startRedis(t)
	var mu sync.Mutex
	fellBack := 0
	h := newHolder(t, addr, append(manualRenewals(), redislimit.WithOpTimeout(time.Minute),
		redislimit.WithFailurePolicy(redislimit.FailOpen), redislimit.WithListener(func(e redislimit.Event) {
			if e.Kind == redislimit.EventFallback {
				mu.Lock()
				fellBack += e.Count
				mu.Unlock()
			}
		}))...)
	l := h.Groups(2)
	n := attach(t, l)
	p := acquire(t, l, n, "y", 1, 5*time.Second) // a lease, for the renewal rounds to fail on
	defer p.Release()
	parked, open := holdCalls(h, redislimit.SetRefillHook)
	defer open()
	if q, err := l.TryAcquire("x", 2); q != nil || err != nil {
		t.Fatalf("TryAcquire(x) with no lease for it: %v, %v", q, err)
	}
	<-parked
	redislimit.SetRenewHook(h, func() error { return errors.New("partition") })
	for range 3 {
		redislimit.RenewNow(h)
	}
	if m := h.Stats().Mode; m != redislimit.ModeDown {
		t.Fatalf("mode %v after three failed rounds, want down", m)
	}
	f, err := l.TryAcquire("g", 1)
	if f == nil || err != nil {
		t.Fatalf("TryAcquire(g) while down under FailOpen: %v, %v; want a fallback permit", f, err)
	}
	f.Release()
	closed := make(chan error, 1)
	go func() { closed <- h.Close() }()
	eventually(t, "Close begun", 5*time.Second, func() bool { return h.Stats().Mode == redislimit.ModeClosed })
	open()
	<-closed
	mu.Lock()
	defer mu.Unlock()
	if s := h.Stats(); fellBack != int(s.Fallbacks) || s.Fallbacks != 1 {
		t.Fatalf("EventFallback counts %d after Close, Stats.Fallbacks %d; want both 1", fellBack, s.Fallbacks)
	}
}

// closeAsGranted closes h while the reply granting a block of key g, asked
// for by a TryAcquire on l, waits to be used: the grant comes after Close
// began.
func closeAsGranted(t *testing.T, h *redislimit.Holder, l *redislimit.Limiter) {
	t.Helper()
	parked, open := holdCalls(h, redislimit.SetReplyHook)
	defer open()
	if p, err := l.TryAcquire("g", 1); p != nil || err != nil {
		t.Fatalf("TryAcquire with no lease: %v, %v", p, err)
	}
	<-parked // the grant's reply has come, and waits to be used
	closed := make(chan error, 1)
	go func() { closed <- h.Close() }()
	eventually(t, "Close begun", 5*time.Second, func() bool { return h.Stats().Mode == redislimit.ModeClosed })
	open()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
}

// A block whose grant is on its way when Close begins is given back by the
// refiller once the reply comes: its permits go back unused, as the free
// permits of the leases Close gives back itself, and Stats.Returned counts
// them too, so that Returned does not depend on when the reply came.
func TestCloseCountsALateGrantReturned(t *testing.T) {
	addr := startRedis(t)
	h := newHolder(t, addr, manualRenewals()...)
	l := h.Groups(4)
	attach(t, l)
	closeAsGranted(t, h, l)
	if s := h.Stats(); s.Refills != 1 || s.Returned != 1 || s.Leases != 0 {
		t.Fatalf("after Close: refills %d, returned %d, leases %d; want the block of 1 leased and given back, counted returned",
			s.Refills, s.Returned, s.Leases)
	}
	nKey := "t:" + t.Name() + ":{group:g}:n"
	if n, err := newClient(t, addr).HLen(bg, nKey).Result(); err != nil || n != 0 {
		t.Fatalf("HLEN %s = %d, %v after Close; want the late grant given back", nKey, n, err)
	}
}

// A block granted after Close began whose give-back fails (Redis slow or
// cut off for that call) must not stay in Redis for its TTL, keeping its
// permits from every other holder: it goes where the grants whose reply
// was lost go, and Close, which waits for the refiller, gives it back by
// its id in its own round trip.
func TestCloseGivesBackALateGrantWhoseGiveBackFailed(t *testing.T) {
	addr := startRedis(t)
	h := newHolder(t, addr, manualRenewals()...)
	l := h.Groups(4)
	attach(t, l)
	redislimit.SetReleaseHook(h, func() error { return errors.New("give-back cut (test)") })
	closeAsGranted(t, h, l)
	nKey := "t:" + t.Name() + ":{group:g}:n"
	if n, err := newClient(t, addr).HLen(bg, nKey).Result(); err != nil || n != 0 {
		t.Fatalf("HLEN %s = %d, %v after Close; want the late grant given back though its first give-back failed", nKey, n, err)
	}
}

// A task waiting for a block that Redis refused (another holder has the
// whole limit) when its holder is closed must not wait on: the closed
// holder asks Redis for nothing more, and no notice reaches it. Close has
// the executor ask again, and the task is refused with ErrClosed.
func TestCloseRefusesATaskWaitingForABlock(t *testing.T) {
	addr := startRedis(t)
	other := newHolder(t, addr)
	lo := other.Groups(1)
	p := acquire(t, lo, attach(t, lo), "g", 1, 5*time.Second)
	defer p.Release()
	h := newHolder(t, addr)
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(4)}, h.Groups(1), nil)
	hd, err := executor.Submit(ex, bg, executor.Task[int]{Group: "g", Fn: func(context.Context) (int, error) { return 1, nil }})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the task's refill refused", 10*time.Second, func() bool { return h.Stats().RefillsDenied > 0 })
	closeWithin(t, h, 10*time.Second)
	r, err := hd.Wait(ctxTimeout(t, 10*time.Second))
	if err != nil || r.Status != executor.Rejected || !errors.Is(r.Err, redislimit.ErrClosed) {
		t.Fatalf("task waiting for a block when its holder closed: %v %v %v; want Rejected with ErrClosed", r.Status, r.Err, err)
	}
}

// A call to Redis the holder stopped waiting for at the op timeout may
// still run (held up on its way here: a client that does not end it with
// its context). Close waits for it, so that nothing of the holder talks to
// Redis once Close has returned ("ends": the call goes on once Close's own
// round trip is done); but for one more op timeout at most ("stuck": the
// call is held until the test ends).
func TestCloseWaitsForAnAbandonedCall(t *testing.T) {
	for _, stuck := range []bool{false, true} {
		name := "ends"
		if stuck {
			name = "stuck"
		}
		t.Run(name, func(t *testing.T) {
			const opTimeout = 500 * time.Millisecond
			addr := startRedis(t)
			c := holderClient(t, addr)
			hook := &lateAcquire{}
			c.AddHook(hook)
			h, err := redislimit.New(c, append([]redislimit.Option{redislimit.WithPrefix("t:" + t.Name()),
				redislimit.WithPollInterval(testPoll), redislimit.WithOpTimeout(opTimeout)}, manualRenewals()...)...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { h.Close() })
			l := h.Groups(1)
			attach(t, l)
			parked, open := holdCalls(h, redislimit.SetRefillHook)
			defer open()
			if !stuck {
				hook.open = open
			}
			if p, err := l.TryAcquire("g", 1); p != nil || err != nil {
				t.Fatalf("TryAcquire with no lease: %v, %v", p, err)
			}
			<-parked
			eventually(t, "the refill abandoned at the op timeout", 10*time.Second, func() bool {
				return !redislimit.LastFailure(h).IsZero()
			})
			hook.closing.Store(true)
			start := time.Now()
			closeWithin(t, h, 10*time.Second)
			switch took := time.Since(start); {
			case stuck && took < opTimeout:
				t.Fatalf("Close returned after %v with an abandoned call running; want it to wait one op timeout (%v)", took, opTimeout)
			case !stuck && !hook.done.Load():
				t.Fatal("Close returned before the abandoned call it let go on had reached Redis")
			}
		})
	}
}

// lateAcquire watches a holder's client once Close has begun (closing):
// after the first round trip then (Close's own), it calls open, which
// lets the abandoned acquire go on; done is set once that acquire has run
// in Redis.
type lateAcquire struct {
	closing atomic.Bool
	open    func()
	once    sync.Once
	done    atomic.Bool
}

func (*lateAcquire) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (*lateAcquire) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (a *lateAcquire) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if !a.closing.Load() {
			return err
		}
		for _, c := range cmds {
			// The acquire script takes 10 keys; the give-back and unwait
			// scripts that Close sends take fewer.
			if args := c.Args(); len(args) > 2 && fmt.Sprint(args[2]) == "10" && c.Err() == nil {
				a.done.Store(true)
			}
		}
		if a.open != nil {
			a.once.Do(a.open)
		}
		return err
	}
}

// A holder's contention subscriber that connects while Redis accepts
// connections but answers nothing (paused, or stalled behind a proxy)
// waits in the client for the reply to the connection's set-up, for as
// long as the client reads (never, with ReadTimeout -1): no context of the
// holder's ends that wait. Close must not wait for it for ever: it waits
// for it as for a call abandoned at the op timeout, one op timeout at most.
func TestCloseDoesNotWaitForTheSubscriberOfAStalledRedis(t *testing.T) {
	srv := redistest.Start(t)
	proxy := redistest.StartProxy(t, srv.Addr())
	proxy.Stall()
	const opTimeout = 200 * time.Millisecond
	c := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: -1, Protocol: 2,
		ReadTimeout: -1, WriteTimeout: -1})
	dialed := make(chan struct{}, 1)
	c.AddHook(dialSignal(dialed))
	t.Cleanup(func() { c.Close() })
	h, err := redislimit.New(c, redislimit.WithPrefix("t:"+t.Name()), redislimit.WithOpTimeout(opTimeout))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-dialed: // the subscriber's connection, accepted by the proxy
	case <-time.After(10 * time.Second):
		t.Fatal("the subscriber never connected")
	}
	closeWithin(t, h, 10*time.Second)
}

// dialSignal is a client hook that sends on dialed once a connection is
// made.
type dialSignal chan struct{}

func (d dialSignal) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		cn, err := next(ctx, network, addr)
		if err == nil {
			select {
			case d <- struct{}{}:
			default:
			}
		}
		return cn, err
	}
}

func (dialSignal) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (dialSignal) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
