// Package clocktest has clocks for tests: of every kind that can hold nil
// inside a non-nil clock.Clock (a function, map, slice and channel), for the
// tests of the constructors that refuse such a clock (internal/typednil),
// one that a test steps back (Stepped), which clock.Fake never does, and a
// clock.Fake that tells when its fired timers' functions have returned
// (Tracked).
package clocktest

import (
	"sync"
	"time"

	"github.com/groupexec/groupexec/clock"
)

// Clocks of the kinds that can be nil inside a non-nil interface. A nil
// one's Now panics or reads the zero time (a map's; a channel's, which does
// not wait for a time, so that a constructor without the check fails rather
// than hangs). Their timers are clock.Real's.
type (
	Func  func() time.Time
	Map   map[string]time.Time // Now reads key "now"
	Slice []time.Time          // Now reads the last
	Chan  chan time.Time       // Now receives a time if one is ready
)

func (c Func) Now() time.Time  { return c() }
func (c Map) Now() time.Time   { return c["now"] }
func (c Slice) Now() time.Time { return c[len(c)-1] }
func (c Chan) Now() time.Time {
	select {
	case now := <-c:
		return now
	default:
		return time.Time{}
	}
}

func (Func) AfterFunc(d time.Duration, f func()) clock.Timer  { return clock.Real.AfterFunc(d, f) }
func (Map) AfterFunc(d time.Duration, f func()) clock.Timer   { return clock.Real.AfterFunc(d, f) }
func (Slice) AfterFunc(d time.Duration, f func()) clock.Timer { return clock.Real.AfterFunc(d, f) }
func (Chan) AfterFunc(d time.Duration, f func()) clock.Timer  { return clock.Real.AfterFunc(d, f) }

// Nils returns a nil clock of each kind, each in a non-nil clock.Clock.
func Nils() []clock.Clock { return []clock.Clock{Func(nil), Map(nil), Slice(nil), Chan(nil)} }

// At returns a clock of each kind but the channel's that reads now.
func At(now time.Time) []clock.Clock {
	return []clock.Clock{Func(func() time.Time { return now }), Map{"now": now}, Slice{now}}
}

// Stepped is a clock that the test sets, backwards too, as a wall clock
// without Go's monotonic reading steps back when NTP corrects it. Its
// timers are clock.Real's. It is safe for concurrent use.
type Stepped struct {
	mu  sync.Mutex
	now time.Time
}

// NewStepped returns a Stepped clock reading now.
func NewStepped(now time.Time) *Stepped { return &Stepped{now: now} }

func (c *Stepped) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set makes the clock read now, before or after what it read.
func (c *Stepped) Set(now time.Time) {
	c.mu.Lock()
	c.now = now
	c.mu.Unlock()
}

// Add moves the clock by d, negative or not.
func (c *Stepped) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func (*Stepped) AfterFunc(d time.Duration, f func()) clock.Timer { return clock.Real.AfterFunc(d, f) }
