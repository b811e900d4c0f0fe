package bulkhead_test

import (
	"errors"
	"testing"

	"github.com/groupexec/groupexec/bulkhead"
)

// A refused TryAcquire of a full bulkhead allocates nothing once it has
// refused the same way before: the refusal is the last one's.
func TestRepeatedRefusalAllocatesNothing(t *testing.T) {
	clk := &countingClock{fakeNow: fakeNow{t0}}
	b := newBH(t, 2, bulkhead.WithClock(clk))
	held := acquire(t, b, 2)
	refuse := func() {
		if _, err := b.TryAcquire(bg, 1); !errors.Is(err, bulkhead.ErrAtCapacity) {
			t.Fatal(err)
		}
	}
	refuse()
	if n := testing.AllocsPerRun(1000, refuse); n != 0 {
		t.Errorf("%v allocations per repeated refusal, want 0", n)
	}
	release(t, b, held)
}
