package bulkhead_test

import (
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/bulkhead"
)

// countingClock counts its readings. Its timers never fire.
type countingClock struct {
	fakeNow
	reads atomic.Int64
}

func (c *countingClock) Now() time.Time {
	c.reads.Add(1)
	return c.fakeNow.Now()
}

// A refused TryAcquire allocates one small object at most (its
// *RejectedError) and reads no clock, on one full bulkhead and across many
// (a bulkhead per tenant), with or without a queue or a capability gate.
// (The bulkheads read a clock of the test's, whose timers never fire, so
// that no background timer of the real clock's allocates while it counts.)
func TestRefusalAllocatesOneSmallObject(t *testing.T) {
	for _, tc := range []struct {
		name    string
		tenants int
		opts    []bulkhead.Option
	}{
		{"one", 1, nil},
		{"per-tenant", 1000, nil},
		{"queue", 1, []bulkhead.Option{bulkhead.WithQueue(4, time.Hour)}},
		{"capability", 1, []bulkhead.Option{bulkhead.WithRequiredCapability("remote")}},
		{"per-tenant capability", 1000, []bulkhead.Option{bulkhead.WithRequiredCapability("remote")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := &countingClock{fakeNow: fakeNow{t0}}
			bhs := make([]*bulkhead.Bulkhead, tc.tenants)
			for i := range bhs {
				bhs[i] = newBH(t, 1, append([]bulkhead.Option{bulkhead.WithClock(clk)}, tc.opts...)...)
				acquire(t, bhs[i], 1)
			}
			i := 0
			refuse := func() {
				i = (i + 1) % len(bhs)
				if _, err := bhs[i].TryAcquire(remote, 1); !errors.Is(err, bulkhead.ErrAtCapacity) {
					t.Fatal(err)
				}
			}
			refuse() // warm up
			reads := clk.reads.Load()
			const runs = 2000
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			allocs := testing.AllocsPerRun(runs, refuse)
			runtime.ReadMemStats(&after)
			if allocs > 1 {
				t.Errorf("%v allocations per refusal, want <= 1", allocs)
			}
			// AllocsPerRun calls refuse runs+1 times.
			if bytes := (after.TotalAlloc - before.TotalAlloc) / (runs + 1); bytes > 96 {
				t.Errorf("%d bytes per refusal, want one small object (<= 96)", bytes)
			}
			if n := clk.reads.Load() - reads; n != 0 {
				t.Errorf("%d clock readings in %d refusals, want none", n, runs+1)
			}
		})
	}
}

// A refusal of a full bulkhead with nobody waiting is decided on the
// lock-free words: it does not wait for the mutex, which another
// operation may hold for long.
func TestRefusalTakesNoLock(t *testing.T) {
	b := newBH(t, 1)
	held := acquire(t, b, 1)
	unlock := bulkhead.HoldMutex(b)
	done := make(chan error, 1)
	go func() {
		_, err := b.TryAcquire(bg, 1)
		done <- err
	}()
	select {
	case err := <-done:
		wantErr(t, err, bulkhead.ErrAtCapacity)
	case <-time.After(10 * time.Second):
		unlock()
		<-done
		t.Fatal("a refusal waited for the mutex")
	}
	unlock()
	release(t, b, held)
}

// The lock-free refusal carries the same numbers as the locked one.
func TestRefusalDetails(t *testing.T) {
	b := newBH(t, 3, bulkhead.WithQueue(2, time.Minute))
	held := acquire(t, b, 2)
	_, err := b.TryAcquire(bg, 2)
	var rej *bulkhead.RejectedError
	if !errors.As(err, &rej) {
		t.Fatalf("%v is not a *RejectedError", err)
	}
	want := bulkhead.RejectedError{
		Err: bulkhead.ErrAtCapacity, Limit: 3, InFlight: 2, Weight: 2, MaxDepth: 2, MaxWait: time.Minute,
	}
	if *rej != want {
		t.Fatalf("got %+v, want %+v", *rej, want)
	}
	// Another refusal with other numbers has its own.
	release(t, b, held)
	held = acquire(t, b, 3)
	_, err = b.TryAcquire(bg, 1)
	if !errors.As(err, &rej) {
		t.Fatalf("%v is not a *RejectedError", err)
	}
	want.InFlight, want.Weight = 3, 1
	if *rej != want {
		t.Fatalf("got %+v, want %+v", *rej, want)
	}
	if err := b.SetLimit(4); err != nil {
		t.Fatal(err)
	}
	extra := acquire(t, b, 1)
	_, err = b.TryAcquire(bg, 1)
	if !errors.As(err, &rej) {
		t.Fatalf("%v is not a *RejectedError", err)
	}
	want.Limit, want.InFlight = 4, 4
	if *rej != want {
		t.Fatalf("got %+v, want %+v", *rej, want)
	}
	release(t, b, extra)
	release(t, b, held)
}
