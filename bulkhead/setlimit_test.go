package bulkhead_test

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/bulkhead"
	"github.com/groupexec/groupexec/clock"
)

// hookClock is a fake clock that runs a function, once, inside the first
// Now after it is armed. A fast acquire with a clock given to WithClock
// reads it between its reading of the limit and its compare-and-swap, so
// the function runs in that gap, where no sleep could place it.
type hookClock struct {
	*clock.Fake
	hook atomic.Pointer[func()]
}

func (c *hookClock) Now() time.Time {
	if f := c.hook.Swap(nil); f != nil {
		(*f)()
	}
	return c.Fake.Now()
}

// A fast acquire that read the limit before a SetLimit lowered it must not
// be issued on the old limit: lowering it (without starting a drain) sets
// and clears the slow flag, which alone would leave the state word as the
// acquire read it, so SetLimit consumes an ID to change it (state.go).
func TestFastAcquireNeverIssuesOnALimitLoweredBeforeItsSwap(t *testing.T) {
	clk := &hookClock{Fake: clock.NewFake(t0)}
	b := newBH(t, 3, bulkhead.WithClock(clk))
	held, err := b.TryAcquire(bg, 1)
	if err != nil {
		t.Fatal(err)
	}
	lower := func() {
		if err := b.SetLimit(2); err != nil { // 1 in flight: no drain
			t.Error(err)
		}
	}
	clk.hook.Store(&lower)
	p, err := b.TryAcquire(bg, 2) // fits 3, not 2
	if clk.hook.Load() != nil {
		t.Fatal("the acquire never read the clock: the test no longer reaches the gap")
	}
	if err == nil {
		t.Fatalf("permit %d of weight 2 issued with limit %d in force and %d in flight (permit's limit %d)",
			p.ID(), b.Limit(), b.InFlight(), p.Limit())
	}
	wantErr(t, err, bulkhead.ErrAtCapacity)
	if got := b.InFlight(); got != 1 {
		t.Fatalf("in flight %d, want 1", got)
	}
	release(t, b, held)
}

// SetLimit to the limit already in force changes nothing: no
// EventCapChanged (it reports a change), and no ID consumed (Permit.ID: only
// a SetLimit that changes the limit consumes one).
func TestSetLimitToTheSameLimitChangesNothing(t *testing.T) {
	b := newBH(t, 2, bulkhead.WithEventLog(16))
	p := acquire(t, b, 1)
	release(t, b, p)
	before := len(b.Events())
	if err := b.SetLimit(2); err != nil {
		t.Fatal(err)
	}
	if evs := b.Events()[before:]; len(evs) != 0 {
		t.Fatalf("SetLimit to the same limit recorded %v", evs)
	}
	q := acquire(t, b, 1)
	if q.ID() != p.ID()+1 {
		t.Fatalf("permit after SetLimit to the same limit has ID %d, want %d", q.ID(), p.ID()+1)
	}
	release(t, b, q)
}

// A raise that ends a drain records its end, as a release that ends one
// does: observers that show a drain going on must see it end either way.
func TestRaiseThatEndsADrainRecordsDrainComplete(t *testing.T) {
	b := newBH(t, 2, bulkhead.WithEventLog(16))
	p := acquire(t, b, 2)
	if err := b.SetLimit(1); err != nil { // 2 in flight: a drain starts
		t.Fatal(err)
	}
	if !b.Draining() {
		t.Fatal("lowering the limit below in-flight started no drain")
	}
	before := len(b.Events())
	if err := b.SetLimit(3); err != nil { // 2 in flight, below 3: the drain ends
		t.Fatal(err)
	}
	if b.Draining() {
		t.Fatal("raising the limit above in-flight left the drain on")
	}
	var codes []string
	for _, e := range b.Events()[before:] {
		codes = append(codes, e.Code)
	}
	want := []string{bulkhead.EventCapChanged, bulkhead.EventDrainComplete}
	if !slices.Equal(codes, want) {
		t.Fatalf("raise ending a drain recorded %v, want %v", codes, want)
	}
	release(t, b, p)
}
