package redislimit_test

// Waiters between holders and limiters: refusals do not answer each other,
// limiters of one Holder share as separate holders do, and an outage reaches
// every waiter at once.

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/groupexec/groupexec/cluster/redislimit"
	"github.com/groupexec/groupexec/cluster/redislimit/redistest"
	"github.com/groupexec/groupexec/executor"
	"github.com/redis/go-redis/v9"
)

// attach attaches l to a fresh notifier.
func attach(t *testing.T, l *redislimit.Limiter) notifier {
	t.Helper()
	n := make(notifier, 1)
	if err := l.Attach(n.notify); err != nil {
		t.Fatal(err)
	}
	return n
}

// waitingTask attaches l to a notify that does what an executor does for a
// task of weight w of key that waits for l: each notify asks again, before
// it returns (the executor dispatches in notify), until a permit comes (kept
// until the test ends) or l refuses the task. The test asks first. The
// channel is closed when the permit comes.
func waitingTask(t *testing.T, l *redislimit.Limiter, key string, w int) <-chan struct{} {
	t.Helper()
	start, got := laterWaitingTask(t, l, nil, key, w)
	start()
	return got
}

// laterWaitingTask is waitingTask for a task that begins to wait when start
// is called: until then (while the test takes permits with acquire, say)
// a notify only goes on to n.
func laterWaitingTask(t *testing.T, l *redislimit.Limiter, n notifier, key string, w int) (start func(), got <-chan struct{}) {
	t.Helper()
	var mu sync.Mutex
	var p executor.LimiterPermit
	waits, done, gotc := false, false, make(chan struct{})
	if err := l.Attach(func(k string) {
		if n != nil {
			n.notify(k)
		}
		mu.Lock()
		defer mu.Unlock()
		if !waits || done {
			return
		}
		var err error
		p, err = l.TryAcquire(key, w)
		done = p != nil || err != nil
		if p != nil {
			close(gotc)
		}
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		if p != nil {
			p.Release()
		}
	})
	return func() { mu.Lock(); waits = true; mu.Unlock() }, gotc
}

// Two holders both below their fair share, both refused for lack of room:
// each refusal is published, and wakes the other's refiller. A refused key
// must still be asked for at the poll rate, not each time the refiller
// wakes, or the two refusals answer each other at the speed of a round trip
// (thousands of calls a second). The round trips are judged against the
// time that actually passed, so that a machine held up during the window
// does not pass for a storm; the TTL is long, so that the demand stays
// (a refused holder forgets a demand nobody has asked for within a TTL)
// however long that is.
func TestRefusalsDoNotAnswerEachOther(t *testing.T) {
	addr := startRedis(t)
	const poll, ttl = 100 * time.Millisecond, time.Minute
	hA := newHolder(t, addr, redislimit.WithPollInterval(poll), redislimit.WithLeaseTTL(ttl))
	hB := newHolder(t, addr, redislimit.WithPollInterval(poll), redislimit.WithLeaseTTL(ttl))
	hC := newHolder(t, addr, redislimit.WithLeaseTTL(ttl))
	lA, lB, lC := hA.Groups(5), hB.Groups(5), hC.Groups(5)
	// A and B each take a permit, then a task of each waits for another.
	nA, nB, nC := make(notifier, 1), make(notifier, 1), attach(t, lC)
	startA, _ := laterWaitingTask(t, lA, nA, "g", 1)
	startB, _ := laterWaitingTask(t, lB, nB, "g", 1)

	var held []executor.LimiterPermit
	for range 3 {
		held = append(held, acquire(t, lC, nC, "g", 1, 5*time.Second))
	}
	held = append(held, acquire(t, lA, nA, "g", 1, 5*time.Second))
	held = append(held, acquire(t, lB, nB, "g", 1, 5*time.Second))
	defer func() {
		for _, p := range held {
			p.Release()
		}
	}()
	// The whole limit is out: one more each is refused until a release.
	startA()
	startB()
	for _, l := range []*redislimit.Limiter{lA, lB} {
		if p, err := l.TryAcquire("g", 1); p != nil || err != nil {
			t.Fatalf("TryAcquire with the whole limit out: %v, %v; want to wait", p, err)
		}
	}
	eventually(t, "both refused, both recorded as waiting", 5*time.Second, func() bool {
		return hA.Stats().RefillsDenied >= 1 && hB.Stats().RefillsDenied >= 1
	})
	start := time.Now()
	a0, b0 := hA.Stats().RoundTrips, hB.Stats().RoundTrips
	const window = 800 * time.Millisecond
	time.Sleep(window)
	eventually(t, "the refused keys polled", 10*time.Second, func() bool {
		return hA.Stats().RoundTrips-a0 >= 2 && hB.Stats().RoundTrips-b0 >= 2
	})
	a, b := hA.Stats().RoundTrips-a0, hB.Stats().RoundTrips-b0
	took := time.Since(start)
	// At the poll rate: window/poll refills, plus the renewal rounds and a
	// give-back or two; the storm made thousands. As many more for each
	// window more that passed.
	const perWindow = 30
	most := uint64(perWindow * took / window)
	t.Logf("round trips in %v: A %d, B %d", took, a, b)
	if a > most || b > most {
		t.Fatalf("round trips in %v with poll %v: A %d, B %d; want at most %d each (%d per %v)", took, poll, a, b, most, perWindow, window)
	}
}

