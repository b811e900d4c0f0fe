package clock_test

import (
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
