package redislimit_test

// What a holder hears of a key comes by two ways that keep no order
// between them (replies to its calls, contention notices on its
// subscription), and its calls can reach Redis late (a call the op timeout
// abandoned is still on its way): older news must not undo newer.

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/groupexec/groupexec/cluster/redislimit"
	"github.com/groupexec/groupexec/executor"
	"github.com/redis/go-redis/v9"
)

// noticesOf subscribes to h's contention channel (before it returns) and
// returns the notices published there from then on.
func noticesOf(t *testing.T, addr string, h *redislimit.Holder) <-chan string {
	t.Helper()
	ps := newClient(t, addr).Subscribe(bg, redislimit.Channel(h))
	if _, err := ps.Receive(bg); err != nil { // the confirmation
		t.Fatal(err)
	}
	t.Cleanup(func() { ps.Close() })
	out := make(chan string, 64)
	go func() {
		for m := range ps.Channel() {
			select {
			case out <- m.Payload:
			default:
			}
		}
	}()
	return out
}

// waitFor receives from c, within a hang guard.
func waitFor[T any](t *testing.T, what string, c <-chan T) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(5 * time.Second):
		t.Fatalf("not within 5s: %s", what)
		panic("unreachable")
	}
}

// drain empties a notifier.
func drain(n notifier) {
	for {
		select {
		case <-n:
		default:
			return
		}
	}
}

// wantShare fails the test unless l's share of key is others and cap.
func wantShare(t *testing.T, l *redislimit.Limiter, key string, others, capacity int, when string) {
	t.Helper()
	if o, c, _ := redislimit.Share(l, key); o != others || c != capacity {
		t.Fatalf("%s: A's share of %q is %d others waiting, cap %d; want %d, cap %d", when, key, o, c, others, capacity)
	}
}

// fullKey is the start of the tests below: holders A (made with aOpts)
// and B share key "g" of limit 2, each holding one of its permits (B's
// given back at the test's end).
type fullKey struct {
	a, b   *redislimit.Holder
	la, lb *redislimit.Limiter
	na, nb notifier
	pa     executor.LimiterPermit
}

func newFullKey(t *testing.T, addr string, aOpts ...redislimit.Option) fullKey {
	t.Helper()
	k := fullKey{a: newHolder(t, addr, append(manualRenewals(), aOpts...)...), b: newHolder(t, addr, manualRenewals()...)}
	k.la, k.lb = k.a.Groups(2), k.b.Groups(2)
	k.na, k.nb = attach(t, k.la), attach(t, k.lb)
	pb := acquire(t, k.lb, k.nb, "g", 1, 5*time.Second)
	t.Cleanup(pb.Release)
	k.pa = acquire(t, k.la, k.na, "g", 1, 5*time.Second)
	return k
}

// A notice published before a reply that the holder has already used is
// older news: delivered late (the subscription is a connection of its own,
// and nothing orders it with the replies), it must not bring back the cap
// the reply replaced. Limit 2: B, refused, waits, and the notice gives A a
// cap of 1; B stops waiting, and A's renewal round hears that nobody waits.
// The notice then comes again, late.
func TestNoticeOlderThanAReplyIsIgnored(t *testing.T) {
	addr := startRedis(t)
	a, b := newHolder(t, addr, manualRenewals()...), newHolder(t, addr, manualRenewals()...)
	notices := noticesOf(t, addr, a)
	subscribed(t, addr, 3, a)
	la, lb := a.Groups(2), b.Groups(2)
	na, nb := attach(t, la), attach(t, lb)
	pa := acquire(t, la, na, "g", 1, 5*time.Second)
	defer pa.Release()
	pb := acquire(t, lb, nb, "g", 1, 5*time.Second)
	if q, err := lb.TryAcquire("g", 1); q != nil || err != nil {
		t.Fatalf("B's TryAcquire with the limit out: %v, %v; want to wait", q, err)
	}
	stale := waitFor(t, "B's refusal published", notices)
	if !strings.HasPrefix(stale, "c|"+b.ID()+"/1|") {
		t.Fatalf("first notice %q; want B's refusal", stale)
	}
	eventually(t, "A hears that B waits", 5*time.Second, func() bool {
		o, c, _ := redislimit.Share(la, "g")
		return o == 1 && c == 1
	})
	// B's own permit serves its waiting task: B ends its waiting record.
	drain(nb)
	pb.Release()
	redislimit.RenewNow(b)
	waitFor(t, "B's executor told that a permit is at hand", nb)
	w, bid := "t:"+t.Name()+":{group:g}:w", b.ID()+"/1"
	rdb := newClient(t, addr)
	eventually(t, "B's waiting record ends", 5*time.Second, func() bool {
		return errors.Is(rdb.ZScore(bg, w, bid).Err(), redis.Nil)
	})
	redislimit.RenewNow(a)
	wantShare(t, la, "g", 0, 2, "after A's renewal round")
	redislimit.Hear(a, stale) // the refusal's notice, delivered late
	wantShare(t, la, "g", 0, 2, "after the refusal's notice came late")
}

