package bulkhead_test

// golang.org/x/sync/semaphore's tests, ported to the bulkhead: a Weighted of
// size n is a bulkhead of limit n with a queue (so that Acquire waits), and
// Release(n) gives back the permit that took n.

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/bulkhead"
)

// waitingBH is a bulkhead whose Acquire waits as a semaphore's does: a
// queue deep enough for every test here, and a maximum wait no test
// reaches.
func waitingBH(t testing.TB, limit int, opts ...bulkhead.Option) *bulkhead.Bulkhead {
	t.Helper()
	return newBH(t, limit, append([]bulkhead.Option{bulkhead.WithQueue(1024, time.Hour)}, opts...)...)
}

// hammer acquires n (at least 1) and releases it, loops times.
func hammer(t testing.TB, b *bulkhead.Bulkhead, n, loops int) {
	for range loops {
		p, err := b.Acquire(bg, n)
		if err != nil {
			t.Error(err)
			return
		}
		runtime.Gosched()
		if rand.IntN(4) == 0 {
			time.Sleep(time.Duration(rand.IntN(int(time.Microsecond * 100))))
		}
		if err := b.Release(p); err != nil {
			t.Error(err)
			return
		}
	}
}

func TestWeighted(t *testing.T) {
	t.Parallel()
	n := max(runtime.GOMAXPROCS(0), 2)
	loops := 10000 / n
	b := waitingBH(t, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { hammer(t, b, max(i, 1), loops) })
	}
	wg.Wait()
	if s := stateOf(b); s.inFlight != 0 || s.queued != 0 {
		t.Fatalf("%+v", s)
	}
	if err := b.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// x/sync panics on a release of what was not acquired; the bulkhead
// refuses it with ErrUnknownPermit and changes nothing.
func TestWeightedPanic(t *testing.T) {
	t.Parallel()
	b := waitingBH(t, 1)
	wantErr(t, b.Release(bulkhead.Permit{}), bulkhead.ErrUnknownPermit)
	if s := stateOf(b); s.available != 1 {
		t.Fatalf("%+v", s)
	}
}

// tryScript is the script of x/sync's TestWeightedTryAcquire and
// TestWeightedAcquire on b, of limit 2: hold one, try twice, release all,
// try, hold one, try. try reports whether it got a permit, and the permit.
func tryScript(t *testing.T, b *bulkhead.Bulkhead, try func() (bulkhead.Permit, bool)) {
	t.Helper()
	var held []bulkhead.Permit
	attempt := func() bool {
		p, ok := try()
		if ok {
			held = append(held, p)
		}
		return ok
	}
	hold := func() {
		p, err := b.Acquire(bg, 1)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, p)
	}
	hold()
	tries := []bool{attempt(), attempt()}
	for _, p := range held {
		release(t, b, p)
	}
	held = held[:0]
	tries = append(tries, attempt())
	hold()
	tries = append(tries, attempt())

	want := []bool{true, false, true, false}
	for i := range tries {
		if tries[i] != want[i] {
			t.Errorf("tries[%d]: got %t, want %t", i, tries[i], want[i])
		}
	}
	for _, p := range held {
		release(t, b, p)
	}
}

func TestWeightedTryAcquire(t *testing.T) {
	t.Parallel()
	b := waitingBH(t, 2)
	tryScript(t, b, func() (bulkhead.Permit, bool) {
		p, err := b.TryAcquire(bg, 1)
		return p, err == nil
	})
}

// x/sync's version gives each try 10 ms; here a waiting acquire is
// cancelled once it is queued, so that no outcome depends on the machine's
// speed.
func TestWeightedAcquire(t *testing.T) {
	t.Parallel()
	g := newGate()
	b := waitingBH(t, 2, bulkhead.WithListener(g))
	tryScript(t, b, func() (bulkhead.Permit, bool) {
		ctx, cancel := context.WithCancel(bg)
		defer cancel()
		r := acquireAsync(ctx, b, 1)
		select {
		case <-r.done:
		case <-g.queued: // no permit free: give up while it waits
			cancel()
			g.proceed <- struct{}{}
		}
		p, err := r.wait(t)
		return p, err == nil
	})
}

