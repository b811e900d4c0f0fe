package breaker

import (
	"testing"
	"unsafe"
)

// The package doc gives what a breaker allocates: 192 bytes for each
// generation, and 128 per cell once it has been contended. They are its
// layout's, one cache line per group of fields: a field added to the first
// line, or a line's padding miscounted, shows here before it shows in the
// doc's numbers. (The padding makes them the same on 32-bit platforms.)
func TestLayoutIsTheDocumentedSize(t *testing.T) {
	if got := unsafe.Sizeof(epoch{}); got != 192 {
		t.Errorf("an epoch takes %d bytes, the doc says 192", got)
	}
	if got := unsafe.Sizeof(cell{}); got != 128 {
		t.Errorf("a cell takes %d bytes, the doc says 128", got)
	}
	cb, err := New(Settings{})
	if err != nil {
		t.Fatal(err)
	}
	if n := cb.ncells; n < 4 || n > 64 || n&(n-1) != 0 {
		t.Errorf("%d cells, the doc says a power of two from 4 to 64", n)
	}
}