// The reverse: a reply computed before a notice that the holder has
// already used is older news. A asks for a second permit of 2 and Redis
// grants it while nobody waits; the reply is held up on its way. B, then
// refused, waits, and its notice gives A a cap of 1. The reply, used then,
// must not tell A that nobody waits.
func TestReplyOlderThanANoticeIsIgnored(t *testing.T) {
	addr := startRedis(t)
	a, b := newHolder(t, addr, manualRenewals()...), newHolder(t, addr, manualRenewals()...)
	subscribed(t, addr, 2, a)
	la, lb := a.Groups(2), b.Groups(2)
	na, _ := attach(t, la), attach(t, lb)
	pa := acquire(t, la, na, "g", 1, 5*time.Second)
	defer pa.Release()
	resume := park(a, func(h *redislimit.Holder, f func() error) {
		redislimit.SetReplyHook(h, f)
		if f != nil {
			if q, err := la.TryAcquire("g", 1); q != nil || err != nil {
				t.Errorf("A's second TryAcquire: %v, %v; want a refill", q, err)
			}
		}
	})
	defer resume()
	if q, err := lb.TryAcquire("g", 1); q != nil || err != nil {
		t.Fatalf("B's TryAcquire with the limit at A: %v, %v; want to wait", q, err)
	}
	eventually(t, "A hears that B waits", 5*time.Second, func() bool {
		o, c, _ := redislimit.Share(la, "g")
		return o == 1 && c == 1
	})
	drain(na)
	resume()
	waitFor(t, "A's grant used", na)
	wantShare(t, la, "g", 1, 1, "after the grant's reply, computed before B waited, came")
}

// A's waiting record is ended by an unwait that the op timeout abandoned
// on its way to Redis. A waits again meanwhile: Redis refuses it and
// records it anew. The late unwait must not end that newer record, or the
// others' caps stop counting a holder that waits (until its next refusal:
// a renewal round away, minutes here).
func TestLateUnwaitKeepsANewerWaitingRecord(t *testing.T) {
	addr := startRedis(t)
	rdb := newClient(t, addr)
	k := newFullKey(t, addr, redislimit.WithOpTimeout(200*time.Millisecond))
	a, la, na, pa := k.a, k.la, k.na, k.pa
	w, aid := "t:"+t.Name()+":{group:g}:w", a.ID()+"/1"
	recorded := func() bool { return rdb.ZScore(bg, w, aid).Err() == nil }
	// waitsAgain has A's task wait for a second permit: A is refused and
	// recorded as waiting.
	refusals := uint64(0)
	waitsAgain := func() {
		t.Helper()
		if q, err := la.TryAcquire("g", 1); q != nil || err != nil {
			t.Fatalf("A's TryAcquire with the limit out: %v, %v; want to wait", q, err)
		}
		refusals++
		eventually(t, "A refused", 5*time.Second, func() bool { return a.Stats().RefillsDenied == refusals })
		if !recorded() {
			t.Fatal("A refused but not recorded as waiting")
		}
	}
	// Once, with the unwait on time: Redis now knows the script, and a
	// late one is a single round trip.
	waitsAgain()
	drain(na)
	pa.Release()
	redislimit.RenewNow(a) // A's own permit serves the task: the demand is dropped
	waitFor(t, "A's executor told that a permit is at hand", na)
	eventually(t, "A's waiting record ends", 5*time.Second, func() bool { return !recorded() })
	pa = acquire(t, la, na, "g", 1, 5*time.Second)
	defer func() { pa.Release() }()

	waitsAgain()
	resume := park(a, func(h *redislimit.Holder, f func() error) {
		redislimit.SetUnwaitHook(h, f)
		if f != nil {
			pa.Release()
			redislimit.RenewNow(a)
		}
	})
	defer resume()
	// The unwait is on its way. A's next task takes the permit, and the one
	// after it waits: once the unwait is given up, A is refused again.
	pa = acquire(t, la, na, "g", 1, 5*time.Second)
	waitsAgain()
	trips := a.Stats().RoundTrips
	resume()
	eventually(t, "the late unwait reaches Redis", 5*time.Second, func() bool { return a.Stats().RoundTrips > trips })
	if !recorded() {
		t.Fatal("the late unwait ended A's newer waiting record: A waits, and Redis no longer counts it")
	}
}

