package benchmarks

import "testing"

// opPeer is one measured op of a micro-benchmark (breaker, bulkhead): newOp
// builds a fresh instance and returns the op, which fails by returning an
// error. Each op is a closure built once per benchmark, so every peer pays
// the same indirect call.
type opPeer struct {
	name  string
	newOp func(tb testing.TB) func() error
}

// benchOps runs each peer's op b.N times, serially or (parallel) under
// b.RunParallel on one shared instance.
func benchOps(b *testing.B, peers []opPeer, parallel bool) {
	for _, p := range peers {
		b.Run(p.name, func(b *testing.B) {
			op := p.newOp(b)
			b.ReportAllocs()
			b.ResetTimer()
			if !parallel {
				for range b.N {
					if err := op(); err != nil {
						b.Fatal(err)
					}
				}
				return
			}
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := op(); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
