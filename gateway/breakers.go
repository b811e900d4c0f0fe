package gateway

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/gateway/config"
)

// backendBreaker is one backend's circuit breaker. It opens after
// breaker.consecutive_failures failures in a row; the time it then stays
// open starts at breaker.timeout and doubles each time the probe let
// through after it fails, up to breaker.max_timeout, where it stays (a
// probe at the backoff cap) until a probe succeeds and closes it.
//
// The breaker package's breaker decides; this type only holds it open past
// that breaker's own timeout (breaker.timeout) while backing off.
type backendBreaker struct {
	name      string
	cb        *breaker.CircuitBreaker
	clk       clock.Clock
	base, cap time.Duration
	changed   func(name string, from, to breaker.State)

	until atomic.Int64 // UnixNano the backoff holds it open until; 0: not held

	mu    sync.Mutex
	opens int // consecutive openings without a close
}

func newBackendBreaker(name string, c config.Breaker, clk clock.Clock, changed func(string, breaker.State, breaker.State)) (*backendBreaker, error) {
	b := &backendBreaker{name: name, clk: clk, base: c.Timeout, cap: c.MaxTimeout, changed: changed}
	n := uint64(c.ConsecutiveFailures)
	cb, err := breaker.New(breaker.Settings{
		Name:          name,
		MaxRequests:   uint32(c.MaxRequests),
		Timeout:       c.Timeout,
		ReadyToTrip:   func(counts breaker.Counts) bool { return counts.ConsecutiveFailures >= n },
		OnStateChange: b.onStateChange,
		Clock:         clk,
	})
	if err != nil {
		return nil, fmt.Errorf("gateway: breaker of %s: %w", name, err)
	}
	b.cb = cb
	return b, nil
}

func (b *backendBreaker) onStateChange(_ string, from, to breaker.State) {
	b.mu.Lock()
	switch to {
	case breaker.StateOpen:
		b.opens++
		d := b.base
		for i := 1; i < b.opens && d < b.cap; i++ {
			// Doubling past the cap stops at it: with a cap over half
			// the longest Duration (some 146 years), d*2 would
			// overflow, and a negative open time would hold nothing.
			if d > b.cap/2 {
				d = b.cap
				break
			}
			d *= 2
		}
		b.until.Store(b.clk.Now().Add(min(d, b.cap)).UnixNano())
	case breaker.StateClosed:
		b.opens = 0
		b.until.Store(0)
	}
	b.mu.Unlock()
	if b.changed != nil {
		b.changed(b.name, from, to)
	}
}

// openError is a request refused because every backend's breaker is open;
// RetryAfter is when the first of them lets a probe through.
type openError struct{ retryAfter time.Duration }

func (e *openError) Error() string {
	return fmt.Sprintf("gateway: every backend's breaker is open (retry after %v)", e.retryAfter)
}

// Is makes an openError match breaker.ErrOpenState.
func (e *openError) Is(target error) bool { return target == breaker.ErrOpenState }

// allow lets a request through, or returns how long until the breaker
// would let one through.
func (b *backendBreaker) allow() (breaker.Ticket, time.Duration, bool) {
	if until := b.until.Load(); until != 0 {
		if left := time.Duration(until - b.clk.Now().UnixNano()); left > 0 {
			return breaker.Ticket{}, left, false
		}
	}
	t, err := b.cb.AllowTicket()
	switch {
	case err == nil:
		return t, 0, true
	case errors.Is(err, breaker.ErrTooManyRequests):
		// Half-open, its probes out: the answer will come within a
		// request's time.
		return t, time.Second, false
	default:
		return t, b.base, false
	}
}

// openFor reports how long the breaker stays open, or 0 if it lets requests
// through (closed, half-open, or open past its time).
func (b *backendBreaker) openFor() time.Duration {
	if b.cb.State() != breaker.StateOpen {
		return 0
	}
	until := b.until.Load()
	if until == 0 {
		return 0
	}
	return max(0, time.Duration(until-b.clk.Now().UnixNano()))
}
