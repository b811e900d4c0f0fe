package clocktest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/groupexec/groupexec/internal/clocktest"
)

// hangGuard bounds every wait for something that must happen: past it, the
// test fails rather than hangs.
const hangGuard = 30 * time.Second

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func waitClosed(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(hangGuard):
		t.Fatalf("%s: not within %v", what, hangGuard)
	}
}

// A fired timer's function counts as running from the Advance that starts
// it, before its goroutine is scheduled, until it returns; Idle waits for
// that.
func TestTrackedCountsAFiredFunctionUntilItReturns(t *testing.T) {
	c := clocktest.NewTracked(time.Unix(0, 0))
	release := make(chan struct{})
	c.AfterFunc(time.Second, func() { <-release })
	if n := c.Running(); n != 0 {
		t.Fatalf("%d running before the timer is due", n)
	}
	if !isClosed(c.Idle()) {
		t.Fatal("Idle not closed with nothing running")
	}
	if n := c.Advance(time.Second); n != 1 {
		t.Fatalf("Advance started %d timers, want 1", n)
	}
	if n := c.Running(); n != 1 {
		t.Fatalf("%d running right after Advance, want 1", n)
	}
	idle := c.Idle()
	if isClosed(idle) {
		t.Fatal("Idle closed while the fired function runs")
	}
	close(release)
	waitClosed(t, idle, "Idle after the function returned")
	if n := c.Running(); n != 0 {
		t.Fatalf("%d running after Idle", n)
	}
}

// Idle waits for every function started, those of one Advance and those
// armed with no delay, and those that return at once never make the count
// go below zero.
func TestTrackedIdleWaitsForEveryStartedFunction(t *testing.T) {
	c := clocktest.NewTracked(time.Unix(0, 0))
	release := make(chan struct{})
	for range 3 {
		c.AfterFunc(time.Second, func() {})
		c.AfterFunc(2*time.Second, func() { <-release })
	}
	if n := c.Advance(2 * time.Second); n != 6 {
		t.Fatalf("Advance started %d timers, want 6", n)
	}
	c.AfterFunc(0, func() { <-release })
	if n := c.Running(); n < 4 || n > 7 {
		t.Fatalf("%d running, want the 4 held and at most the 3 others", n)
	}
	idle := c.Idle()
	close(release)
	waitClosed(t, idle, "Idle after every function returned")
	if n := c.Running(); n != 0 {
		t.Fatalf("%d running after Idle", n)
	}
}

// A timer stopped before it fires never counts, and a function that arms
// another timer counts that one only once it fires.
func TestTrackedCountsOnlyFiredTimers(t *testing.T) {
	c := clocktest.NewTracked(time.Unix(0, 0))
	if !c.AfterFunc(time.Second, func() { t.Error("a stopped timer fired") }).Stop() {
		t.Fatal("Stop of a pending timer reported false")
	}
	rearmed := make(chan struct{})
	c.AfterFunc(time.Second, func() {
		c.AfterFunc(time.Second, func() { close(rearmed) })
	})
	if n := c.Advance(time.Second); n != 1 {
		t.Fatalf("Advance started %d timers, want 1", n)
	}
	waitClosed(t, c.Idle(), "Idle after the first function armed the next")
	if n := c.Running(); n != 0 || c.Pending() != 1 {
		t.Fatalf("%d running, %d pending: want the re-armed timer pending only", n, c.Pending())
	}
	if n := c.Advance(time.Second); n != 1 {
		t.Fatalf("Advance started %d timers, want 1", n)
	}
	waitClosed(t, rearmed, "the re-armed timer fired")
	waitClosed(t, c.Idle(), "Idle after the re-armed function returned")
}

// A nil function panics as Fake's does, at the call, counting nothing.
func TestTrackedAfterFuncNilPanics(t *testing.T) {
	c := clocktest.NewTracked(time.Unix(0, 0))
	for _, d := range []time.Duration{0, time.Second} {
		func() {
			defer func() {
				if msg, _ := recover().(string); !strings.Contains(msg, "Fake.AfterFunc") {
					t.Errorf("AfterFunc(%v, nil): recovered %q, want a panic naming Fake.AfterFunc", d, msg)
				}
			}()
			c.AfterFunc(d, nil)
		}()
	}
	if n := c.Running(); n != 0 || c.Pending() != 0 {
		t.Fatalf("%d running, %d pending after refused AfterFuncs", n, c.Pending())
	}
}
