package bulkhead

// The lock-free fast path.
//
// A fast TryAcquire+Release costs three atomic read-modify-writes, where a
// mutex costs four (Lock and Unlock, twice), all on one cache line.
//
// The state word packs [ID sequence, low 32 bits | slow flag | permits in
// use, 31 bits] (MaxLimit fits in 31 bits). A fast acquire is one
// compare-and-swap on it that both admits (in use += n) and issues the next
// ID (sequence += 1); the ID's high 32 bits are in hi, which changes only
// under the mutex when the sequence wraps (the fast path leaves the last
// IDs before a wrap to the mutex, so a fast acquire that read the state word
// and then hi read the hi of its ID: a wrap in between would have changed
// the word and failed its swap). The slow flag sends every acquire to the
// mutex, and every release past it after its count: lock() sets it as it
// takes the mutex, and it stays set while requests wait or a lowered limit
// drains. So while lock() is held nothing but releases changes the state
// word: the locked side decides on a reading that can only grow more
// permissive, and a release that frees room for a waiter finds the flag and
// dispatches. A fast acquire that read the limit and the state word succeeds
// only if the state word did not change in between, so it saw the limit in
// force at its swap: SetLimit stores the limit under the mutex and then
// consumes an ID (a "ghost"), so the word never comes back to an earlier
// value. (Exact unless a goroutine stalls between two adjacent loads and its
// swap while 2^32 more IDs are issued, when the swap could succeed on a word
// that came back to the same value; the standard bound of a sequence-tagged
// compare-and-swap.)
//
// The release frontiers detect double releases with no write on acquire and
// no read either. IDs are consecutive (1, 2, 3, ...; a ghost is issued and
// released at once). frontier(id) is one of W words, the
// same for every ID of one residue mod W; it holds the highest ID of that
// residue below which every ID of the residue is released or "converted"
// (below), as an int64 (it starts at residue-W: nothing issued, so nothing
// out). Frontiers only grow. A fast release of id is one compare-and-swap of
// its frontier from id-W to id: it succeeds exactly once per issue, even for
// two concurrent releases of one permit, and never for an ID not out (a
// released ID's frontier is at or past it).
//
// A permit held while W more are issued is still out when the next ID of
// its residue is released; that release finds the frontier below id-W and
// goes to the mutex, where it converts the permits in the way: with the
// frontier at v < id-W, the IDs v+W, v+2W, ..., id-W were all issued (IDs
// are issued in order) and none is released (a release moves the frontier
// to its ID or past it), so all are out. The release moves the frontier from
// v to id and records those IDs in the converted set; their own releases
// then find the frontier past them and are accepted under the mutex by
// taking them out of that set. The swap from v decides between a conversion
// and a concurrent fast release of v+W, so exactly one of them moves the
// frontier. The converted set holds only permits still out, so it is
// bounded by in-flight.
//
// Every word the fast path touches (the state word, the limit, hi and the
// frontiers) shares one 64-byte cache line (hotLine), so W is 4. Two cores
// that take turns acquiring and releasing then trade one line, not two:
// with the frontiers on lines of their own (W about twice the limit, an
// earlier design) the parallel benchmark ran 2.5 to 3.5 times slower than
// with a mutex. The price of a small W: a permit held while 4 others are
// issued is converted, and its release takes the mutex. With many permits
// out for long, most releases do (as every release did with a mutex), while
// acquires stay lock-free.
//
// A fast acquire that loses its compare-and-swap (usually to another
// acquire) waits a little (backoff) before it looks again, unless the slow
// flag is now set. Without it, two cores hammering
// the line trade it on nearly every read-modify-write, and about one acquire
// in four lost its swap; with it, the winner runs alone for a while with the
// line in its cache, as the holder of a contended mutex does while a waiter
// spins. A release never spins outside the mutex, so it needs none.
// Measured on 2 cores:
// benchmarks/README.md, section "Breaker and bulkhead".
//
// The count of permits in use lives in the state word; the locked side's
// groupsem.Sem holds the limit and the
// drain state, and observes the count from the word (Sem.Observe) under the
// mutex before each decision.

import (
	"sync/atomic"
	"unsafe"
)

const (
	seqOne   = 1 << 32      // one step of the ID sequence in the state word
	slowFlag = 1 << 31      // acquires take the mutex; releases call settle
	usedMask = slowFlag - 1 // permits in use
	// fastSeqMax is the highest sequence value a fast acquire issues after:
	// the last IDs before a wrap of the 32-bit sequence are issued under the
	// mutex, which moves hi.
	fastSeqMax = 1<<32 - 1<<16
	slots      = 4 // release frontiers (W): those that fit on the state word's cache line
)

// hotLine holds every word the fast path touches, on one 64-byte cache line
// (an object of the 64-byte size class is 64-byte aligned): two cores that
// take turns acquiring and releasing then trade one line, not two.
type hotLine struct {
	state atomic.Uint64 // ID sequence low 32 bits | slow flag | permits in use
	limit atomic.Int64  // the limit in force; stored only under mu
	hi    atomic.Uint64 // the ID sequence's high 32 bits; stored only under mu
	_     uint64
	front [slots]atomic.Uint64 // release frontiers
}

