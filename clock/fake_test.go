package clock_test

import (
	"strings"
	"testing"
	"time"

	"github.com/groupexec/groupexec/clock"
)

func TestFakeFiresDueTimers(t *testing.T) {
	start := time.Unix(0, 0)
	c := clock.NewFake(start)
	fired := make(chan int, 3)
	add := func(d time.Duration, v int) clock.Timer {
		return c.AfterFunc(d, func() { fired <- v })
	}
	add(3*time.Second, 3)
	add(time.Second, 1)
	stopped := add(2*time.Second, 2)
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop must succeed once")
	}
	if n := c.Advance(999 * time.Millisecond); n != 0 {
		t.Fatalf("%d timers fired early", n)
	}
	if n := c.Advance(time.Millisecond); n != 1 || <-fired != 1 {
		t.Fatalf("%d timers fired at 1s", n)
	}
	if n := c.Advance(time.Hour); n != 1 || <-fired != 3 || c.Pending() != 0 {
		t.Fatalf("%d fired, %d pending", n, c.Pending())
	}
	if len(fired) != 0 {
		t.Error("the stopped timer fired")
	}
	if got := c.Now().Sub(start); got != time.Hour+time.Second {
		t.Errorf("now is %v after start", got)
	}
}

func TestFakeZeroDurationFiresAtOnce(t *testing.T) {
	c := clock.NewFake(time.Unix(0, 0))
	done := make(chan struct{})
	if c.AfterFunc(0, func() { close(done) }).Stop() {
		t.Error("Stop reported stopping a timer that fired")
	}
	<-done
}

func TestRealClock(t *testing.T) {
	done := make(chan struct{})
	clock.Real.AfterFunc(0, func() { close(done) })
	<-done
	if clock.Real.Now().IsZero() {
		t.Fatal("zero time")
	}
}

// Time never goes backwards: a negative Advance is a bug in the test that
// calls it, so it panics naming the value, and moves nothing, rather than
// leave timers due in the past and Now earlier than what callers have read.
func TestFakeAdvanceNegativePanics(t *testing.T) {
	start := time.Unix(0, 0)
	c := clock.NewFake(start)
	c.AfterFunc(time.Second, func() { t.Error("a timer fired on a negative Advance") })
	func() {
		defer func() {
			v := recover()
			msg, _ := v.(string)
			if !strings.Contains(msg, "Fake.Advance(-1s)") {
				t.Errorf("recovered %v, want a panic naming Fake.Advance(-1s)", v)
			}
		}()
		c.Advance(-time.Second)
	}()
	if !c.Now().Equal(start) || c.Pending() != 1 {
		t.Fatalf("after a refused Advance: now %v after start, %d pending", c.Now().Sub(start), c.Pending())
	}
	if n := c.Advance(0); n != 0 || !c.Now().Equal(start) {
		t.Fatalf("Advance(0) started %d timers, moved to %v", n, c.Now().Sub(start))
	}
}

// A nil function would fail only when its timer fires, in whatever goroutine
// moved the time; AfterFunc refuses it where the mistake is.
func TestFakeAfterFuncNilPanics(t *testing.T) {
	c := clock.NewFake(time.Unix(0, 0))
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
	if c.Pending() != 0 {
		t.Fatalf("%d timers pending after refused AfterFuncs", c.Pending())
	}
}

// Real refuses a nil function where the mistake is, as Fake does: time's
// AfterFunc would accept it and crash the program, unrecoverably, in the
// timer's goroutine when it fires, so code tested on a Fake would pass its
// tests and crash in production.
func TestRealAfterFuncNilPanics(t *testing.T) {
	var timer clock.Timer
	func() {
		defer func() {
			if msg, _ := recover().(string); !strings.Contains(msg, "Real.AfterFunc") {
				t.Errorf("AfterFunc(1h, nil): recovered %q, want a panic naming Real.AfterFunc", msg)
			}
		}()
		timer = clock.Real.AfterFunc(time.Hour, nil)
	}()
	if timer != nil {
		timer.Stop() // before it fires and crashes the test binary
	}
}
