package benchmarks

import (
	"sync/atomic"
	"testing"
)

// The work inside an admission. A request does some real work while it
// holds its permits; a benchmark whose task does nothing measures only the
// limiter's own cost, which is not what users run. spin burns a fixed
// number of xorshift rounds: about 1.5 ns a round on the machines measured,
// so spinServer is ~0.5 µs and spinTask ~200 ns (BenchmarkWork reports
// both in each run). The count is fixed, not calibrated, so that every
// contender does the same work in one run.
const (
	spinServer = 310
	spinTask   = 130
)

// spinSink keeps the compiler from dropping the work.
var spinSink atomic.Uint64

//go:noinline
func spin(n int) uint64 {
	x := uint64(n) | 1
	for range n {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	return x
}

// work is spin's result kept, once per call: a store to a line every
// caller shares would be a cost of the harness, so it keeps only a rare one.
func work(n int) {
	if x := spin(n); x == 0 {
		spinSink.Store(x)
	}
}

// BenchmarkWork times the work alone, in one goroutine: what a server
// request (server) and a batch's task (task) do inside their admission.
func BenchmarkWork(b *testing.B) {
	for _, w := range []struct {
		name string
		n    int
	}{{"server", spinServer}, {"task", spinTask}} {
		b.Run(w.name, func(b *testing.B) {
			for b.Loop() {
				work(w.n)
			}
		})
	}
}
