//go:build amd64 || arm64

// The offsets below are those of a 64-bit platform.

package executor

import (
	"testing"
	"unsafe"
)

// The fields a refusal of a full group reads lie on the group's first
// three cache lines (group's comment): a field added or moved among them
// would spread the refusal over more lines again.
func TestGroupHotFieldsShareTheirCacheLines(t *testing.T) {
	var g group
	// A group is over 512 bytes: the allocator puts an 8-byte header
	// before it, and line k holds the offsets [64k-8, 64k+56).
	if size := unsafe.Sizeof(g); size <= 512 {
		t.Fatalf("group is %d bytes: it has no allocation header, and its lines start at 0", size)
	}
	line := func(off uintptr) uintptr { return (off + 8) / 64 }
	for _, f := range []struct {
		name     string
		off, len uintptr
		line     uintptr
	}{
		{"key", unsafe.Offsetof(g.key), unsafe.Sizeof(g.key), 0},
		{"mu", unsafe.Offsetof(g.mu), unsafe.Sizeof(g.mu), 0},
		{"inFlight", unsafe.Offsetof(g.inFlight), unsafe.Sizeof(g.inFlight), 0},
		{"br", unsafe.Offsetof(g.br), unsafe.Sizeof(g.br), 0},
		{"refusing", unsafe.Offsetof(g.refusing), unsafe.Sizeof(g.refusing), 0},
		{"laneOpen", unsafe.Offsetof(g.laneOpen), unsafe.Sizeof(g.laneOpen), 0},
		{"shutdown", unsafe.Offsetof(g.shutdown), 1, 0},
		{"dead", unsafe.Offsetof(g.dead), 1, 0},
		{"resync", unsafe.Offsetof(g.resync), 1, 0},
		{"limits", unsafe.Offsetof(g.limits), unsafe.Sizeof(g.limits), 1},
		{"refused", unsafe.Offsetof(g.refused), unsafe.Sizeof(g.refused), 1},
		{"runningTasks", unsafe.Offsetof(g.runningTasks), unsafe.Sizeof(g.runningTasks), 1},
		{"counts", unsafe.Offsetof(g.counts), unsafe.Sizeof(g.counts), 2},
		{"lane", unsafe.Offsetof(g.lane), unsafe.Sizeof(g.lane), line(unsafe.Offsetof(g.lane))},
	} {
		if first, last := line(f.off), line(f.off+f.len-1); first != f.line || last != f.line {
			t.Errorf("%s (offset %d, %d bytes) is on lines %d-%d, want line %d only", f.name, f.off, f.len, first, last, f.line)
		}
	}
}
