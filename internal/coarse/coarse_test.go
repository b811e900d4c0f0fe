package coarse_test

import (
	"sync"
	"testing"
	"time"

	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/internal/coarse"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func TestReadsSourceOncePerResolutionWhileInUse(t *testing.T) {
	src := clock.NewFake(t0)
	c := coarse.New(src, time.Millisecond)

	if got := c.Now(); !got.Equal(t0) {
		t.Fatalf("first reading %v, want %v", got, t0)
	}
	if src.Pending() != 1 {
		t.Fatalf("%d timers armed after the first reading, want 1", src.Pending())
	}
	src.Advance(500 * time.Microsecond) // before the refresh
	if got := c.Now(); !got.Equal(t0) {
		t.Fatalf("reading between refreshes %v, want the stored %v", got, t0)
	}
	src.Advance(500 * time.Microsecond) // the refresh fires: someone read
	waitPending(t, src, 1)
	if got, want := c.Now(), t0.Add(time.Millisecond); !got.Equal(want) {
		t.Fatalf("reading after a refresh %v, want %v", got, want)
	}
}

func TestIdleClockDisarmsAndWakesExact(t *testing.T) {
	src := clock.NewFake(t0)
	c := coarse.New(src, time.Millisecond)
	c.Now()
	src.Advance(time.Millisecond) // read since arming: refresh and re-arm
	waitPending(t, src, 1)
	src.Advance(time.Millisecond) // nobody read: go idle
	deadline := time.Now().Add(10 * time.Second)
	for !c.Idle() {
		if time.Now().After(deadline) {
			t.Fatal("an unread clock did not go idle")
		}
		time.Sleep(time.Millisecond)
	}
	if src.Pending() != 0 {
		t.Fatal("an idle clock left a timer armed")
	}

	src.Advance(time.Hour)
	if got, want := c.Now(), t0.Add(time.Hour+2*time.Millisecond); !got.Equal(want) {
		t.Fatalf("first reading after idling %v, want the exact %v", got, want)
	}
	if src.Pending() != 1 {
		t.Fatal("waking did not arm the refresh timer")
	}
}

func TestOffsetRoundTrips(t *testing.T) {
	src := clock.NewFake(t0)
	c := coarse.New(src, time.Millisecond)
	src.Advance(3 * time.Second)
	off := c.Offset()
	if got, want := c.At(off), t0.Add(3*time.Second); !got.Equal(want) {
		t.Fatalf("At(Offset()) = %v, want %v", got, want)
	}
}

// TestConcurrentReadersNeverGoBack runs readers against the real clock's
// refresh timers: each reader's readings never decrease, and the clock goes
// idle (no timer goroutine left) once they stop, which goleak checks.
func TestConcurrentReadersNeverGoBack(t *testing.T) {
	c := coarse.New(clock.Real, 50*time.Microsecond)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			var last time.Time
			for range 20000 {
				now := c.Now()
				if now.Before(last) {
					t.Errorf("reading went back from %v to %v", last, now)
					return
				}
				last = now
			}
		})
	}
	wg.Wait()
	if d := time.Since(c.Now()); d < 0 {
		t.Fatalf("coarse reading %v ahead of the real clock", -d)
	}
}

// waitPending waits for the fake clock's timer functions (which run on their
// own goroutines) to re-arm or not.
func waitPending(t *testing.T, c *clock.Fake, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for c.Pending() != want {
		if time.Now().After(deadline) {
			t.Fatalf("%d timers pending, want %d", c.Pending(), want)
		}
		time.Sleep(time.Millisecond)
	}
}
