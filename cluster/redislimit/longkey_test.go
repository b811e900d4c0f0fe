package redislimit_test

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/groupexec/groupexec/cluster/redislimit"
	"github.com/redis/go-redis/v9"
)

// TestLongKeysAreNamedByTheirHash: a group key over 200 bytes names its
// Redis keys by its first 200 bytes and its SHA-256, so that a client
// choosing a key of a megabyte (a tenant header) costs Redis, and the
// holder, a few hundred bytes a Redis key, not ten megabytes for twice the
// TTL. Long keys that share their first 200 bytes are separate limits; a
// key of 200 bytes keeps the name it always had; two holders agree on a
// long key's limit; a contention notice finds it by its name in Redis,
// and the holder forgets it once idle by both names.
func TestLongKeysAreNamedByTheirHash(t *testing.T) {
	addr := startRedis(t)
	a, b := newHolder(t, addr), newHolder(t, addr)
	subscribed(t, addr, 2, a, b)
	la, lb := a.Groups(1), b.Groups(1)
	long := strings.Repeat("x", 1<<20)
	one, two, atBound := long+"1", long+"2", strings.Repeat("y", 200)
	na, nb := attach(t, la), make(notifier, 1)
	start, got := laterWaitingTask(t, lb, nb, one, 1)

	p := acquire(t, la, na, one, 1, 5*time.Second)
	acquire(t, lb, nb, two, 1, 5*time.Second).Release() // two is a limit of its own
	acquire(t, lb, nb, atBound, 1, 5*time.Second).Release()
	start()
	if q, err := lb.TryAcquire(one, 1); q != nil || err != nil { // held by a: b waits
		t.Fatalf("TryAcquire with the limit held elsewhere: %v, %v", q, err)
	}
	for _, c := range []struct {
		l   *redislimit.Limiter
		key string
	}{{la, one}, {lb, two}, {lb, atBound}} {
		if found, n := redislimit.KeyStateByName(c.l, c.key); !found || n > 400 {
			t.Errorf("key of %d bytes: found by its Redis name %v, name of %d bytes; want found, at most 400", len(c.key), found, n)
		}
	}

	c := newClient(t, addr)
	prefix := "t:" + t.Name() + ":"
	if n, err := c.Exists(bg, prefix+"{group:"+atBound+"}:l").Result(); err != nil || n != 1 {
		t.Errorf("the leases key of a 200-byte key under its own name: %d, %v; want it there", n, err)
	}
	keys, err := c.Keys(bg, prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	var used int64
	for _, k := range keys {
		if len(k) > 400 {
			t.Errorf("a Redis key of %d bytes (%.60q...)", len(k), k)
		}
		m, err := c.MemoryUsage(bg, k).Result()
		if err == redis.Nil {
			continue // expired since
		}
		if err != nil {
			t.Fatal(err)
		}
		used += m
	}
	if used > 64<<10 {
		t.Errorf("the limits' Redis keys use %d bytes, want under 64 KiB", used)
	}

	p.Release()
	redislimit.RenewNow(a) // gives a's idle permit back
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("b not granted the long key's permit a gave back")
	}
	// a forgets the long key once idle, by either of its names.
	eventually(t, "a forgot the idle long key", 10*time.Second, func() bool {
		redislimit.RenewNow(a)
		found, _ := redislimit.KeyStateByName(la, one)
		return !found && redislimit.HashedKeys(la) == 0
	})
}