// Two limiters of one Holder for the same groups (two executors sharing a
// Holder, as the doc allows): while the first keeps the whole limit busy,
// releasing and taking permits again as an executor with a queue does, the
// second must still be granted its share, as a second Holder would be.
func TestLimitersOfOneHolderShare(t *testing.T) {
	addr := startRedis(t)
	h := newHolder(t, addr)
	l1, l2 := h.Groups(2), h.Groups(2)
	n1, n2 := attach(t, l1), attach(t, l2)
	busy := []executor.LimiterPermit{acquire(t, l1, n1, "g", 1, 5*time.Second), acquire(t, l1, n1, "g", 1, 5*time.Second)}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		// The first executor's queue: each finished task is followed by
		// the next at once, on whatever its limiter grants.
		for i := 0; ; i++ {
			select {
			case <-stop:
				for _, p := range busy {
					if p != nil {
						p.Release()
					}
				}
				return
			default:
			}
			k := i % len(busy)
			if busy[k] != nil {
				busy[k].Release()
				busy[k] = nil
			}
			p, err := l1.TryAcquire("g", 1)
			if err != nil {
				t.Errorf("first limiter: %v", err)
				return
			}
			busy[k] = p
			if p == nil {
				select {
				case <-n1:
				case <-time.After(20 * time.Millisecond):
				}
			}
			time.Sleep(time.Millisecond)
		}
	})
	p := acquire(t, l2, n2, "g", 1, 3*time.Second)
	close(stop)
	wg.Wait()
	p.Release()
}

// keyNotifier records when each key was first notified.
type keyNotifier struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (k *keyNotifier) notify(key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.at[key]; !ok {
		k.at[key] = time.Now()
	}
}

// Many groups wait for refills that another holder's leases block when
// Redis stops answering: once the holder is down, every waiting group is
// told at once and meets the failure policy (FailClosed: refused), not one
// group per poll interval and call timeout.
func TestDownTellsEveryWaiter(t *testing.T) {
	srv := redistest.Start(t)
	other := newHolder(t, srv.Addr())
	me := newHolder(t, srv.Addr(), redislimit.WithOpTimeout(200*time.Millisecond))
	lo, lm := other.Groups(1), me.Groups(1)
	no := attach(t, lo)
	kn := &keyNotifier{at: map[string]time.Time{}}
	if err := lm.Attach(kn.notify); err != nil {
		t.Fatal(err)
	}
	const groups = 12
	keys := make([]string, groups)
	for i := range keys {
		keys[i] = string(rune('a' + i))
		p := acquire(t, lo, no, keys[i], 1, 5*time.Second)
		defer p.Release()
		if p, err := lm.TryAcquire(keys[i], 1); p != nil || err != nil {
			t.Fatalf("TryAcquire(%q) with the limit held elsewhere: %v, %v; want to wait", keys[i], p, err)
		}
	}
	time.Sleep(50 * time.Millisecond) // refused once each: polling
	kn.mu.Lock()
	clear(kn.at)
	kn.mu.Unlock()

	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := srv.Resume(); err != nil {
			t.Error(err)
		}
	}()
	var down time.Time
	var calls0 uint64
	eventually(t, "the holder goes down", 10*time.Second, func() bool {
		s := me.Stats()
		down, calls0 = time.Now(), s.RoundTrips
		return s.Mode == redislimit.ModeDown
	})
	eventually(t, "every waiting group is told", 5*time.Second, func() bool {
		kn.mu.Lock()
		defer kn.mu.Unlock()
		return len(kn.at) == groups
	})
	calls := me.Stats().RoundTrips - calls0
	var last time.Time
	kn.mu.Lock()
	for _, at := range kn.at {
		if at.After(last) {
			last = at
		}
	}
	kn.mu.Unlock()
	t.Logf("all %d groups told %v after the holder was seen down, with %d calls to Redis", groups, last.Sub(down), calls)
	// Told one at a time, each after a failed call of its own, the groups
	// would cost a call each (and an op timeout each, while Redis is
	// paused); told at once, none (the renewal loop may probe once or
	// twice meanwhile). Counted, not timed: a slow machine changes the
	// time, not the number of calls.
	if calls >= groups/2 {
		t.Fatalf("%d calls to Redis between the holder going down and all %d waiting groups being told; want them told without calls", calls, groups)
	}
	for _, k := range keys {
		p, err := lm.TryAcquire(k, 1)
		if p != nil || !errors.Is(err, redislimit.ErrUnavailable) {
			t.Fatalf("TryAcquire(%q) while down under FailClosed: %v, %v; want ErrUnavailable", k, p, err)
		}
	}
}

