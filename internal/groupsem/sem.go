// Package groupsem is the permit accounting of the bulkhead package's
// limit: what "fits", "in use" and "draining" mean, for its locked side (a
// Sem) and its lock-free fast path (Fits). (The executor keeps its limits'
// counts in its own structures.)
//
// A Sem never blocks and never allocates: waiting is its owner's job (the
// bulkhead's wait queue), so the limit itself only answers "does n fit" and
// keeps counts. A Sem is not safe for concurrent use; its owner locks.
//
// Counts (a limit, permits in use, permits taken or given back) are never
// negative: a negative one is a bug in the owner, which validates what its
// callers ask for (the bulkhead refuses a weight below 1 with a
// ConfigError). Every function here panics on one, naming the call and the
// value, before it changes anything: a negative Acquire would free permits
// nobody released, a negative Release take permits nobody holds, and the
// limit would then be exceeded or never reached, silently. Zero is a count
// like any other: nothing is taken or given back.
package groupsem

import "strconv"

// misuse is what a Sem panics with: the call, its count, and what is wrong.
// A panic with a value (rather than a message built here) keeps every
// method small enough to inline: the owners call them on their hot paths.
type misuse struct {
	call   string
	n      int
	reason string
}

func (e misuse) Error() string {
	return "groupsem: " + e.call + "(" + strconv.Itoa(e.n) + "): " + e.reason
}

const negative = "the count must be >= 0"

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

// New returns a Sem with limit permits. It panics if limit is negative.
func New(limit int) Sem {
	if limit < 0 {
		panic(misuse{"New", limit, negative})
	}
	return Sem{limit: limit}
}

// Fits reports whether n more permits are within the limit. It panics if n
// is negative.
func (s *Sem) Fits(n int) bool { return Fits(s.limit, s.used, n) }

// Fits reports whether n more permits fit under limit with used in use: the
// one definition of "fits", for a Sem and for a lock-free owner that keeps
// its count elsewhere (the bulkhead's fast path). It panics if n is
// negative; limit and used are the owner's, never negative.
func Fits(limit, used, n int) bool {
	if n < 0 {
		panic(misuse{"Fits", n, negative})
	}
	return n <= limit-used
}

// Acquire takes n permits. The caller has checked Fits: taking more than the
// limit is a bug in the caller, so Acquire panics rather than hide it, as it
// does for a negative n.
func (s *Sem) Acquire(n int) {
	if n < 0 {
		panic(misuse{"Acquire", n, negative})
	}
	if n > s.limit-s.used {
		panic(misuse{"Acquire", n, "beyond the limit"})
	}
	s.used += n
}

// TryAcquire takes n permits if they fit, reporting whether it did. It
// panics if n is negative.
func (s *Sem) TryAcquire(n int) bool {
	if n < 0 {
		panic(misuse{"TryAcquire", n, negative})
	}
	if !Fits(s.limit, s.used, n) {
		return false
	}
	s.used += n
	return true
}

// Release gives back n permits taken by Acquire. It reports whether this
// release ended a drain: use is now below the limit again. It panics if n
// is negative or more than are in use.
func (s *Sem) Release(n int) (drained bool) {
	if n < 0 {
		panic(misuse{"Release", n, negative})
	}
	if n > s.used {
		panic(misuse{"Release", n, "more permits than are in use"})
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
// drain, as Release does. used must not exceed the limit unless draining;
// it panics if used is negative.
func (s *Sem) Observe(used int) (drained bool) {
	if used < 0 {
		panic(misuse{"Observe", used, negative})
	}
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
// it to more than Used ends one (ended is true if it was draining). It
// panics if n is negative.
func (s *Sem) SetLimit(n int) (started, ended bool) {
	if n < 0 {
		panic(misuse{"SetLimit", n, negative})
	}
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
