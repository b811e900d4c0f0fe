package coarse_test

import (
	"testing"
	"time"

	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/internal/coarse"
)

// failingArm is a source whose AfterFunc panics while fail is set, and
// whose Now panics while failNow is set.
type failingArm struct {
	*clock.Fake
	fail, failNow bool
}

func (c *failingArm) Now() time.Time {
	if c.failNow {
		panic("Now failed")
	}
	return c.Fake.Now()
}

func (c *failingArm) AfterFunc(d time.Duration, f func()) clock.Timer {
	if c.fail {
		panic("AfterFunc failed")
	}
	return c.Fake.AfterFunc(d, f)
}

// A source whose AfterFunc panics as a reading wakes the clock arms no
// refresh timer: the clock must not then claim one is armed, or every later
// reading would return that one, never refreshed. It stays idle, so the
// next reading reads the source again and tries to arm again.
func TestPanickingAfterFuncLeavesClockIdle(t *testing.T) {
	src := &failingArm{Fake: clock.NewFake(t0), fail: true}
	c := coarse.New(src, time.Millisecond)
	mustPanic(t, c)
	if !c.Idle() {
		t.Error("the clock claims a refresh timer after AfterFunc panicked")
	}

	src.fail = false
	src.Advance(time.Hour)
	if got, want := c.Now(), t0.Add(time.Hour); !got.Equal(want) {
		t.Fatalf("reading after a failed arm %v, want the exact %v", got, want)
	}
	if src.Pending() != 1 {
		t.Fatalf("%d refresh timers armed after the next reading, want 1", src.Pending())
	}
}

// A source whose Now panics as a reading wakes the clock leaves it idle:
// nothing was read, so nothing may be armed or claimed, and the next
// reading reads the source again.
func TestPanickingNowLeavesClockIdle(t *testing.T) {
	src := &failingArm{Fake: clock.NewFake(t0)}
	c := coarse.New(src, time.Millisecond)
	src.failNow = true
	mustPanic(t, c)
	if !c.Idle() || src.Pending() != 0 {
		t.Errorf("after a panicking Now: idle %v, %d timers armed; want idle, none", c.Idle(), src.Pending())
	}

	src.failNow = false
	src.Advance(time.Hour)
	if got, want := c.Now(), t0.Add(time.Hour); !got.Equal(want) {
		t.Fatalf("reading after a failed Now %v, want the exact %v", got, want)
	}
	if src.Pending() != 1 {
		t.Fatalf("%d refresh timers armed after the next reading, want 1", src.Pending())
	}
}

// mustPanic reads c, whose source fails, and checks that the source's
// panic goes on up the reader.
func mustPanic(t *testing.T, c *coarse.Clock) {
	t.Helper()
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the source's panic did not go on up")
			}
		}()
		c.Now()
	}()
}