// A lease this holder stops trusting (its renewals fail, but Redis is
// reachable: a reply too late, or only the renewal path cut) is given back
// at once, not left in Redis keeping its permits from the others for the
// rest of its TTL; and the key's executor is told, so that a task waiting
// for a release here asks again instead of waiting for a task that ignores
// its cancelled context.
func TestLostLeaseIsGivenBack(t *testing.T) {
	addr := startRedis(t)
	lost := make(chan struct{}, 1)
	h := newHolder(t, addr, redislimit.WithLeaseTTL(3*time.Second), redislimit.WithListener(func(e redislimit.Event) {
		if e.Kind == redislimit.EventLeaseLost {
			select {
			case lost <- struct{}{}:
			default:
			}
		}
	}))
	l := h.Groups(1)
	kn := &keyNotifier{at: map[string]time.Time{}}
	if err := l.Attach(kn.notify); err != nil {
		t.Fatal(err)
	}
	var p executor.LimiterPermit
	eventually(t, "a permit", 5*time.Second, func() bool {
		var err error
		p, err = l.TryAcquire("g", 1)
		if err != nil {
			t.Fatal(err)
		}
		return p != nil
	})
	defer p.Release()
	c := newClient(t, addr)
	nKey := "t:" + t.Name() + ":{group:g}:n"
	if n, err := c.HLen(bg, nKey).Result(); err != nil || n != 1 {
		t.Fatalf("HLEN %s = %d, %v; want the one lease", nKey, n, err)
	}
	kn.mu.Lock()
	clear(kn.at)
	kn.mu.Unlock()
	redislimit.SetRenewHook(h, func() error { return errors.New("renewals cut") })
	select {
	case <-lost:
	case <-time.After(time.Minute):
		t.Fatal("the lease was never lost")
	}
	// Redis would keep it until its TTL ran out and a script reaped it;
	// given back, it is gone at once.
	eventually(t, "the lost lease is gone from Redis", 2*time.Second, func() bool {
		n, err := c.HLen(bg, nKey).Result()
		return err == nil && n == 0
	})
	eventually(t, "the key's executor is told", 2*time.Second, func() bool {
		kn.mu.Lock()
		defer kn.mu.Unlock()
		_, ok := kn.at["g"]
		return ok
	})
}

