// Package groupsem is the permit accounting shared by every limit in
// groupexec: the executor's three (global in-flight, a group's bulkhead, a
// group's concurrency) and the bulkhead package's. One implementation means
// one meaning of "fits", "in use" and "draining" everywhere.
//
// A Sem never blocks and never allocates: waiting is its owner's job (the
// executor's FIFO queues, the bulkhead's wait queue), so the limit itself only
// answers "does n fit" and keeps counts. A Sem is not safe for concurrent use;
// its owner locks.
package groupsem

// Sem counts permits in use against a limit.
//
// The limit may change while permits are out (SetLimit). Lowering it below
// the permits in use starts a drain: Fits refuses until enough are released,
// and Draining reports true until use is back below the new limit. Permits
// already out are never revoked.
type Sem struct {
	limit    int
	used     int
	draining bool
}

// New returns a Sem with limit permits.
func New(limit int) Sem { return Sem{limit: limit} }

// Fits reports whether n more permits are within the limit.
func (s *Sem) Fits(n int) bool { return Fits(s.limit, s.used, n) }

// Fits reports whether n more permits fit under limit with used in use: the
// one definition of "fits", for a Sem and for a lock-free owner that keeps
// its count elsewhere (the bulkhead's fast path).
func Fits(limit, used, n int) bool { return n <= limit-used }

// Acquire takes n permits. The caller has checked Fits: taking more than the
// limit is a bug in the caller, so Acquire panics rather than hide it.
func (s *Sem) Acquire(n int) {
	if !s.Fits(n) {
		panic("groupsem: Acquire beyond the limit")
	}
	s.used += n
}

// TryAcquire takes n permits if they fit, reporting whether it did.
func (s *Sem) TryAcquire(n int) bool {
	if !Fits(s.limit, s.used, n) {
		return false
	}
	s.used += n
	return true
}

// Release gives back n permits taken by Acquire. It reports whether this
// release ended a drain: use is now below the limit again.
func (s *Sem) Release(n int) (drained bool) {
	if n > s.used {
		panic("groupsem: Release of permits not held")
	}
	s.used -= n
	if s.draining && s.used < s.limit {
		s.draining = false
		return true
	}
	return false
}

// Observe sets the permits in use to used, for an owner that also counts
// them outside its lock (the bulkhead's lock-free fast path takes and
// returns permits in an atomic word, and its locked side observes that word
// here before each decision). It reports whether the count dropping ended a
// drain, as Release does. used must not exceed the limit unless draining.
func (s *Sem) Observe(used int) (drained bool) {
	s.used = used
	if s.draining && s.used < s.limit {
		s.draining = false
		return true
	}
	return false
}

// Used returns the permits in use.
func (s *Sem) Used() int { return s.used }

// Limit returns the limit.
func (s *Sem) Limit() int { return s.limit }

// Available returns the permits that are free; it is 0, never negative, when a
// lowered limit leaves more in use than allowed.
func (s *Sem) Available() int { return max(s.limit-s.used, 0) }

// Draining reports whether a lowered limit left more permits in use than it
// allows, and use has not yet dropped below it.
func (s *Sem) Draining() bool { return s.draining }

// SetLimit changes the limit. Permits in use are kept. Lowering the limit
// below Used starts a drain (started is true if it was not draining); raising
// it to more than Used ends one (ended is true if it was draining).
func (s *Sem) SetLimit(n int) (started, ended bool) {
	was := s.draining
	s.limit = n
	switch {
	case s.used > n:
		s.draining = true
	case s.used < n:
		s.draining = false
	}
	return !was && s.draining, was && !s.draining
}
