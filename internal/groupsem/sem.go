// Package groupsem is the permit accounting shared by the executor's three
// limits: global in-flight, a group's bulkhead and a group's concurrency.
//
// A Sem never blocks and never allocates: waiting is the executor's job (its
// FIFO queues hold no goroutine and no permit), so the limits themselves only
// answer "does w fit" and keep counts. A Sem is not safe for concurrent use;
// its owner locks.
package groupsem

// Sem counts permits in use against a limit.
type Sem struct {
	limit int
	used  int
}

// New returns a Sem with limit permits.
func New(limit int) Sem { return Sem{limit: limit} }

// Fits reports whether n more permits are within the limit.
func (s *Sem) Fits(n int) bool { return n <= s.limit-s.used }

// Acquire takes n permits. The caller has checked Fits: taking more than the
// limit is a bug in the caller, so Acquire panics rather than hide it.
func (s *Sem) Acquire(n int) {
	if !s.Fits(n) {
		panic("groupsem: Acquire beyond the limit")
	}
	s.used += n
}

// Release gives back n permits taken by Acquire.
func (s *Sem) Release(n int) {
	if n > s.used {
		panic("groupsem: Release of permits not held")
	}
	s.used -= n
}

// Used returns the permits in use.
func (s *Sem) Used() int { return s.used }

// Limit returns the limit.
func (s *Sem) Limit() int { return s.limit }

// Available returns the permits that are free; it is 0, never negative, when a
// lowered limit leaves more in use than allowed.
func (s *Sem) Available() int { return max(s.limit-s.used, 0) }

// SetLimit changes the limit. Permits in use are kept: lowering the limit
// below Used makes Fits refuse until enough are released.
func (s *Sem) SetLimit(n int) { s.limit = n }
