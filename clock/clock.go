// Package clock is the time source of groupexec's packages. Production code
// uses Real; tests inject a Fake and move time by hand, so nothing depends on
// how fast the machine is:
//
//	c := clock.NewFake(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
//	ex, err := executor.New(p, executor.WithClock(c))
//	...
//	c.Advance(2 * time.Second) // a task queued under policy.WithQueueTimeout(2 * time.Second) times out now
//
// ExampleFake (example_test.go) runs a Fake's timers.
package clock

import "time"

// Clock tells the time and runs functions later.
type Clock interface {
	// Now returns the current time. Durations are taken as differences of
	// Now, so Real keeps Go's monotonic reading.
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has passed. f must not
	// be nil: Real and Fake panic at the call.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc call.
type Timer interface {
	// Stop prevents the call if it has not started, and reports whether it
	// did so.
	Stop() bool
}

// Real is the system clock.
var Real Clock = realClock{}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// AfterFunc panics if f is nil, as Fake's does: time.AfterFunc accepts it
// and the program crashes, unrecoverably, in the timer's goroutine when it
// fires, so a mistake a Fake reports in tests would pass them and crash in
// production.
func (realClock) AfterFunc(d time.Duration, f func()) Timer {
	if f == nil {
		panic("clock: Real.AfterFunc(" + d.String() + ", nil): the function must not be nil")
	}
	return time.AfterFunc(d, f)
}
