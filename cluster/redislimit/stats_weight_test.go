package redislimit_test

import (
	"testing"
	"time"

	"github.com/groupexec/groupexec/cluster/redislimit/redistest"
)

// Stats.Acquired counts permits, as PermitsLeased, PermitsInUse and
// Returned do: a task of weight 3 takes 3 of a block's permits.
func TestAcquiredCountsPermitsNotTasks(t *testing.T) {
	addr := redistest.Shared(t)
	h := newHolder(t, addr)
	l := h.Groups(3)
	n := attach(t, l)
	p := acquire(t, l, n, "g", 3, 5*time.Second)
	if s := h.Stats(); s.Acquired != 3 || s.PermitsInUse != 3 {
		t.Fatalf("stats with a task of weight 3 running: %+v; want Acquired 3, PermitsInUse 3", s)
	}
	p.Release()
	acquire(t, l, n, "g", 1, 5*time.Second).Release()
	if s := h.Stats(); s.Acquired != 4 {
		t.Fatalf("stats after tasks of weight 3 and 1: %+v; want Acquired 4", s)
	}
}
