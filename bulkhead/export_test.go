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
	for _, id := range t.ids {
		if id != 0 {
			out++
		}
	}
	switch {
	case out != t.n:
		return fmt.Errorf("%d slots hold permits, table counts %d", out, t.n)
	case len(t.free)+t.n != len(t.ids):
		return fmt.Errorf("%d free slots + %d outstanding != %d slots", len(t.free), t.n, len(t.ids))
	case b.sem.Used() < t.n:
		return fmt.Errorf("%d permits in use for %d outstanding permits of weight >= 1", b.sem.Used(), t.n)
	case t.n == 0 && b.sem.Used() != 0:
		return fmt.Errorf("%d permits in use with none outstanding", b.sem.Used())
	case b.waiters.Len() > b.maxDepth:
		return fmt.Errorf("%d waiters, queue depth %d", b.waiters.Len(), b.maxDepth)
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
