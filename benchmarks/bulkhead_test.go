package benchmarks

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	fsbulkhead "github.com/failsafe-go/failsafe-go/bulkhead"
	"golang.org/x/sync/semaphore"

	"github.com/groupexec/groupexec/bulkhead"
)

// bulkheadLimit is large enough that RunParallel on 2 cores never finds the
// bulkhead full: the benchmarks measure the cost of a successful
// TryAcquire+Release, not of refusals.
const bulkheadLimit = 1024

// cas is the floor: a bare compare-and-swap counter, which tracks no permit
// and cannot wait.
type cas struct{ used atomic.Int64 }

func (c *cas) tryAcquire() bool {
	for {
		v := c.used.Load()
		if v >= bulkheadLimit {
			return false
		}
		if c.used.CompareAndSwap(v, v+1) {
			return true
		}
	}
}

func (c *cas) release() { c.used.Add(-1) }

var errRefused = errors.New("refused under the limit")

// bulkheadPeers: one TryAcquire+Release of one permit each.
var bulkheadPeers = []opPeer{
	{"ours", func(tb testing.TB) func() error {
		b, err := bulkhead.New(bulkheadLimit)
		if err != nil {
			tb.Fatal(err)
		}
		ctx := context.Background()
		return func() error {
			p, err := b.TryAcquire(ctx, 1)
			if err != nil {
				return err
			}
			return b.Release(p)
		}
	}},
	{"x-sync-semaphore", func(testing.TB) func() error {
		s := semaphore.NewWeighted(bulkheadLimit)
		return func() error {
			if !s.TryAcquire(1) {
				return errRefused
			}
			s.Release(1)
			return nil
		}
	}},
	{"cas-counter", func(testing.TB) func() error {
		c := new(cas)
		return func() error {
			if !c.tryAcquire() {
				return errRefused
			}
			c.release()
			return nil
		}
	}},
	{"failsafe-bulkhead", func(testing.TB) func() error {
		b := fsbulkhead.New[any](bulkheadLimit)
		return func() error {
			if !b.TryAcquirePermit() {
				return errRefused
			}
			b.ReleasePermit()
			return nil
		}
	}},
}

func BenchmarkBulkheadSerial(b *testing.B)   { benchOps(b, bulkheadPeers, false) }
func BenchmarkBulkheadParallel(b *testing.B) { benchOps(b, bulkheadPeers, true) }

// BenchmarkBulkheadSubmit is the cost of running a function under a
// bulkhead permit with a result handle, against a bare goroutine that
// signals a WaitGroup: submit and wait, one at a time.
func BenchmarkBulkheadSubmit(b *testing.B) {
	ctx := context.Background()
	fn := func(context.Context) (int, error) { return 1, nil }
	b.Run("ours", func(b *testing.B) {
		bh, err := bulkhead.New(bulkheadLimit)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for range b.N {
			h, err := bulkhead.Submit(bh, ctx, fn)
			if err != nil {
				b.Fatal(err)
			}
			if r, _ := h.Wait(ctx); r.Status != bulkhead.Success {
				b.Fatal(r.Err)
			}
		}
	})
	b.Run("goroutine", func(b *testing.B) {
		b.ReportAllocs()
		var wg sync.WaitGroup
		var v int
		for range b.N {
			wg.Add(1)
			go func() {
				defer wg.Done()
				v, _ = fn(ctx)
			}()
			wg.Wait()
		}
		_ = v
	})
}

// TestBulkheadPeers checks that every benchmark op succeeds on a fresh
// bulkhead and that every peer refuses past its limit: the benchmarks
// compare bulkheads that work.
func TestBulkheadPeers(t *testing.T) {
	for _, p := range bulkheadPeers {
		op := p.newOp(t)
		for range 1000 {
			if err := op(); err != nil {
				t.Fatalf("%s: %v", p.name, err)
			}
		}
	}
	b, _ := bulkhead.New(2)
	ctx := context.Background()
	p1, _ := b.TryAcquire(ctx, 1)
	p2, _ := b.TryAcquire(ctx, 1)
	if _, err := b.TryAcquire(ctx, 1); err == nil {
		t.Fatal("ours issued a third permit under limit 2")
	}
	_, _ = b.Release(p1), b.Release(p2)
	s := semaphore.NewWeighted(1)
	if !s.TryAcquire(1) || s.TryAcquire(1) {
		t.Fatal("x/sync semaphore")
	}
	c := new(cas)
	for range bulkheadLimit {
		c.tryAcquire()
	}
	if c.tryAcquire() {
		t.Fatal("cas counter past its limit")
	}
	f := fsbulkhead.New[any](1)
	if !f.TryAcquirePermit() || f.TryAcquirePermit() {
		t.Fatal("failsafe bulkhead")
	}
}