// Close cancels the tasks still running on its permits with a
// *LeaseLostError that wraps ErrClosed, as its doc says, and refuses later
// acquires with ErrClosed.
func TestCloseCancelsWithErrClosed(t *testing.T) {
	addr := startRedis(t)
	h := newHolder(t, addr)
	l := h.Groups(1)
	n := attach(t, l)
	p := acquire(t, l, n, "g", 1, 5*time.Second)
	causes := make(chan error, 1)
	ctx := p.Bind(bg, func(err error) { causes <- err })
	if _, ok := redislimit.FencingToken(ctx); !ok {
		t.Fatal("no fencing token on the bound context")
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	var cause error
	select {
	case cause = <-causes:
	case <-time.After(time.Minute):
		t.Fatal("Close did not cancel the task")
	}
	var lle *redislimit.LeaseLostError
	if !errors.Is(cause, redislimit.ErrClosed) || !errors.Is(cause, redislimit.ErrLeaseLost) || !errors.As(cause, &lle) {
		t.Fatalf("cause %v: want a *LeaseLostError matching ErrLeaseLost and ErrClosed", cause)
	}
	p.Release()
	if _, err := l.TryAcquire("g", 1); !errors.Is(err, redislimit.ErrClosed) {
		t.Fatalf("TryAcquire after Close: %v, want ErrClosed", err)
	}
}

// Permits a holder no longer uses go back as soon as another holder waits
// for room below its cap: not at its next renewal round (here parked), and
// although they are within its own cap. Limit 6: A holds 1 that no task
// uses, C holds 5 in use (just leased: it keeps them a quantum), and B,
// refused, gets A's permit.
func TestIdlePermitsGoToAWaiter(t *testing.T) {
	addr := startRedis(t)
	slow := []redislimit.Option{redislimit.WithLeaseTTL(3 * time.Second), redislimit.WithRenewInterval(time.Second)}
	// A's renewal loop is held below: its lease must outlast any stall of
	// the machine meanwhile, or it is lost rather than given back.
	a := newHolder(t, addr, redislimit.WithLeaseTTL(time.Minute), redislimit.WithRenewInterval(time.Second))
	b, c := newHolder(t, addr), newHolder(t, addr, slow...)
	la, lb, lc := a.Groups(6), b.Groups(6), c.Groups(6)
	na, nb, nc := attach(t, la), attach(t, lb), attach(t, lc)
	acquire(t, la, na, "g", 1, 5*time.Second).Release()
	defer parkRenewals(a)()
	pc := acquire(t, lc, nc, "g", 5, 5*time.Second)
	defer pc.Release()
	p := acquire(t, lb, nb, "g", 1, 5*time.Second)
	defer p.Release()
	if s := a.Stats(); s.LeasesLost != 0 || s.Returned != 1 {
		t.Fatalf("A's stats %+v: its permit did not come back through a give-back", s)
	}
	if s := c.Stats(); s.PermitsLeased != 5 {
		t.Fatalf("C's stats %+v: B was served by C's permits, not A's idle one", s)
	}
}

// A group key may contain '|', the separator of contention notices: a
// holder of such a key still hears that another holder waits for it, and
// its share. Renewal rounds are minutes away, so only the notice can tell
// it.
func TestNoticeOfAKeyWithTheSeparator(t *testing.T) {
	addr := startRedis(t)
	a, b := newHolder(t, addr, manualRenewals()...), newHolder(t, addr, manualRenewals()...)
	subscribed(t, addr, 2, a)
	la, lb := a.Groups(1), b.Groups(1)
	na, _ := attach(t, la), attach(t, lb)
	const key = "tenant|1|x"
	p := acquire(t, la, na, key, 1, 5*time.Second)
	defer p.Release()
	if q, err := lb.TryAcquire(key, 1); q != nil || err != nil {
		t.Fatalf("B's TryAcquire with the limit at A: %v, %v; want to wait", q, err)
	}
	eventually(t, "A hears that B waits for "+key, 5*time.Second, func() bool {
		others, c, _ := redislimit.Share(la, key)
		return others == 1 && c == 0
	})
}

// A holder refused a key is recorded in Redis as waiting for it. When the
// refills it then asks for fail three times in a row (the replies are
// lost), the holder goes down and drops the key's demand: its executor is
// told, and meets the failure policy. While down, no call to Redis is made
// for the key; once Redis answers again (the renewal loop's probe), the
// waiting record must be ended too, as every other drop of demand ends it,
// or the record keeps the other holders' caps split with one that waits for
// nothing until it expires (two renew intervals: minutes here).
func TestDemandDroppedOnGoingDownEndsTheWaitingRecordOnceUp(t *testing.T) {
	addr := startRedis(t)
	rdb := newClient(t, addr)
	var a *redislimit.Holder
	tripsAtDown, rejected := make(chan uint64, 1), make(chan struct{}, 16)
	a = newHolder(t, addr, append(manualRenewals(), redislimit.WithListener(func(e redislimit.Event) {
		switch e.Kind {
		case redislimit.EventUnavailable:
			select {
			case tripsAtDown <- a.Stats().RoundTrips:
			default:
			}
		case redislimit.EventRejected:
			rejected <- struct{}{}
		}
	}))...)
	b := newHolder(t, addr, manualRenewals()...)
	la, lb := a.Groups(1), b.Groups(1)
	waitingTask(t, la, "g", 1)
	nb := attach(t, lb)
	p := acquire(t, lb, nb, "g", 1, 5*time.Second)
	defer p.Release()
	if q, err := la.TryAcquire("g", 1); q != nil || err != nil {
		t.Fatalf("A's TryAcquire with the limit at B: %v, %v; want to wait", q, err)
	}
	eventually(t, "A refused", 5*time.Second, func() bool { return a.Stats().RefillsDenied == 1 })
	w, aid := "t:"+t.Name()+":{group:g}:w", a.ID()+"/1"
	if _, err := rdb.ZScore(bg, w, aid).Result(); err != nil {
		t.Fatalf("A refused but not recorded as waiting: %v", err)
	}
	redislimit.SetReplyHook(a, func() error { return errors.New("a lost reply (test)") })
	redislimit.RenewNow(a) // A asks again, and its refills fail from now on
	var trips uint64
	select {
	case trips = <-tripsAtDown:
	case <-time.After(5 * time.Second):
		t.Fatal("A not down after its refills failed")
	}
	// Each refusal while down is reported by a later pass of the refiller
	// than the report before it: after two, the pass queued as A went down
	// (where the record would be ended) is over.
	for range 2 {
		if q, err := la.TryAcquire("g", 1); q != nil || !errors.Is(err, redislimit.ErrUnavailable) {
			t.Fatalf("A's TryAcquire while down: %v, %v; want ErrUnavailable (if up: a call made while down "+
				"brought it up; stats %+v)", q, err, a.Stats())
		}
		select {
		case <-rejected:
		case <-time.After(5 * time.Second):
			t.Fatal("A's refusal while down not reported")
		}
	}
	if s := a.Stats(); s.RoundTrips != trips || s.Mode != redislimit.ModeDown {
		t.Fatalf("%d calls to Redis while A was down, mode now %v; want none, and down", s.RoundTrips-trips, s.Mode)
	}
	if _, err := rdb.ZScore(bg, w, aid).Result(); err != nil {
		t.Fatalf("A's waiting record ended while A was down (%v): a call was made", err)
	}
	redislimit.RenewNow(a) // the probe: Redis answers, A is up
	eventually(t, "A's waiting record ends", 5*time.Second, func() bool {
		_, err := rdb.ZScore(bg, w, aid).Result()
		return errors.Is(err, redis.Nil)
	})
}

// B holds 2 of a limit of 4, an even split, and keeps both busy with light
// tasks (each release is taken again at once, here, without a call to
// Redis): B never waits and never gives back on its own. A waits for 3. A's
// task must not wait for as long as B stays busy: B's share must leave A
// the weight it waits for, and B gives back what is above it.
func TestHeavyWaiterIsNotStarvedByABusyEvenSplit(t *testing.T) {
	addr := startRedis(t)
	a, b := newHolder(t, addr), newHolder(t, addr)
	la, lb := a.Groups(4), b.Groups(4)
	na, nb := attach(t, la), attach(t, lb)
	ps := []executor.LimiterPermit{acquire(t, lb, nb, "g", 1, 5*time.Second), acquire(t, lb, nb, "g", 1, 5*time.Second)}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				for _, p := range ps {
					p.Release()
				}
				return
			case <-tick.C:
			}
			kept := ps[:0]
			for _, p := range ps {
				p.Release()
				if q, err := lb.TryAcquire("g", 1); err == nil && q != nil {
					kept = append(kept, q)
				}
			}
			ps = kept
		}
	}()
	defer func() {
		close(stop)
		<-done
	}()
	acquire(t, la, na, "g", 3, 5*time.Second).Release() // a hang guard: within a few renew intervals
}