// A contention notice names a long key by its hashed name: a holder of the
// key still hears that another holder waits for it, and its share, by that
// name. Renewal rounds are minutes away, so only the notice can tell it.
func TestNoticeOfALongKey(t *testing.T) {
	addr := startRedis(t)
	a, b := newHolder(t, addr, manualRenewals()...), newHolder(t, addr, manualRenewals()...)
	subscribed(t, addr, 2, a)
	la, lb := a.Groups(1), b.Groups(1)
	na, _ := attach(t, la), attach(t, lb)
	key := strings.Repeat("t", 300)
	p := acquire(t, la, na, key, 1, 5*time.Second)
	defer p.Release()
	if q, err := lb.TryAcquire(key, 1); q != nil || err != nil {
		t.Fatalf("B's TryAcquire with the limit at A: %v, %v; want to wait", q, err)
	}
	eventually(t, "A hears that B waits for the long key", 5*time.Second, func() bool {
		others, c, _ := redislimit.Share(la, key)
		return others == 1 && c == 0
	})
}

// A long key is cut at byte 200 whatever it holds there: the middle of a
// multi-byte rune, or the separators of Redis keys and contention notices
// ('|', '}', ':', ',', '=', '#') before it. Its name still finds its state
// when a notice names it; and a key spelled as another's hashed name, being
// over 200 bytes itself, is hashed in turn: a limit of its own, which the
// other's notices leave alone.
func TestLongKeyCutMidRuneAfterSeparators(t *testing.T) {
	addr := startRedis(t)
	a, b := newHolder(t, addr, manualRenewals()...), newHolder(t, addr, manualRenewals()...)
	subscribed(t, addr, 2, a, b)
	la, lb := a.Groups(1), b.Groups(1)
	na, nb := attach(t, la), attach(t, lb)
	key := "a|b}:l|1|2|c=3,{x}#" + strings.Repeat("é", 150)
	if utf8.ValidString(key[:200]) {
		t.Fatal("the key's first 200 bytes end on a whole rune")
	}
	sum := sha256.Sum256([]byte(key))
	lookalike := key[:200] + "#" + hex.EncodeToString(sum[:])

	p := acquire(t, la, na, key, 1, 5*time.Second)
	defer p.Release()
	q := acquire(t, lb, nb, lookalike, 1, 5*time.Second) // not key's limit, held by a
	defer q.Release()
	for _, c := range []struct {
		l   *redislimit.Limiter
		key string
	}{{la, key}, {lb, lookalike}} {
		if found, _ := redislimit.KeyStateByName(c.l, c.key); !found {
			t.Errorf("key %.30q... not found by its Redis name", c.key)
		}
	}
	if r, err := lb.TryAcquire(key, 1); r != nil || err != nil {
		t.Fatalf("B's TryAcquire with the limit at A: %v, %v; want to wait", r, err)
	}
	eventually(t, "A hears that B waits for the key", 5*time.Second, func() bool {
		others, c, _ := redislimit.Share(la, key)
		return others == 1 && c == 0
	})
	if others, c, _ := redislimit.Share(lb, lookalike); others != 0 || c != 1 {
		t.Errorf("the lookalike's share at B: %d others, cap %d; want 0, 1", others, c)
	}
}

// A long key seen for the first time is named (the SHA-256 of the whole
// key) without the holder's lock, which every key's tasks, the refiller
// and the renewal loop share: hashing a client's key of a megabyte held
// them all up meanwhile. It is named once: the key's next tasks, and the
// keys at or under 200 bytes, hash nothing.
func TestLongKeyIsNamedWithoutTheLock(t *testing.T) {
	h := newHolder(t, startRedis(t), manualRenewals()...)
	named := make(chan bool, 10)
	redislimit.SetNameHook(h, 10*time.Second, func(lockFree bool) { named <- lockFree })
	l := h.Groups(1)
	n := attach(t, l)
	long := strings.Repeat("n", 1<<20)
	for _, key := range []string{long, long, strings.Repeat("s", 200)} {
		acquire(t, l, n, key, 1, 30*time.Second).Release() // past the hook's wait
	}
	if got := len(named); got != 1 {
		t.Fatalf("keys named by their hash: %d; want 1, the long key's first task", got)
	}
	if !<-named {
		t.Fatal("the long key was named while holding the holder's lock")
	}
}
