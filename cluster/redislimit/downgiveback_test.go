package redislimit_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/cluster/redislimit"
)

// While the holder is down, the executors of the keys whose tasks wait for
// a refill are told at once, and no call to Redis is made for them: a
// give-back of another key due in the same pass of the refiller (permits
// above a lowered limit, here) must not hold those notices up for a call
// to a Redis the holder cannot reach (an op timeout, or, here, a release
// hook that never returns). It is sent once Redis answers again.
func TestDownTellsWaitersWithoutWaitingForAGiveBack(t *testing.T) {
	addr := startRedis(t)
	var limB atomic.Int64
	limB.Store(2)
	h := newHolder(t, addr, append(manualRenewals(), redislimit.WithOpTimeout(time.Minute))...)
	l := h.GroupsFunc(func(g string) int {
		if g == "b" {
			return int(limB.Load())
		}
		return 1
	})
	n := make(notifier, 16)
	if err := l.Attach(n.notify); err != nil {
		t.Fatal(err)
	}
	other := newHolder(t, addr, manualRenewals()...)
	lo := other.Groups(1)
	held := acquire(t, lo, attach(t, lo), "g", 1, 5*time.Second)
	defer held.Release()

	py := acquire(t, l, n, "y", 1, 5*time.Second) // a lease, for the renewal rounds to fail on
	defer py.Release()
	pb := acquire(t, l, n, "b", 1, 5*time.Second)
	if q, err := l.TryAcquire("g", 1); q != nil || err != nil {
		t.Fatalf("TryAcquire(g) while the other holder holds it: %v, %v; want to wait", q, err)
	}
	eventually(t, "g refused", 5*time.Second, func() bool { return h.Stats().RefillsDenied == 1 })
	limB.Store(1)
	redislimit.RenewNow(h) // b's limit lowered: its permits go back as its tasks end

	// The refiller is held in a refill of x while the holder goes down
	// and b's task ends; then that refill fails.
	parked, gate := make(chan struct{}), make(chan struct{})
	var once sync.Once
	redislimit.SetRefillHook(h, func() error {
		once.Do(func() { close(parked) })
		<-gate
		return errors.New("cut off")
	})
	if q, err := l.TryAcquire("x", 1); q != nil || err != nil {
		t.Fatalf("TryAcquire(x): %v, %v; want to wait", q, err)
	}
	<-parked
	redislimit.SetRenewHook(h, func() error { return errors.New("cut off") })
	for range 3 {
		redislimit.RenewNow(h)
	}
	if m := h.Stats().Mode; m != redislimit.ModeDown {
		t.Fatalf("mode %v after three failed rounds, want down", m)
	}
	pb.Release()
	releases := make(chan struct{})
	redislimit.SetReleaseHook(h, func() error { <-releases; return nil })
	defer close(releases)
	drain(n)
	close(gate)
	for k := ""; k != "g"; {
		k = waitFor(t, "the executor of g told that the holder is down", n)
	}
}