// A holder whose task no longer waits ends its waiting record in Redis.
// When that call fails (here Redis refuses writes for a while, as a primary
// demoted by a failover does), the record must be ended again once Redis
// serves, not left to keep the other holders' caps split with a holder that
// waits for nothing until it expires (two renew intervals: minutes here).
func TestFailedUnwaitIsSentAgain(t *testing.T) {
	addr := startRedis(t)
	rdb := newClient(t, addr)
	a, b := newHolder(t, addr, manualRenewals()...), newHolder(t, addr, manualRenewals()...)
	la, lb := a.Groups(2), b.Groups(2)
	na, nb := attach(t, la), attach(t, lb)
	p := acquire(t, la, na, "g", 1, 5*time.Second)
	q := acquire(t, lb, nb, "g", 1, 5*time.Second)
	defer q.Release()
	if r, err := la.TryAcquire("g", 1); r != nil || err != nil {
		t.Fatalf("A's TryAcquire with the limit out: %v, %v; want to wait", r, err)
	}
	eventually(t, "A refused", 5*time.Second, func() bool { return a.Stats().RefillsDenied == 1 })
	w, aid := "t:"+t.Name()+":{group:g}:w", a.ID()+"/1"
	if _, err := rdb.ZScore(bg, w, aid).Result(); err != nil {
		t.Fatalf("A refused but not recorded as waiting: %v", err)
	}
	if err := rdb.ReplicaOf(bg, "127.0.0.1", "1").Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-na:
	default:
	}
	// A's own permit now serves its waiting task: the next pass drops the
	// demand, tells the executor, and tries to end the record, in vain.
	p.Release()
	redislimit.RenewNow(a)
	select {
	case <-na:
	case <-time.After(5 * time.Second):
		t.Fatal("A's executor not told that a permit is at hand")
	}
	if _, err := rdb.ZScore(bg, w, aid).Result(); err != nil {
		t.Fatalf("A's record ended while Redis refused writes (%v): the test tested nothing", err)
	}
	if err := rdb.ReplicaOf(bg, "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	redislimit.RenewNow(a) // A is up again, if the failures brought it down
	eventually(t, "A's waiting record ends", 5*time.Second, func() bool {
		_, err := rdb.ZScore(bg, w, aid).Result()
		return errors.Is(err, redis.Nil)
	})
}