// A process restarted with its predecessor's holder id (WithHolderID) is
// the same holder in Redis, but a process of its own: its calls are
// numbered from 1 again, and nothing orders them with the old process's.
// A late call of the old process must not end the new one's waiting
// record. The old process waits for key g and stops waiting (its own
// permit serves the task); the end of its record is abandoned by the op
// timeout on its way to Redis, and the process closes (its Close ends the
// record). The new one, with the same id, waits for g: Redis records it.
// The old call then reaches Redis, and must end nothing: else the others'
// caps stop counting a holder that waits (until its next refusal: a
// renewal round away, minutes here).
func TestLateUnwaitOfAnOlderProcessKeepsTheNewOnesRecord(t *testing.T) {
	addr := startRedis(t)
	rdb := newClient(t, addr)
	id := redislimit.WithHolderID("p")
	old := newHolder(t, addr, append(manualRenewals(), id, redislimit.WithOpTimeout(200*time.Millisecond))...)
	other := newHolder(t, addr, manualRenewals()...)
	lo, lx := old.Groups(2), other.Groups(2)
	no, nx := attach(t, lo), attach(t, lx)
	px := acquire(t, lx, nx, "g", 1, 5*time.Second)
	defer px.Release()
	po := acquire(t, lo, no, "g", 1, 5*time.Second)
	w := "t:" + t.Name() + ":{group:g}:w"
	recorded := func() bool { return rdb.ZScore(bg, w, "p/1").Err() == nil }
	if q, err := lo.TryAcquire("g", 1); q != nil || err != nil {
		t.Fatalf("the old process's TryAcquire with the limit out: %v, %v; want to wait", q, err)
	}
	eventually(t, "the old process refused", 5*time.Second, func() bool { return old.Stats().RefillsDenied == 1 })
	if !recorded() {
		t.Fatal("the old process refused but not recorded as waiting")
	}
	resume := park(old, func(h *redislimit.Holder, f func() error) {
		redislimit.SetUnwaitHook(h, f)
		if f != nil {
			po.Release()
			redislimit.RenewNow(old) // its own permit serves the task: the demand is dropped
		}
	})
	defer resume()
	if err := old.Close(); err != nil {
		t.Fatalf("the old process's Close: %v", err)
	}
	if recorded() {
		t.Fatal("the old process's Close left its waiting record")
	}

	fresh := newHolder(t, addr, append(manualRenewals(), id)...)
	lf := fresh.Groups(2)
	nf := attach(t, lf)
	pf := acquire(t, lf, nf, "g", 1, 5*time.Second)
	defer pf.Release()
	if q, err := lf.TryAcquire("g", 1); q != nil || err != nil {
		t.Fatalf("the new process's TryAcquire with the limit out: %v, %v; want to wait", q, err)
	}
	eventually(t, "the new process refused", 5*time.Second, func() bool { return fresh.Stats().RefillsDenied == 1 })
	if !recorded() {
		t.Fatal("the new process refused but not recorded as waiting")
	}
	closed := old.Stats().RoundTrips
	resume()
	eventually(t, "the old process's late unwait reaches Redis", 5*time.Second, func() bool { return old.Stats().RoundTrips > closed })
	if !recorded() {
		t.Fatal("the old process's late unwait ended the new process's waiting record")
	}
}

