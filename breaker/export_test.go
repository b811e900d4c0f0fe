package breaker

// Spread puts cb's counters in per-core cells now, as the first collision
// between two callers would, so that tests can run the contended paths
// serially.
func Spread(cb *CircuitBreaker) {
	cb.contended.Store(true)
	cb.cur.Load().grow(cb)
}
