package groupsem_test

import (
	"math"
	"testing"

	"github.com/groupexec/groupexec/internal/groupsem"
)

// Fits, TryAcquire and Acquire compare a request with the permits left,
// never the sum of use and request with the limit: near math.MaxInt (the
// policy's Unlimited) that sum overflows to a negative number, and an
// overflowing check would let a request in that does not fit.
func TestCountsNearMaxInt(t *testing.T) {
	for _, c := range []struct {
		limit, used, n int
		want           bool
	}{
		{math.MaxInt, 1, math.MaxInt, false},
		{math.MaxInt, math.MaxInt, 1, false},
		{math.MaxInt, math.MaxInt - 1, 1, true},
		{math.MaxInt, math.MaxInt - 1, 2, false},
		{math.MaxInt, 0, math.MaxInt, true},
		{math.MaxInt - 1, 2, math.MaxInt - 2, false},
	} {
		if got := groupsem.Fits(c.limit, c.used, c.n); got != c.want {
			t.Errorf("Fits(%d, %d, %d) = %v, want %v", c.limit, c.used, c.n, got, c.want)
		}
		s := groupsem.New(c.limit)
		s.Acquire(c.used)
		if got := s.TryAcquire(c.n); got != c.want {
			t.Errorf("Sem{limit %d, used %d}.TryAcquire(%d) = %v, want %v", c.limit, c.used, c.n, got, c.want)
		}
		want := c.used
		if c.want {
			want += c.n
		}
		if s.Used() != want {
			t.Errorf("Sem{limit %d, used %d}: used %d after TryAcquire(%d), want %d", c.limit, c.used, s.Used(), c.n, want)
		}
	}

	s := groupsem.New(math.MaxInt)
	s.Acquire(1)
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Acquire(MaxInt) with 1 in use of MaxInt did not panic")
			}
		}()
		s.Acquire(math.MaxInt)
	}()
	if s.Used() != 1 || s.Available() != math.MaxInt-1 {
		t.Errorf("after a refused Acquire: used %d, available %d", s.Used(), s.Available())
	}
}
