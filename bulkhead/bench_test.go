package bulkhead_test

import (
	"container/list"
	"errors"
	"sync"
	"sync/atomic"
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

// BenchmarkTryAcquireRefused is the overload shape: many callers at once,
// every bulkhead full, every TryAcquire refused. "one" is one full
// bulkhead; "per-tenant" is 1,000 full bulkheads of limit 1 (one held
// permit each), each caller going round them. The mutex-semaphore rows are
// the baseline: x/sync/semaphore's TryAcquire, a mutex around a count and a
// waiter list, written out with the standard library.
func BenchmarkTryAcquireRefused(b *testing.B) {
	for _, bc := range []struct {
		name    string
		tenants int
	}{{"one", 1}, {"per-tenant", 1000}} {
		b.Run(bc.name+"/bulkhead", func(b *testing.B) {
			bhs := fullBulkheads(b, bc.tenants)
			refuseInParallel(b, len(bhs), func(i int) bool {
				_, err := bhs[i].TryAcquire(bg, 1)
				return errors.Is(err, bulkhead.ErrAtCapacity)
			})
		})
		b.Run(bc.name+"/mutex-semaphore", func(b *testing.B) {
			sems := make([]mutexSem, bc.tenants)
			for i := range sems {
				sems[i].size = 1
				sems[i].tryAcquire(1)
			}
			refuseInParallel(b, len(sems), func(i int) bool { return !sems[i].tryAcquire(1) })
		})
	}
}

// refuseInParallel calls refuse on many goroutines, each going round the
// targets 0..n-1 from its own start; refuse reports whether it was refused.
func refuseInParallel(b *testing.B, n int, refuse func(i int) bool) {
	var next atomic.Uint64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int(next.Add(7919)) % n // callers start apart
		for pb.Next() {
			if i++; i == n {
				i = 0
			}
			if !refuse(i) {
				b.Fatal("not refused")
			}
		}
	})
}

// mutexSem is x/sync/semaphore.Weighted's TryAcquire: a mutex, a count, and
// a waiter list that must be empty.
type mutexSem struct {
	mu      sync.Mutex
	size    int64
	cur     int64
	waiters list.List
}

func (s *mutexSem) tryAcquire(n int64) bool {
	s.mu.Lock()
	ok := s.size-s.cur >= n && s.waiters.Len() == 0
	if ok {
		s.cur += n
	}
	s.mu.Unlock()
	return ok
}

// fullBulkheads returns n bulkheads of limit 1, each with its permit held
// (never released: the bulkheads are dropped with the benchmark).
func fullBulkheads(tb testing.TB, n int) []*bulkhead.Bulkhead {
	tb.Helper()
	bhs := make([]*bulkhead.Bulkhead, n)
	for i := range bhs {
		bhs[i] = newBH(tb, 1)
		if _, err := bhs[i].TryAcquire(bg, 1); err != nil {
			tb.Fatal(err)
		}
	}
	return bhs
}