// newHotLine returns the fast path's words with the release frontiers set
// as if IDs 0 (never issued) and the negative ones were released.
func newHotLine() *hotLine {
	h := new(hotLine)
	for r := range uint64(slots) {
		h.front[r].Store(r - slots)
	}
	h.front[0].Store(0) // ID 0 is never issued
	return h
}

var (
	_ [64 - unsafe.Sizeof(hotLine{})]struct{} // hotLine is one line:
	_ [unsafe.Sizeof(hotLine{}) - 64]struct{} // neither more nor less
)

// backoffSpins is how long a fast acquire that lost its compare-and-swap
// waits before it looks again, in loop iterations of about a cycle each:
// 1.14 µs on the 2-core machine of benchmarks/README.md, of the order of
// what sync.Mutex spins (120 PAUSE instructions, 10 to 140 cycles each by
// CPU) before it parks a waiter. The parallel benchmark there took 12.0 ns per operation with 1,024, 9.95 with
// 2,048 and 8.8 with 4,096 (the serial cost: the winner runs alone); starting
// at 128 and doubling measured little better than no wait, since one loss
// seldom follows another at once.
const backoffSpins = 4096

// backoff spins for backoffSpins iterations without touching shared memory
// (spinGuard is read-only, so it stays in both cores' caches). Out of line:
// only the contended case pays for it.
//
//go:noinline
func backoff() {
	for i := range backoffSpins {
		if i == spinGuard {
			return
		}
	}
}

// spinGuard is never a loop index. It keeps the compiler from removing
// backoff's loop as doing nothing, whatever its version.
var spinGuard = -1

// frontier returns id's release frontier.
func (b *Bulkhead) frontier(id uint64) *atomic.Uint64 {
	return &b.hot.front[id%slots]
}

// lock takes the mutex and sets the slow flag, and brings the Sem's count up
// to date. While lock is held only releases change the state word. (A
// release that takes the bare mutex, releaseSlow, decides nothing on the
// count, so fast acquires may go on meanwhile.)
func (b *Bulkhead) lock() {
	b.mu.Lock()
	s := b.hot.state.Or(slowFlag)
	b.sem.Observe(int(s & usedMask))
}

// unlock clears the slow flag unless requests wait or a drain goes on, and
// releases the mutex.
func (b *Bulkhead) unlock() {
	if b.waiters.Len() == 0 && !b.sem.Draining() {
		b.hot.state.And(^uint64(slowFlag))
	}
	b.mu.Unlock()
}

// observe updates the Sem's count from a state word read under the mutex,
// reporting whether that ended a drain.
func (b *Bulkhead) observe(s uint64) (drained bool) { return b.sem.Observe(int(s & usedMask)) }

// lastIDLocked returns the last ID issued. Under the mutex, which keeps hi;
// fast acquires may issue more meanwhile (without the slow flag), so it is a
// lower bound, which is all releaseIDLocked needs: a permit being released
// was issued before.
func (b *Bulkhead) lastIDLocked() uint64 {
	return b.hot.hi.Load()<<32 | b.hot.state.Load()>>32
}

// takeIDLocked issues the next ID with n permits (which fit; n is 0 for a
// ghost), moving hi first when the sequence wraps. Under the mutex.
func (b *Bulkhead) takeIDLocked(n int) (id uint64, s uint64) {
	id = b.lastIDLocked() + 1
	if uint32(id) == 0 {
		b.hot.hi.Store(id >> 32)
	}
	return id, b.hot.state.Add(seqOne + uint64(n))
}

// issueIDLocked takes n permits, which fit, and the next ID. Under the
// mutex.
func (b *Bulkhead) issueIDLocked(n int) uint64 {
	id, s := b.takeIDLocked(n)
	b.observe(s)
	b.slowIssues++
	return id
}

// ghostLocked consumes an ID, issued and released at once, so that the state
// word differs from every earlier value. Under the mutex.
func (b *Bulkhead) ghostLocked() {
	id, _ := b.takeIDLocked(0)
	b.releaseIDLocked(id)
}

// releaseIDLocked moves id's frontier to id if id is out, converting the
// permits of its residue in the way, and reports whether it was out: by its
// frontier, or in the converted set. Under the mutex.
func (b *Bulkhead) releaseIDLocked(id uint64) bool {
	b.slowReleases++
	if id == 0 || id > b.lastIDLocked() {
		return false
	}
	w := uint64(slots)
	f := b.frontier(id)
	for {
		v := f.Load()
		if int64(id) <= int64(v) {
			return b.converted.take(id)
		}
		if f.CompareAndSwap(v, id) {
			for j := v + w; j != id; j += w {
				b.converted.put(j)
				b.conversions++
			}
			return true
		}
		// A fast release of v+W moved the frontier: look again.
	}
}

// releaseLocked takes p out of the outstanding permits, reporting whether it
// was one and whether its release ended a drain. Under the mutex.
func (b *Bulkhead) releaseLocked(p Permit) (ok, drained bool) {
	if !b.releaseIDLocked(p.id) {
		return false, false
	}
	return true, b.observe(b.hot.state.Add(-uint64(p.Weight())))
}