// A request heavier than the limit does not block the others: x/sync's
// waits for ever at the back of the queue, the bulkhead refuses it at once
// (ErrAtCapacity); either way the light ones behind it get through.
func TestWeightedDoesntBlockIfTooBig(t *testing.T) {
	t.Parallel()
	const n = 2
	b := waitingBH(t, n)
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	big := acquireAsync(ctx, b, n+1)

	var wg sync.WaitGroup
	for range n * 3 {
		wg.Go(func() {
			p, err := b.Acquire(bg, 1)
			if err != nil {
				t.Errorf("Acquire(1) with Acquire(%d) pending on a limit of %d: %v", n+1, n, err)
				return
			}
			runtime.Gosched()
			if err := b.Release(p); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if _, err := big.wait(t); !errors.Is(err, bulkhead.ErrAtCapacity) {
		t.Fatalf("Acquire(%d) on a limit of %d: %v", n+1, n, err)
	}
}

// A large acquire is not starved by small ones that keep releasing and
// acquiring: FIFO puts it ahead of their next acquires. Returning at all is
// the test.
func TestLargeAcquireDoesntStarve(t *testing.T) {
	t.Parallel()
	n := max(runtime.GOMAXPROCS(0), 2)
	b := waitingBH(t, n)
	var running atomic.Bool
	running.Store(true)
	var wg sync.WaitGroup
	for range n {
		p, err := b.Acquire(bg, 1)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			defer func() { release(t, b, p) }()
			for running.Load() {
				runtime.Gosched()
				release(t, b, p)
				var err error
				if p, err = b.Acquire(bg, 1); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	p, err := b.Acquire(bg, n)
	if err != nil {
		t.Fatal(err)
	}
	running.Store(false)
	release(t, b, p)
	wg.Wait()
}

// A heavy request that gives up lets the lighter ones queued behind it in.
// (x/sync's version sleeps so that the requests queue; here the queue depth
// says so.)
func TestAllocCancelDoesntStarve(t *testing.T) {
	b := waitingBH(t, 10)
	held := acquire(t, b, 1)
	ctx, cancel := context.WithCancel(bg)
	heavy := acquireAsync(ctx, b, 10)
	eventually(t, "the heavy request to queue", func() bool { return b.QueueDepth() == 1 })
	light := acquireAsync(bg, b, 1) // behind the heavy one
	eventually(t, "the light request to queue", func() bool { return b.QueueDepth() == 2 })
	cancel()
	if _, err := heavy.wait(t); !errors.Is(err, context.Canceled) {
		t.Fatalf("heavy: %v", err)
	}
	p, err := light.wait(t)
	if err != nil {
		t.Fatalf("light: %v", err)
	}
	release(t, b, p)
	release(t, b, held)
}

// golang/go#63615: an acquire whose context ends before enough permits are
// free must fail, and leave every permit in the bulkhead, although the
// permits free up right after the cancellation. The race is not forced
// (TestAcquireCancelledBeforeGrantFails forces it); looping makes it
// likely.
func TestWeightedAcquireCanceled(t *testing.T) {
	iterations := 100000
	if testing.Short() {
		iterations = 10000
	}
	for i := range iterations {
		weightedAcquireCanceled(t, i)
		if t.Failed() {
			return
		}
	}
}

func weightedAcquireCanceled(t *testing.T, i int) {
	b := waitingBH(t, 2)
	ctx, cancel := context.WithCancel(bg)
	held := acquire(t, b, 1)
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		// Synchronise with the Acquire(2) below: once it waits, TryAcquire
		// fails (FIFO).
		for {
			p, err := b.TryAcquire(bg, 1)
			if err != nil {
				break
			}
			if err := b.Release(p); err != nil {
				t.Error(err)
				return
			}
		}
		// Now cancel ctx, and then release the permit.
		cancel()
		if err := b.Release(held); err != nil {
			t.Error(err)
		}
	}()
	// The context ends before enough permits are free: Acquire must fail.
	if p, err := b.Acquire(ctx, 2); !errors.Is(err, context.Canceled) {
		t.Errorf("iteration %d: Acquire with a context cancelled before any permit was free returned (permit %d, %v), want context.Canceled", i, p.ID(), err)
		if err == nil {
			release(t, b, p)
		}
	}
	// Both permits are in the bulkhead once the other goroutine has
	// released the one held at the start.
	<-ch
	p, err := b.TryAcquire(bg, 2)
	if err != nil {
		t.Fatalf("iteration %d: TryAcquire(2) after a cancelled Acquire: %v", i, err)
	}
	release(t, b, p)
	// An acquire with an ended context fails even when it need not wait.
	if p, err := b.Acquire(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("iteration %d: Acquire with a cancelled context returned (permit %d, %v), want context.Canceled", i, p.ID(), err)
	}
}
