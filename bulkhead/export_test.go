package bulkhead

import "fmt"

// CheckInvariants checks the bulkhead's books under its lock: the permit
// table and the permit count agree, and every waiter in the queue is still
// waiting.
func (b *Bulkhead) CheckInvariants() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := &b.permits
	out := 0
	for i, id := range t.ids {
		if id == 0 {
			continue
		}
		out++
		if !t.has(id) {
			return fmt.Errorf("permit %d at slot %d is not found by a lookup", id, i)
		}
	}
	switch {
	case out != t.n:
		return fmt.Errorf("%d slots hold permits, table counts %d", out, t.n)
	case 2*t.n > len(t.ids):
		return fmt.Errorf("%d permits in %d slots: over half full", t.n, len(t.ids))
	case b.sem.Used() < t.n:
		return fmt.Errorf("%d permits in use for %d outstanding permits of weight >= 1", b.sem.Used(), t.n)
	case t.n == 0 && b.sem.Used() != 0:
		return fmt.Errorf("%d permits in use with none outstanding", b.sem.Used())
	case b.waiters.Len() > b.maxDepth:
		return fmt.Errorf("%d waiters, queue depth %d", b.waiters.Len(), b.maxDepth)
	}
	for f := b.waiters.Front(); f != nil; f = f.Next() {
		if w := f.Value.weight; w <= b.sem.Limit() { // the first the limit can serve
			if b.sem.Fits(w) {
				return fmt.Errorf("the first servable waiter (weight %d) fits (%d of %d in use) but waits", w, b.sem.Used(), b.sem.Limit())
			}
			break
		}
	}
	for f := b.waiters.Front(); f != nil; f = f.Next() {
		select {
		case <-f.Value.ready:
			return fmt.Errorf("a decided waiter is still queued")
		default:
		}
	}
	return nil
}

// has reports whether id is in the set, probing as take does.
func (t *permitTable) has(id uint64) bool {
	mask := uint64(len(t.ids) - 1)
	for i := id & mask; t.ids[i] != 0; i = (i + 1) & mask {
		if t.ids[i] == id {
			return true
		}
	}
	return false
}