// The same with a late acquire that Redis grants: the old process asked
// for a permit, the call was abandoned on its way, and the process is gone
// (stopped: it sends nothing more). The new one, with the same id, waits
// for g, and permits free; before its own call can ask for them, the old
// call reaches Redis and is granted (a lease no one uses, which expires).
// It must not end the new process's record, which still waits.
func TestLateGrantOfAnOlderProcessKeepsTheNewOnesRecord(t *testing.T) {
	addr := startRedis(t)
	rdb := newClient(t, addr)
	id := redislimit.WithHolderID("p")
	old := newHolder(t, addr, append(manualRenewals(), id, redislimit.WithOpTimeout(200*time.Millisecond))...)
	other := newHolder(t, addr, manualRenewals()...)
	lo, lx := old.Groups(2), other.Groups(2)
	no, nx := attach(t, lo), attach(t, lx)
	px := acquire(t, lx, nx, "g", 1, 5*time.Second)
	po := acquire(t, lo, no, "g", 1, 5*time.Second)
	defer po.Release()
	// The old process asks for a second permit; the call is held on its
	// way, and the process stops.
	gate, parked := make(chan struct{}), make(chan struct{}, 1)
	redislimit.SetRefillHook(old, func() error {
		select {
		case parked <- struct{}{}:
		default:
		}
		<-gate
		return nil
	})
	defer func() {
		select {
		case <-gate:
		default:
			close(gate)
		}
	}()
	if q, err := lo.TryAcquire("g", 1); q != nil || err != nil {
		t.Fatalf("the old process's TryAcquire with the limit out: %v, %v; want to wait", q, err)
	}
	waitFor(t, "the old process's refill on its way", parked)
	defer redislimit.HoldLock(old)()

	// The new process waits for g (the old one's lease counts as its own:
	// the same id): Redis records it. Its own calls are then held too, so
	// that the old call is the first to reach Redis once permits free.
	fresh := newHolder(t, addr, append(manualRenewals(), id)...)
	lf := fresh.Groups(2)
	attach(t, lf)
	if q, err := lf.TryAcquire("g", 1); q != nil || err != nil {
		t.Fatalf("the new process's TryAcquire with the limit out: %v, %v; want to wait", q, err)
	}
	eventually(t, "the new process refused", 5*time.Second, func() bool { return fresh.Stats().RefillsDenied == 1 })
	w, n := "t:"+t.Name()+":{group:g}:w", "t:"+t.Name()+":{group:g}:n"
	recorded := func() bool { return rdb.ZScore(bg, w, "p/1").Err() == nil }
	if !recorded() {
		t.Fatal("the new process refused but not recorded as waiting")
	}
	freshGate := make(chan struct{})
	defer close(freshGate)
	redislimit.SetRefillHook(fresh, func() error { <-freshGate; return nil })
	// A permit frees (the other holder gives its permit back), and the old
	// call reaches Redis.
	px.Release()
	redislimit.RenewNow(other)
	redislimit.RenewNow(other)
	if s := other.Stats(); s.PermitsLeased != 0 {
		t.Fatalf("the other holder's stats %+v: want its permit given back", s)
	}
	close(gate)
	eventually(t, "the old process's late acquire granted", 5*time.Second, func() bool {
		return rdb.HLen(bg, n).Val() == 2
	})
	if !recorded() {
		t.Fatal("the old process's late grant ended the new process's waiting record")
	}
}

// The mirror of the above: A's refill, abandoned by the op timeout on its
// way to Redis, reaches it after A stopped waiting (its own permit served
// the task) and ended its waiting record. The late refill must not record
// A as waiting again: A would never end that record (it is not waiting),
// and it would split the others' caps with A until it expires.
func TestLateRefillDoesNotReviveAWaitingRecord(t *testing.T) {
	addr := startRedis(t)
	rdb := newClient(t, addr)
	k := newFullKey(t, addr, redislimit.WithOpTimeout(200*time.Millisecond))
	a, la, na, pa := k.a, k.la, k.na, k.pa
	resume := park(a, func(h *redislimit.Holder, f func() error) {
		redislimit.SetRefillHook(h, f)
		if f != nil {
			if q, err := la.TryAcquire("g", 1); q != nil || err != nil {
				t.Errorf("A's TryAcquire with the limit out: %v, %v; want to wait", q, err)
			}
		}
	})
	defer resume()
	// The refill is on its way. A's task ends: once the refill is given
	// up, its permit serves the waiting task, and A ends its record.
	drain(na)
	pa.Release()
	waitFor(t, "A's executor told that a permit is at hand", na)
	trips := a.Stats().RoundTrips
	resume()
	eventually(t, "the late refill reaches Redis", 5*time.Second, func() bool { return a.Stats().RoundTrips > trips })
	w, aid := "t:"+t.Name()+":{group:g}:w", a.ID()+"/1"
	if s, err := rdb.ZScore(bg, w, aid).Result(); err == nil {
		t.Fatalf("the late refill recorded A as waiting (until %v) after A ended its record", s)
	}
}

