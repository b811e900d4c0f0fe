package redislimit_test

// What a holder hears of a key comes by two ways that keep no order
// between them (replies to its calls, contention notices on its
// subscription), and its calls can reach Redis late (a call the op timeout
// abandoned is still on its way): older news must not undo newer.

import (
	"errors"
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
	if !strings.HasPrefix(stale, "w|"+b.ID()+"/1|") {
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
