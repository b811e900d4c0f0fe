package bulkhead

import (
	"math"
	"math/bits"
	"time"
)

// MaxLimit is the largest limit a bulkhead takes.
const MaxLimit = math.MaxInt32

// A Permit is one admitted operation's hold on the bulkhead, from Acquire or
// TryAcquire to Release. It is a small value: copy it freely, release it
// once. The zero Permit is not outstanding; releasing it is ErrUnknownPermit.
type Permit struct {
	// Four machine words at most: the compiler keeps such a struct in
	// registers, where a larger one is copied through memory on every
	// return, which measured three times the cost of the whole acquire.
	b      *Bulkhead
	id     uint64
	issued int64  // a stamp: nanoseconds after b's clock base
	meta   uint64 // limit in force << 32 | weight; both <= MaxLimit
}

// ID returns the permit's ID: unique per bulkhead, and increasing in the
// order permits were issued (not consecutive: each SetLimit that changes
// the limit consumes one), as IssuedAt is non-decreasing: a permit with a
// greater ID was not issued earlier. Zero for the zero Permit.
func (p Permit) ID() uint64 { return p.id }

// IssuedAt returns when the permit was issued, by the bulkhead's clock,
// never before the IssuedAt of a permit with a smaller ID (ID). With
// the real clock and no listener or event log it is a coarse reading, a few
// milliseconds early at most (two refresh periods of 1 ms, plus however late
// the refresh timer runs on a loaded machine): reading the clock exactly
// would cost more than the rest of an acquire and release together.
func (p Permit) IssuedAt() time.Time {
	if p.b == nil {
		return time.Time{}
	}
	return p.b.at(p.issued)
}

// Limit returns the limit in force when the permit was issued.
func (p Permit) Limit() int { return int(p.meta >> 32) }

// Weight returns how many permits of the limit this one counts for.
func (p Permit) Weight() int { return int(uint32(p.meta)) }

// permitTable is a set of permit IDs: the converted permits (state.go), out
// but past their release frontier, so that Release accepts each of them
// once. It is an open-addressing hash set with linear probing. It grows (to
// a power of two, at least twice the IDs in it, at least 16) as the most IDs
// ever in it at once grows, and then allocates nothing. Guarded
// by the bulkhead's mutex.
type permitTable struct {
	ids   []uint64 // 0 marks an empty slot; len is 0 or a power of two
	n     int      // IDs in the set
	shift uint     // 64 - log2(len(ids))
}

// home is id's first slot: a Fibonacci hash. The set's IDs are close
// together, so their low bits would put them in one long run, which every
// take after the first scans (measured: 84 ns per release with 64 permits
// out in order, against 11 ns).
func (t *permitTable) home(id uint64) uint64 { return (id * 0x9e3779b97f4a7c15) >> t.shift }

func (t *permitTable) put(id uint64) {
	if 2*(t.n+1) > len(t.ids) {
		t.grow()
	}
	mask := uint64(len(t.ids) - 1)
	i := t.home(id)
	for t.ids[i] != 0 {
		i = (i + 1) & mask
	}
	t.ids[i] = id
	t.n++
}

// take removes id, reporting whether it was in the set.
func (t *permitTable) take(id uint64) bool {
	if id == 0 || t.n == 0 {
		return false
	}
	mask := uint64(len(t.ids) - 1)
	i := t.home(id)
	for t.ids[i] != id {
		if t.ids[i] == 0 {
			return false
		}
		i = (i + 1) & mask
	}
	// Backward-shift deletion: move later entries of the probe run into the
	// hole when the hole lies between their home and where they are, so
	// that every lookup still finds its ID before an empty slot.
	for j := i; ; {
		j = (j + 1) & mask
		k := t.ids[j]
		if k == 0 {
			break
		}
		if (j-t.home(k))&mask >= (j-i)&mask {
			t.ids[i] = k
			i = j
		}
	}
	t.ids[i] = 0
	t.n--
	return true
}

func (t *permitTable) grow() {
	old := t.ids
	t.ids = make([]uint64, max(16, 2*len(old)))
	t.shift = uint(64 - bits.TrailingZeros(uint(len(t.ids))))
	t.n = 0
	for _, id := range old {
		if id != 0 {
			t.put(id)
		}
	}
}