// A renewal round drops the state of a key that has nothing left (no
// lease, no demand). A key whose waiting record is being ended, the call
// still on its way, is not such a key: if that call fails, the record must
// be ended again, and a dropped key is never served again (the record
// would split the others' caps with A until it expires: minutes here).
// Here A's unwait fails twice (at once, and again in the next pass); the
// retry due a poll interval later is held on its way while a round runs,
// then fails too.
func TestRenewalRoundKeepsAKeyWhoseUnwaitIsInFlight(t *testing.T) {
	addr := startRedis(t)
	rdb := newClient(t, addr)
	k := newFullKey(t, addr)
	a, la, pa := k.a, k.la, k.pa
	if q, err := la.TryAcquire("g", 1); q != nil || err != nil {
		t.Fatalf("A's TryAcquire with the limit out: %v, %v; want to wait", q, err)
	}
	eventually(t, "A refused", 5*time.Second, func() bool { return a.Stats().RefillsDenied == 1 })
	w, aid := "t:"+t.Name()+":{group:g}:w", a.ID()+"/1"
	if err := rdb.ZScore(bg, w, aid).Err(); err != nil {
		t.Fatalf("A refused but not recorded as waiting: %v", err)
	}
	lost := errors.New("an unwait lost (test)")
	calls := 0 // on the refiller's calls, one after the other
	resume := park(a, func(h *redislimit.Holder, f func() error) {
		if f == nil {
			redislimit.SetUnwaitHook(h, nil)
			return
		}
		redislimit.SetUnwaitHook(h, func() error {
			if calls++; calls > 2 {
				f() // held until resume
			}
			return lost
		})
		// A's own permit serves its task: the demand is dropped, and the
		// record's end fails, then is sent again. The round sees the
		// permit free.
		pa.Release()
		redislimit.RenewNow(a)
	})
	defer resume()
	// Free throughout a round: the permit goes back, and A holds nothing
	// of the key.
	redislimit.RenewNow(a)
	if s := a.Stats(); s.PermitsLeased != 0 {
		t.Fatalf("A's stats %+v: want its permit given back", s)
	}
	resume() // the retry fails too, and is sent again
	eventually(t, "A's waiting record ends", 5*time.Second, func() bool {
		return errors.Is(rdb.ZScore(bg, w, aid).Err(), redis.Nil)
	})
}

// A notice that permits were freed can come before the reply to a refill
// that Redis refused just before they were freed: the refusal, used after
// it, must not make the holder wait for a notice that has come already
// (until its next renewal round, minutes here). Limit 1: A holds the
// permit; B asks, and Redis refuses it; its reply is held up. A gives the
// permit back, and B hears of it; then B uses the refusal. B must ask
// again, and get the permit, without a task of it asking again.
func TestFreedNoticeBeforeTheRefusalWakesTheWaiter(t *testing.T) {
	addr := startRedis(t)
	a, b := newHolder(t, addr, manualRenewals()...), newHolder(t, addr, manualRenewals()...)
	subscribed(t, addr, 2, a)
	la, lb := a.Groups(1), b.Groups(1)
	na, nb := attach(t, la), attach(t, lb)
	pa := acquire(t, la, na, "g", 1, 5*time.Second)
	// A permit of another key at B, for the marker below.
	ps := acquire(t, lb, nb, "s", 1, 5*time.Second)
	defer ps.Release()
	resume := park(b, func(h *redislimit.Holder, f func() error) {
		redislimit.SetReplyHook(h, f)
		if f != nil {
			if q, err := lb.TryAcquire("g", 1); q != nil || err != nil {
				t.Errorf("B's TryAcquire with the permit at A: %v, %v; want to wait", q, err)
			}
		}
	})
	defer resume()
	// B's refusal is in Redis (its reply is held), and told A that B
	// waits: A gives its idle permit back, and publishes that it did.
	rdb := newClient(t, addr)
	pa.Release()
	eventually(t, "A gives the permit back", 5*time.Second, func() bool {
		n, err := rdb.HLen(bg, "t:"+t.Name()+":{group:g}:n").Result()
		return err == nil && n == 0
	})
	// B hears the notices in the order they were published: once it has
	// heard this one (its cap of "s" is 0), it has heard that A freed g.
	marker := fmt.Sprintf("c|x|t:%s:{group:s}:l|%d|x=1w,%s/1=0", t.Name(), int64(1)<<62, b.ID())
	if err := rdb.Publish(bg, redislimit.Channel(b), marker).Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "B hears the marker", 5*time.Second, func() bool {
		o, c, _ := redislimit.Share(lb, "s")
		return o == 1 && c == 0
	})
	drain(nb)
	resume()
	if key := waitFor(t, "B told that a permit of g may be at hand", nb); key != "g" {
		t.Fatalf("B's executor told of %q; want g", key)
	}
	p := acquire(t, lb, nb, "g", 1, time.Second)
	p.Release()
}
