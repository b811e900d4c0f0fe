package redislimit_test

import (
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/cluster/redislimit"
)

// closeWithin closes h on a goroutine of its own and fails the test if it
// has not returned within limit (a hang guard only: it returns at once
// when nothing holds it).
func closeWithin(t *testing.T, h interface{ Close() error }, limit time.Duration) {
	t.Helper()
	closed := make(chan error, 1)
	go func() { closed <- h.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(limit):
		t.Fatalf("Close has not returned within %v", limit)
	}
}

// An executor's notify that ends its goroutine with runtime.Goexit when a
// lease's timer finds it lost (the timer's goroutine calls it) must not
// leave that give-back counted in the holder's wait group: Close would wait
// for it for ever. The lease is still given back.
func TestGoexitInNotifyOnLeaseExpiryLetsCloseReturn(t *testing.T) {
	addr := startRedis(t)
	h := newHolder(t, addr)
	l := h.Groups(1)
	var exit atomic.Bool
	exited := make(chan struct{}, 1)
	n := make(notifier, 1)
	if err := l.Attach(func(key string) {
		if exit.Load() {
			select {
			case exited <- struct{}{}:
			default:
			}
			runtime.Goexit()
		}
		n.notify(key)
	}); err != nil {
		t.Fatal(err)
	}
	p := acquire(t, l, n, "g", 1, 5*time.Second)
	defer p.Release()
	exit.Store(true)
	redislimit.SetRenewHook(h, func() error { return errors.New("renewals cut (test)") })
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the lease was not lost")
	}
	redislimit.SetRenewHook(h, nil)
	closeWithin(t, h, 10*time.Second)
	nKey := "t:" + t.Name() + ":{group:g}:n"
	if n, err := newClient(t, addr).HLen(bg, nKey).Result(); err != nil || n != 0 {
		t.Fatalf("HLEN %s = %d, %v after Close; want the expired lease given back", nKey, n, err)
	}
}
