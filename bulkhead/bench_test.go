package bulkhead_test

import (
	"testing"

	"github.com/groupexec/groupexec/bulkhead"
)

// BenchmarkTryAcquireRelease is the hot path; benchmarks/ compares it with
// peers.
func BenchmarkTryAcquireRelease(b *testing.B) {
	bh := newBH(b, 1024)
	b.ReportAllocs()
	for b.Loop() {
		p, err := bh.TryAcquire(bg, 1)
		if err != nil {
			b.Fatal(err)
		}
		if err := bh.Release(p); err != nil {
			b.Fatal(err)
		}
	}
}

var _ = bulkhead.New

func BenchmarkTryAcquireReleaseParallel(b *testing.B) {
	bh := newBH(b, 1024)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p, err := bh.TryAcquire(bg, 1)
			if err != nil {
				b.Fatal(err)
			}
			if err := bh.Release(p); err != nil {
				b.Fatal(err)
			}
		}
	})
}