// A's first refill of a key finds the limit at B: Redis records A as
// waiting, and the reply is lost. Lost replies again until A is down, which
// drops the demand. A never heard of its refusal, but Redis recorded it: once
// Redis answers again the record must be ended, as when A had heard of it, or
// it keeps B's cap split with a holder that waits for nothing until it
// expires (two renew intervals: minutes here).
func TestRecordOfARefusalWhoseReplyWasLostIsEnded(t *testing.T) {
	addr := startRedis(t)
	rdb := newClient(t, addr)
	downs := make(chan struct{}, 1)
	a := newHolder(t, addr, append(manualRenewals(), redislimit.WithListener(func(e redislimit.Event) {
		if e.Kind == redislimit.EventUnavailable {
			downs <- struct{}{}
		}
	}))...)
	b := newHolder(t, addr, manualRenewals()...)
	la, lb := a.Groups(1), b.Groups(1)
	_, nb := attach(t, la), attach(t, lb)
	p := acquire(t, lb, nb, "g", 1, 5*time.Second)
	defer p.Release()
	redislimit.SetReplyHook(a, func() error { return errors.New("a lost reply (test)") })
	if q, err := la.TryAcquire("g", 1); q != nil || err != nil {
		t.Fatalf("A's TryAcquire with the limit at B: %v, %v; want to wait", q, err)
	}
	select {
	case <-downs:
	case <-time.After(5 * time.Second):
		t.Fatal("A not down after its refills failed")
	}
	w, aid := "t:"+t.Name()+":{group:g}:w", a.ID()+"/1"
	if _, err := rdb.ZScore(bg, w, aid).Result(); err != nil {
		t.Fatalf("A not recorded as waiting: %v", err)
	}
	redislimit.SetReplyHook(a, nil)
	redislimit.RenewNow(a) // the probe: Redis answers, A is up
	if s := a.Stats(); s.Mode != redislimit.ModeUp {
		t.Fatalf("A's mode after the probe: %v; want up", s.Mode)
	}
	eventually(t, "A's waiting record ends", 5*time.Second, func() bool {
		_, err := rdb.ZScore(bg, w, aid).Result()
		return errors.Is(err, redis.Nil)
	})
}

