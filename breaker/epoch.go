package breaker

import (
	"math/bits"
	"sync/atomic"
	"time"
	"unsafe"
)

// An epoch is one period of the breaker: one state, from the change (or
// interval clearing) that began it to the one that ends it. Epochs are the
// breaker's generations: the breaker publishes its current epoch through one
// atomic pointer, so a state and the counts that belong to it are always
// read together, and a change of state (or a clearing) is one
// compare-and-swap of that pointer, which exactly one caller wins.
//
// A request remembers the epoch that admitted it and records its outcome
// there. Counts are never reset in place: a new epoch starts from zero, so
// an outcome arriving after its epoch ended lands in an epoch nobody reads
// any more, and cannot count toward the new state, nor trip or close it
// (its compare-and-swap fails).
//
// Its fields are laid out by cache line (192 bytes on 64-bit platforms, a
// size class whose objects start on a line): the first line is read by every
// request and written only when the epoch starts, the second holds the
// rarely written failure counts, the third the counters written by every
// request while the breaker is uncontended.
type epoch struct {
	epochHead
	_ [(cacheLine - unsafe.Sizeof(epochHead{})%cacheLine) % cacheLine]byte

	// Failures are rare, so they are never spread. The marks are the
	// successes seen at the last failure and the failures seen at the last
	// success; consecutive counts are the differences, so the hot success
	// path only reads failures and fMark and writes nothing else.
	failures atomic.Uint64
	sMark    atomic.Uint64
	fMark    atomic.Uint64
	_        [cacheLine - 24]byte

	// Requests and successes are the hot counters: in base until two
	// callers first collide on them, then spread over cells (see grow).
	base struct {
		n [2]atomic.Uint64
		_ [cacheLine - 16]byte
	}
}

type epochHead struct {
	cb    *CircuitBreaker
	state State
	fast  bool // closed without interval clearing: admit's short path
	// start is the clock reading the epoch began at, open or closed with an
	// Interval (otherwise zero). Durations are measured from it (now.Sub),
	// never against a precomputed end: start+Timeout (or Interval) past
	// 2157 would keep only the wall reading of clock.Real's readings, and
	// every comparison with it would follow wall-clock steps.
	start time.Time
	cells atomic.Pointer[cells]
	// done is what Allow returns for this closed epoch: shared by all its
	// requests, so that Allow allocates nothing.
	done func(success bool)
}

const cacheLine = 64

// The two hot counters of a cell.
const (
	kRequests  = 0
	kSuccesses = 1
)

// A cell holds one share of each hot counter, each alone on its cache line:
// two goroutines then slow each other down only by using the same counter of
// the same cell, which inc notices.
type cell struct {
	n [2]struct {
		v atomic.Uint64
		_ [cacheLine - 8]byte
	}
}

// cells is a power-of-two array of cells. Arrays of 128-byte cells fall in
// power-of-two size classes, so each cell starts on a cache line.
type cells struct {
	cellsHead
	// mult is read by every request: keep its line to itself.
	_ [(cacheLine - unsafe.Sizeof(cellsHead{})%cacheLine) % cacheLine]byte
}

type cellsHead struct {
	mult  atomic.Uint64 // the hash multiplier; changed when two goroutines share a cell
	shift uint          // 64 - log2(len(c))
	c     []cell
}

const phi = 0x9e3779b97f4a7c15 // 2^64 / the golden ratio, odd

func newCells(n int) *cells {
	cs := new(cells)
	cs.shift = uint(64 - bits.TrailingZeros(uint(n)))
	cs.c = make([]cell, n)
	cs.mult.Store(phi)
	return cs
}

// add increments counter k in the caller's cell and returns the cell.
//
// Goroutines run on distinct stacks, so the address of a local variable
// tells them apart at no cost; hashed, it sends the goroutines running at a
// time to different cells with high probability. When two share a cell
// anyway, a compare-and-swap fails, and a new multiplier deals every
// goroutine a new cell. Any cell is correct: the choice only spreads
// contention.
func (cs *cells) add(k int) int {
	var x byte
	i := int(uint64(uintptr(unsafe.Pointer(&x))) * cs.mult.Load() >> cs.shift)
	cs.inc(i, k)
	return i
}

// inc increments counter k of cell i.
func (cs *cells) inc(i, k int) {
	c := &cs.c[i].n[k].v
	if v := c.Load(); !c.CompareAndSwap(v, v+1) {
		cs.mult.Add(phi + 1) // phi is odd: stays odd
		c.Add(1)
	}
}

// casInc increments c unless another caller changes it at the same time.
func casInc(c *atomic.Uint64) bool {
	v := c.Load()
	return c.CompareAndSwap(v, v+1)
}

// noCell stands for "not counted yet" (admit) or "counted in an unknown
// place" (success).
const noCell = -2

// subAt takes back one increment of counter k made in cell i.
func (ep *epoch) subAt(k int, i int) {
	if i < 0 {
		ep.base.n[k].Add(^uint64(0))
		return
	}
	ep.cells.Load().c[i].n[k].v.Add(^uint64(0))
}

// grow spreads the hot counters over cells. It allocates once per breaker
// in the hot path: later closed epochs of a contended breaker are created
// with their cells (see newEpoch).
func (ep *epoch) grow(cb *CircuitBreaker) {
	cb.contended.Store(true)
	ep.cells.CompareAndSwap(nil, newCells(cb.ncells))
}

// sum returns counter k over base and the cells cs (nil: base only).
func (ep *epoch) sum(cs *cells, k int) uint64 {
	n := ep.base.n[k].Load()
	if cs != nil {
		for i := range cs.c {
			n += cs.c[i].n[k].v.Load()
		}
	}
	return n
}

// counts returns a snapshot of the epoch's counts. Every request is counted
// before its outcome, and the requests are read last, over every cell that
// exists by then, so TotalSuccesses+TotalFailures <= Requests holds however
// the reads interleave with updates. (Ignore takes a request back only from
// the cell it was counted in, and only for a request that records no
// outcome, so it cannot break this.) Marks are read before the totals they
// are subtracted from, so the differences never wrap.
func (ep *epoch) counts() Counts {
	sMark, fMark := ep.sMark.Load(), ep.fMark.Load()
	var c Counts
	c.TotalSuccesses = ep.sum(ep.cells.Load(), kSuccesses)
	c.TotalFailures = ep.failures.Load()
	c.Requests = ep.sum(ep.cells.Load(), kRequests)
	c.ConsecutiveSuccesses = c.TotalSuccesses - sMark
	c.ConsecutiveFailures = c.TotalFailures - fMark
	return c
}

// raise sets m to v unless it already holds v or more.
func raise(m *atomic.Uint64, v uint64) {
	for {
		old := m.Load()
		if v <= old || m.CompareAndSwap(old, v) {
			return
		}
	}
}
