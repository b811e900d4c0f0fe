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

// An executor's notify that ends its goroutine with runtime.Goexit when the
// refiller tells it of a block must not end the refiller: the holder's
// other keys would never be leased again.
func TestGoexitInNotifyKeepsTheRefillerServing(t *testing.T) {
	addr := startRedis(t)
	h := newHolder(t, addr)
	l := h.Groups(1)
	n := make(notifier, 1)
	if err := l.Attach(func(key string) {
		if key == "x" {
			runtime.Goexit()
		}
		n.notify(key)
	}); err != nil {
		t.Fatal(err)
	}
	if p, err := l.TryAcquire("x", 1); p != nil || err != nil {
		t.Fatalf("first TryAcquire(x): %v %v; want a wait", p, err)
	}
	eventually(t, "x leased", 10*time.Second, func() bool { return h.Stats().Leases == 1 })
	p := acquire(t, l, n, "y", 1, 10*time.Second)
	p.Release()
}

// A listener that ends its goroutine with runtime.Goexit on an event of the
// renewal loop (here the outage it reports) must not end the loop: it is
// what probes Redis while the holder is down, and the holder would read
// down for good.
func TestGoexitInListenerKeepsTheRenewalLoop(t *testing.T) {
	addr := startRedis(t)
	exited := make(chan struct{}, 1)
	// A lease that outlasts the test: only the renewal loop calls Redis.
	h := newHolder(t, addr, redislimit.WithLeaseTTL(time.Minute), redislimit.WithListener(func(e redislimit.Event) {
		if e.Kind == redislimit.EventUnavailable {
			select {
			case exited <- struct{}{}:
			default:
			}
			runtime.Goexit()
		}
	}))
	l := h.Groups(1)
	p := acquire(t, l, attach(t, l), "g", 1, 5*time.Second) // a lease to renew: the rounds call Redis
	defer p.Release()
	redislimit.SetRenewHook(h, func() error { return errors.New("Redis cut off (test)") })
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("no outage reported")
	}
	redislimit.SetRenewHook(h, nil)
	eventually(t, "the holder up again", 10*time.Second, func() bool { return h.Stats().Mode == redislimit.ModeUp })
}

// A listener that closes its holder (here on an outage) must not hang: the
// holder's goroutine that called it waits for it, and Close waits for that
// goroutine. Called from the listener, Close begins the close and returns;
// a later Close waits for that close to end, and no goroutine of the holder
// is left (goleak).
func TestCloseFromTheListenerDoesNotHang(t *testing.T) {
	addr := startRedis(t)
	var h *redislimit.Holder
	ready := make(chan struct{})
	closed := make(chan error, 1)
	h = newHolder(t, addr, redislimit.WithListener(func(e redislimit.Event) {
		if e.Kind != redislimit.EventUnavailable {
			return
		}
		<-ready
		closed <- h.Close()
	}))
	close(ready)
	l := h.Groups(1)
	attach(t, l)
	// Three refills fail in a row: the refiller emits EventUnavailable.
	redislimit.SetRefillHook(h, func() error { return errors.New("Redis cut (test)") })
	if p, err := l.TryAcquire("g", 1); p != nil || err != nil {
		t.Fatalf("TryAcquire with no lease: %v, %v", p, err)
	}
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close from the listener: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close called from the listener has not returned within 10s")
	}
	closeWithin(t, h, 10*time.Second)
	if m := h.Stats().Mode; m != redislimit.ModeClosed {
		t.Fatalf("mode %v after Close; want closed", m)
	}
	if _, err := l.TryAcquire("g", 1); !errors.Is(err, redislimit.ErrClosed) {
		t.Fatalf("TryAcquire after Close: %v; want ErrClosed", err)
	}
}
