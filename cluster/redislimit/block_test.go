package redislimit_test

import (
	"testing"
	"time"

	"github.com/groupexec/groupexec/cluster/redislimit"
	"github.com/groupexec/groupexec/executor"
)

// TestBlockDoublesUpToMaxBlockAndHalvesWhenUnused pins the block size the
// package doc promises: a key's first block is one permit, the block
// doubles each time the key needs another within a renew interval, up to
// WithMaxBlock, and halves when a renewal round gives back permits that
// went unused.
func TestBlockDoublesUpToMaxBlockAndHalvesWhenUnused(t *testing.T) {
	addr := startRedis(t)
	h := newHolder(t, addr, append(manualRenewals(), redislimit.WithMaxBlock(4))...)
	l := h.Groups(100)
	n := attach(t, l)
	// Tasks take one permit each and keep it: each refill leases the
	// block, 1, 1, 2, 4 (the bound), 4; the permits at hand serve the
	// tasks in between.
	want := []struct{ refills, leased uint64 }{
		{1, 1}, {2, 2}, {3, 4}, {3, 4}, {4, 8}, {4, 8}, {4, 8}, {4, 8}, {5, 12},
	}
	var ps []executor.LimiterPermit
	for i, w := range want {
		ps = append(ps, acquire(t, l, n, "g", 1, 10*time.Second))
		if s := h.Stats(); s.Refills != w.refills || uint64(s.PermitsLeased) != w.leased {
			t.Fatalf("task %d: refills %d, permits leased %d; want %d, %d", i+1, s.Refills, s.PermitsLeased, w.refills, w.leased)
		}
	}
	// All but one end: 11 permits free for a whole renewal round go back,
	// and the block halves to 2.
	for _, p := range ps[1:] {
		p.Release()
	}
	defer ps[0].Release()
	redislimit.RenewNow(h) // the round in which they are free
	redislimit.RenewNow(h) // gives back what stayed free throughout
	if s := h.Stats(); s.PermitsLeased != 1 || s.Returned != 11 {
		t.Fatalf("after two renewal rounds: permits leased %d, returned %d; want 1, 11", s.PermitsLeased, s.Returned)
	}
	p := acquire(t, l, n, "g", 1, 10*time.Second)
	defer p.Release()
	if s := h.Stats(); s.Refills != 6 || s.PermitsLeased != 3 {
		t.Fatalf("the next task: refills %d, permits leased %d; want 6, 3 (a block of 2)", s.Refills, s.PermitsLeased)
	}
}
