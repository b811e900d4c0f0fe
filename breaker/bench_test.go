package breaker_test

import (
	"testing"
	"time"

	"github.com/groupexec/groupexec/breaker"
)

// The closed state with interval clearing, where every request reads the
// clock and asks whether its period is over: one goroutine, the real
// clock, a trivial function.
func benchInterval(b *testing.B, op func(cb *breaker.CircuitBreaker)) {
	cb := mustNew(b, breaker.Settings{Interval: time.Hour})
	b.ReportAllocs()
	for b.Loop() {
		op(cb)
	}
}

func BenchmarkExecuteWithInterval(b *testing.B) {
	benchInterval(b, func(cb *breaker.CircuitBreaker) { _, _ = breaker.Execute(cb, succeed) })
}

func BenchmarkAllowWithInterval(b *testing.B) {
	benchInterval(b, func(cb *breaker.CircuitBreaker) {
		if done, err := cb.Allow(); err == nil {
			done(true)
		}
	})
}

func BenchmarkAllowTicketWithInterval(b *testing.B) {
	benchInterval(b, func(cb *breaker.CircuitBreaker) {
		if tk, err := cb.AllowTicket(); err == nil {
			tk.Success()
		}
	})
}
