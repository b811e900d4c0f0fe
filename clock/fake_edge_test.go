package clock_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/clock"
)

// A negative duration is as due as 0, as it is for Real: the function
// starts at once and no timer is left pending, in the past, for a later
// Advance to start.
func TestFakeNegativeDurationFiresAtOnce(t *testing.T) {
	c := clock.NewFake(time.Unix(0, 0))
	done := make(chan struct{})
	timer := c.AfterFunc(-time.Second, func() { close(done) })
	if n := c.Pending(); n != 0 {
		t.Fatalf("%d timers pending after a negative AfterFunc, want it started", n)
	}
	<-done
	if timer.Stop() {
		t.Fatal("Stop reported stopping a timer that fired")
	}
	if n := c.Advance(time.Second); n != 0 {
		t.Fatalf("Advance started %d timers, want none", n)
	}
}

// Stop racing with Advance decides each timer once: either Stop reports
// true and the function never runs, or Stop reports false and it runs
// exactly once.
func TestFakeStopRacingAdvance(t *testing.T) {
	c := clock.NewFake(time.Unix(0, 0))
	const timers = 200
	var ran [timers]atomic.Int32
	fired := make(chan struct{}, timers)
	ts := make([]clock.Timer, timers)
	for i := range ts {
		ts[i] = c.AfterFunc(time.Duration(i%7+1)*time.Millisecond, func() {
			ran[i].Add(1)
			fired <- struct{}{}
		})
	}
	var stopped [timers]bool
	var stopper sync.WaitGroup
	stopper.Go(func() {
		for i := range ts {
			stopped[i] = ts[i].Stop()
		}
	})
	started := 0
	for range 7 {
		started += c.Advance(time.Millisecond)
	}
	stopper.Wait()
	for range started {
		<-fired // every function Advance started has run
	}
	nStopped := 0
	for i := range ts {
		switch r := ran[i].Load(); {
		case stopped[i] && r != 0:
			t.Errorf("timer %d: stopped, yet ran %d times", i, r)
		case !stopped[i] && r != 1:
			t.Errorf("timer %d: not stopped, ran %d times", i, r)
		}
		if stopped[i] {
			nStopped++
		}
	}
	if started+nStopped != timers || c.Pending() != 0 {
		t.Errorf("Advance started %d, Stop stopped %d, %d pending; want %d in all", started, nStopped, c.Pending(), timers)
	}
}
