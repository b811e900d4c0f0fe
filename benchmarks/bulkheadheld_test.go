package benchmarks

import (
	"context"
	"testing"

	"golang.org/x/sync/semaphore"

	"github.com/groupexec/groupexec/bulkhead"
)

// heldPerGoroutine is how many permits each goroutine of BenchmarkBulkheadHeld
// keeps out: many more than the bulkhead's release frontiers (4), so that
// nearly every permit of ours is held while others are issued and takes the
// bulkhead's locked release path. 2 goroutines x 64 stays under the limit.
const heldPerGoroutine = 64

// BenchmarkBulkheadHeld is TryAcquire+Release with permits held, as on a
// server whose operations overlap and end out of order: each op acquires a
// permit and releases one of the 64 its goroutine holds, chosen at random
// (a fixed pseudo-random sequence). x/sync, which tracks no permit, is the
// reference: for it holding changes nothing.
func BenchmarkBulkheadHeld(b *testing.B) {
	for _, par := range []bool{false, true} {
		name := "serial"
		if par {
			name = "parallel"
		}
		b.Run(name+"/ours", func(b *testing.B) {
			bh, err := bulkhead.New(bulkheadLimit)
			if err != nil {
				b.Fatal(err)
			}
			runHeld(b, par, func() func() error {
				op, _ := newHeldOp(bh)
				return op
			})
		})
		b.Run(name+"/x-sync-semaphore", func(b *testing.B) {
			s := semaphore.NewWeighted(bulkheadLimit)
			runHeld(b, par, func() func() error {
				held := 0
				return func() error {
					if !s.TryAcquire(1) {
						return errRefused
					}
					if held < heldPerGoroutine {
						held++
						return nil
					}
					s.Release(1)
					return nil
				}
			})
		})
	}
}

// newHeldOp returns the op of BenchmarkBulkheadHeld for one goroutine, and
// the permits it holds.
func newHeldOp(bh *bulkhead.Bulkhead) (func() error, *[heldPerGoroutine]bulkhead.Permit) {
	ctx := context.Background()
	var held [heldPerGoroutine]bulkhead.Permit
	x := uint32(1)
	return func() error {
		p, err := bh.TryAcquire(ctx, 1)
		if err != nil {
			return err
		}
		x ^= x << 13 // xorshift32: cheap, and the same every run
		x ^= x >> 17
		x ^= x << 5
		i := x % heldPerGoroutine
		old := held[i]
		held[i] = p
		if old.ID() == 0 {
			return nil // a free place: still filling
		}
		return bh.Release(old)
	}, &held
}

// TestBulkheadHeldRunner checks the held op: every op succeeds, it keeps
// exactly 64 permits out once filled, and they are all accepted back.
func TestBulkheadHeldRunner(t *testing.T) {
	bh, err := bulkhead.New(bulkheadLimit)
	if err != nil {
		t.Fatal(err)
	}
	op, held := newHeldOp(bh)
	for i := range 20_000 {
		if err := op(); err != nil {
			t.Fatalf("op %d: %v", i, err)
		}
	}
	if got := bh.InFlight(); got != heldPerGoroutine {
		t.Fatalf("%d permits out after the ops, want %d", got, heldPerGoroutine)
	}
	for _, p := range held {
		if err := bh.Release(p); err != nil {
			t.Fatalf("releasing held permit %d: %v", p.ID(), err)
		}
	}
	if got := bh.InFlight(); got != 0 {
		t.Fatalf("%d permits out at the end", got)
	}
}

// runHeld runs the op that newOp makes for each goroutine, serially or in
// parallel.
func runHeld(b *testing.B, parallel bool, newOp func() func() error) {
	b.ReportAllocs()
	if !parallel {
		op := newOp()
		for b.Loop() {
			if err := op(); err != nil {
				b.Fatal(err)
			}
		}
		return
	}
	b.RunParallel(func(pb *testing.PB) {
		op := newOp()
		for pb.Next() {
			if err := op(); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
