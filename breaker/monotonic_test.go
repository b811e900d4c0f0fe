package breaker_test

import (
	"testing"
	"time"
	"unsafe"

	"github.com/groupexec/groupexec/breaker"
)

// century200 is a duration past the range of a reading's monotonic-clock
// form: added to a reading of time.Now, it yields a time after 2157, which
// keeps only the wall reading.
const century200 = 200 * 365 * 24 * time.Hour

// wallStepped returns r, a reading of time.Now (it carries Go's monotonic
// reading), with its wall reading moved by step, a whole number of
// seconds, and its monotonic reading unchanged: what time.Now returns
// after the system clock is stepped (an NTP step, a virtual machine
// resumed), which clock.Real's readings are immune to. The time package
// has no way to make one, so wallStepped edits the wall field (Go's layout
// since 1.9: wall, ext, loc; with a monotonic reading, bits 30 to 62 of
// wall are seconds since 1885), and checks what it made.
func wallStepped(tb testing.TB, r time.Time, step time.Duration) time.Time {
	tb.Helper()
	type layout struct {
		wall uint64
		ext  int64
		loc  *time.Location
	}
	if unsafe.Sizeof(layout{}) != unsafe.Sizeof(time.Time{}) || step%time.Second != 0 {
		tb.Fatalf("wallStepped: unexpected time.Time layout, or step %v not whole seconds", step)
	}
	s := r
	p := (*layout)(unsafe.Pointer(&s))
	p.wall += uint64(int64(step/time.Second)) << 30
	if s.Sub(r) != 0 || s.Round(0).Sub(r.Round(0)) != step {
		tb.Fatalf("wallStepped: got monotonic difference %v and wall difference %v, want 0 and %v",
			s.Sub(r), s.Round(0).Sub(r.Round(0)), step)
	}
	return s
}

// Readings that carry Go's monotonic reading are measured by it, whatever
// the Interval: a step of the wall clock does not end a closed period,
// even one so long that its end, as a time, falls past the range of
// monotonic readings (and so holds only a wall reading).
func TestWallClockStepDoesNotEndALongInterval(t *testing.T) {
	for _, interval := range []time.Duration{time.Hour, century200, forever} {
		t.Run(interval.String(), func(t *testing.T) {
			start := time.Now()
			clk := &timeClock{t: start}
			cb := mustNew(t, breaker.Settings{Interval: interval, Clock: clk})
			for range 4 {
				wantErr(t, run(cb, false), errBoom)
			}
			// A millisecond later, the wall clock stepped a second back.
			clk.t = wallStepped(t, start.Add(time.Millisecond), -time.Second)
			wantErr(t, run(cb, false), errBoom) // the 5th consecutive failure of the period
			wantState(t, cb, breaker.StateOpen)
		})
	}
}

// Likewise a wall-clock step does not restart a long Timeout: the time
// left is measured on the monotonic clock from the opening.
func TestWallClockStepDoesNotRestartALongTimeout(t *testing.T) {
	for _, timeout := range []time.Duration{time.Hour, century200, forever} {
		t.Run(timeout.String(), func(t *testing.T) {
			start := time.Now()
			clk := &timeClock{t: start}
			cb := mustNew(t, breaker.Settings{Timeout: timeout, Clock: clk})
			trip(t, cb)
			clk.t = wallStepped(t, start.Add(time.Millisecond), -time.Second)
			wantErr(t, run(cb, true), breaker.ErrOpenState)
			if got, want := cb.RemainingDelay(), timeout-time.Millisecond; got != want {
				t.Fatalf("RemainingDelay() = %v, want %v (Timeout less the millisecond since the opening)", got, want)
			}
		})
	}
}
