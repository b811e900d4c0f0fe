package redislimit_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/groupexec/groupexec/cluster/redislimit"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// maxErrorLen bounds the text of an error that names a key: a long key is
// named by its name in Redis (its first 200 bytes and its SHA-256), and
// Redis's reply, which ErrKeyFailed carries, names one of its Redis keys.
const maxErrorLen = 1024

// redisName is the name a key over 200 bytes has in Redis.
func redisName(key string) string {
	sum := sha256.Sum256([]byte(key))
	return key[:200] + "#" + hex.EncodeToString(sum[:])
}

// An error that names a group key names a long one as its Redis keys do:
// by its first 200 bytes and its SHA-256. A client choosing a key of a
// megabyte (a tenant header) made each of these errors a megabyte, in
// every log line and refusal that carries it.
func TestErrorsNameALongKeyByItsRedisName(t *testing.T) {
	long := strings.Repeat("k", 1<<20)
	bounded := func(t *testing.T, what string, err error) {
		t.Helper()
		msg := err.Error()
		if len(msg) > maxErrorLen || !strings.Contains(msg, redisName(long)) {
			t.Errorf("%s: an error of %d bytes (%.80q...); want at most %d, naming the key by its Redis name",
				what, len(msg), msg, maxErrorLen)
		}
	}

	t.Run("limit below 1", func(t *testing.T) {
		h := newHolder(t, startRedis(t), manualRenewals()...)
		l := h.GroupsFunc(func(string) int { return 0 })
		attach(t, l)
		p, err := l.TryAcquire(long, 1)
		if p != nil || err == nil {
			t.Fatalf("TryAcquire under a limit of 0: %v, %v; want refused", p, err)
		}
		bounded(t, "TryAcquire under a limit of 0", err)
	})

	t.Run("key failed", func(t *testing.T) {
		addr := startRedis(t)
		if err := newClient(t, addr).HSet(bg, "t:"+t.Name()+":{group:"+redisName(long)+"}:v", "x", 1).Err(); err != nil {
			t.Fatal(err)
		}
		h := newHolder(t, addr, manualRenewals()...)
		l := h.Groups(2)
		ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(4)}, l, nil)
		r, err := runOne(t, ex, long)
		if err != nil || r.Status != executor.Rejected || !errors.Is(r.Err, redislimit.ErrKeyFailed) {
			t.Fatalf("task of a key whose data Redis cannot use: %v %v %v; want Rejected with ErrKeyFailed", r.Status, r.Err, err)
		}
		// The limiter's own error, as it refuses the key's next task
		// within the renew interval (the executor's rejection, which
		// carries it, names the group itself).
		p, err := l.TryAcquire(long, 1)
		if p != nil || !errors.Is(err, redislimit.ErrKeyFailed) {
			t.Fatalf("TryAcquire of the failed key: %v, %v; want ErrKeyFailed", p, err)
		}
		bounded(t, "ErrKeyFailed", err)
	})

	t.Run("lease lost", func(t *testing.T) {
		bounded(t, "LeaseLostError", &redislimit.LeaseLostError{Key: long, Token: 7, Reason: "not renewed in time"})
	})

	t.Run("short key as it is", func(t *testing.T) {
		msg := (&redislimit.LeaseLostError{Key: "acme", Token: 7, Reason: "not renewed in time"}).Error()
		if want := `redislimit: lease lost (key "acme", token 7): not renewed in time`; msg != want {
			t.Errorf("LeaseLostError: %q; want %q", msg, want)
		}
	})
}

// Redis's reply to a script that finds a key holding no number where it
// reads one (written by something else) quotes the first 64 bytes of the
// value and says its length: it quoted the whole value, of any length,
// and ErrKeyFailed carries the reply in every refusal of the key's tasks.
func TestKeyErrorQuotesTheStartOfALongValue(t *testing.T) {
	long := strings.Repeat("k", 1<<20)
	addr := startRedis(t)
	if err := newClient(t, addr).Set(bg, "t:"+t.Name()+":{group:a}:f", long, 0).Err(); err != nil {
		t.Fatal(err)
	}
	h := newHolder(t, addr, manualRenewals()...)
	l := h.Groups(2)
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(4)}, l, nil)
	r, err := runOne(t, ex, "a")
	if err != nil || r.Status != executor.Rejected || !errors.Is(r.Err, redislimit.ErrKeyFailed) {
		t.Fatalf("task of a key whose counter is no number: %v %v %v; want Rejected with ErrKeyFailed", r.Status, r.Err, err)
	}
	p, err := l.TryAcquire("a", 1)
	if p != nil || !errors.Is(err, redislimit.ErrKeyFailed) ||
		!strings.Contains(err.Error(), `holds "kkkk`) || !strings.Contains(err.Error(), `k"... (1048576 bytes), not a number`) {
		t.Fatalf("TryAcquire of the failed key: %v, %.200v; want ErrKeyFailed, quoting the start of what is not a number", p, err)
	}
	if len(err.Error()) > maxErrorLen {
		t.Errorf("ErrKeyFailed: an error of %d bytes; want at most %d", len(err.Error()), maxErrorLen)
	}
}