// A refused holder whose cap, too small for its task a moment ago, now
// fits it while permits are free must ask again when it hears so (a grant
// to another holder changes the caps, and is published), not at its next
// renewal round (minutes here), even when it holds no permit of the key.
// Limit 3, all at Z; Y waits for 1, then X for 2. Z gives them back: X
// asks first, and Y, which waited longer, is first in line (a cap of 2,
// X's 1): X is refused for its share. Y's grant of 1 leaves X waiting
// alone, so capped by no one (a cap of the limit), with 2 permits free.
func TestCapRaisedByAGrantWakesAWaiterHoldingNothing(t *testing.T) {
	testCapRaisedByAGrant(t, false)
}

// The same, with the notice of Y's grant heard before the reply to X's
// refill, refused before the grant: the refusal, older news, must not make
// X wait for a notice that has come already.
func TestCapRaisedByAGrantBeforeTheRefusalWakesTheWaiter(t *testing.T) {
	testCapRaisedByAGrant(t, true)
}

func testCapRaisedByAGrant(t *testing.T, noticeFirst bool) {
	addr := startRedis(t)
	rdb := newClient(t, addr)
	x, y, z := newHolder(t, addr, manualRenewals()...), newHolder(t, addr, manualRenewals()...), newHolder(t, addr, manualRenewals()...)
	subscribed(t, addr, 3, x)
	lx, ly, lz := x.Groups(3), y.Groups(3), z.Groups(3)
	waitingTask(t, ly, "g", 1)
	xGot, nz := waitingTask(t, lx, "g", 2), attach(t, lz)
	pz := acquire(t, lz, nz, "g", 3, 5*time.Second)
	w := "t:" + t.Name() + ":{group:g}:w"
	wait := func(l *redislimit.Limiter, h *redislimit.Holder, n int) {
		t.Helper()
		if q, err := l.TryAcquire("g", n); q != nil || err != nil {
			t.Fatalf("TryAcquire with the limit at Z: %v, %v; want to wait", q, err)
		}
		eventually(t, h.ID()+" recorded as waiting", 5*time.Second, func() bool {
			return rdb.ZScore(bg, w, h.ID()+"/1").Err() == nil
		})
	}
	wait(ly, y, 1)
	// X waits from a later millisecond of Redis's clock: Y is first in line.
	g, err := rdb.HGet(bg, "t:"+t.Name()+":{group:g}:g", y.ID()+"/1").Int64()
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "Redis's clock past Y's wait", 5*time.Second, func() bool {
		now, err := rdb.Time(bg).Result()
		return err == nil && now.UnixMilli() > g
	})
	wait(lx, x, 2)
	// hold returns a hook that holds the first call it is run for until
	// the returned function is called, and a channel that tells when it
	// does.
	hold := func() (hook func() error, parked chan struct{}, open func()) {
		parked, gate := make(chan struct{}), make(chan struct{})
		var first, done sync.Once
		hook = func() error {
			first.Do(func() {
				close(parked)
				<-gate
			})
			return nil
		}
		open = func() { done.Do(func() { close(gate) }) }
		t.Cleanup(open)
		return hook, parked, open
	}
	// Y's next refill is held on its way until X has been refused; with
	// noticeFirst, the reply to X's refill is held too, until X has heard
	// of Y's grant.
	yHook, yParked, yOpen := hold()
	redislimit.SetRefillHook(y, yHook)
	xHook, xParked, xOpen := hold()
	if noticeFirst {
		redislimit.SetReplyHook(x, xHook)
	}
	pz.Release()
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "Y asks again", yParked)
	if noticeFirst {
		waitFor(t, "X refused, its reply held", xParked)
		yOpen()
		eventually(t, "X hears of Y's grant", 5*time.Second, func() bool {
			o, c, _ := redislimit.Share(lx, "g")
			return o == 0 && c == 3
		})
		xOpen()
	} else {
		eventually(t, "X refused for its share", 5*time.Second, func() bool { return x.Stats().RefillsDenied >= 2 })
		if _, c, _ := redislimit.Share(lx, "g"); c != 1 {
			t.Fatalf("X's cap after its refusal: %d; want 1", c)
		}
		yOpen()
	}
	waitFor(t, "X's task given its permits", xGot)
}
