package bulkhead

import "time"

// A Permit is one admitted operation's hold on the bulkhead, from Acquire or
// TryAcquire to Release. It is a small value: copy it freely, release it
// once. The zero Permit is not outstanding; releasing it is ErrUnknownPermit.
type Permit struct {
	b      *Bulkhead
	id     uint64
	issued int64 // nanoseconds after b.base
	limit  int
	weight int
	slot   int32 // in b.permits
}

// ID returns the permit's ID: unique per bulkhead, and increasing in the
// order permits were issued. Zero for the zero Permit.
func (p Permit) ID() uint64 { return p.id }

// IssuedAt returns when the permit was issued, by the bulkhead's clock. With
// the real clock and no listener or event log it is a coarse reading, at
// most about two milliseconds early: reading the clock exactly would cost
// more than the rest of an acquire and release together.
func (p Permit) IssuedAt() time.Time {
	if p.b == nil {
		return time.Time{}
	}
	return p.b.at(p.issued)
}

// Limit returns the limit in force when the permit was issued.
func (p Permit) Limit() int { return p.limit }

// Weight returns how many permits of the limit this one counts for.
func (p Permit) Weight() int { return p.weight }

// permitTable records the outstanding permits, so that Release can refuse a
// permit that is not one: released before, from another bulkhead, or made
// up. A permit names its slot; the slot holds its ID while it is out. Slots
// are reused, so the table grows to the most permits ever out at once and
// then allocates nothing. Guarded by the bulkhead's mutex.
type permitTable struct {
	ids  []uint64 // ids[slot]: the outstanding permit's ID, 0 when free
	free []int32  // free slots
	n    int      // permits outstanding
}

func (t *permitTable) put(id uint64) int32 {
	if len(t.free) == 0 {
		t.ids = append(t.ids, 0)
		t.free = append(t.free, int32(len(t.ids)-1))
	}
	slot := t.free[len(t.free)-1]
	t.free = t.free[:len(t.free)-1]
	t.ids[slot] = id
	t.n++
	return slot
}

// take removes the permit id from slot, reporting whether it was there.
func (t *permitTable) take(slot int32, id uint64) bool {
	if slot < 0 || int(slot) >= len(t.ids) || id == 0 || t.ids[slot] != id {
		return false
	}
	t.ids[slot] = 0
	t.free = append(t.free, slot)
	t.n--
	return true
}
