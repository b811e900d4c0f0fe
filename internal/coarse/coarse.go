// Package coarse is a clock for hot paths that must stamp a time but cannot
// pay for reading one: on the machines we measured, time.Now costs 25-50 ns,
// several times a whole permit acquire and release.
//
// A Clock reads its source at most once per resolution while it is in use,
// and not at all while it is not: a timer refreshes the reading only if
// someone read it since the last refresh, so an idle Clock has no timer armed
// and its first reading after idling is exact.
package coarse

import (
	"sync/atomic"
	"time"

	"github.com/groupexec/groupexec/clock"
)

// Timer states.
const (
	idle  = iota // no timer armed; the stored reading may be old
	armed        // a timer is armed; nobody read since the last refresh
	inUse        // a timer is armed; someone read since the last refresh
)

// Clock is a coarse reading of a source clock. Its zero value is not usable;
// call New.
type Clock struct {
	src   clock.Clock
	res   time.Duration
	base  time.Time    // the source's time at New; readings are offsets from it
	off   atomic.Int64 // the latest reading, in nanoseconds after base
	state atomic.Uint32
}

// New returns a Clock that reads src at most once per res while in use.
func New(src clock.Clock, res time.Duration) *Clock {
	return &Clock{src: src, res: res, base: src.Now()}
}

// Now returns a time at most about two resolutions old (plus however late the
// refresh timer runs). Successive readings never go backwards.
func (c *Clock) Now() time.Time { return c.base.Add(time.Duration(c.Offset())) }

// Offset is Now as nanoseconds after Base: a stamp that fits in an int64,
// turned back into a time by At. Its common case is small enough to inline.
func (c *Clock) Offset() int64 {
	if c.state.Load() == inUse {
		return c.off.Load()
	}
	return c.offsetSlow()
}

func (c *Clock) offsetSlow() int64 {
	if c.state.CompareAndSwap(armed, inUse) || c.state.Load() == inUse {
		return c.off.Load()
	}
	return c.wake()
}

// At returns the time of an Offset.
func (c *Clock) At(off int64) time.Time { return c.base.Add(time.Duration(off)) }

// wake reads the source (the stored reading may be arbitrarily old) and arms
// the refresh timer if no one else has. It reads before it claims the
// timer, so that a Now that panics leaves the clock idle, as it was.
func (c *Clock) wake() int64 {
	off := c.refresh()
	if c.state.CompareAndSwap(idle, inUse) {
		c.arm()
	}
	return off
}

// arm arms the refresh timer for wake. If the source's AfterFunc panics (or
// exits the goroutine), no timer is armed, so the clock goes back to idle:
// left in use, it would claim a timer that never comes, and every later
// reading would return this one, never refreshed. Nothing else moves the
// state from in use without a timer, so the store overwrites no one's.
func (c *Clock) arm() {
	armed := false
	defer func() {
		if !armed {
			c.state.Store(idle)
		}
	}()
	c.src.AfterFunc(c.res, c.tick)
	armed = true
}

// refresh stores the source's time unless a later one is already stored, so
// that concurrent refreshes never move the reading backwards.
func (c *Clock) refresh() int64 {
	off := int64(c.src.Now().Sub(c.base))
	for {
		old := c.off.Load()
		if old >= off {
			return old
		}
		if c.off.CompareAndSwap(old, off) {
			return off
		}
	}
}

// tick refreshes the reading and re-arms if the clock was read since the last
// tick; otherwise it lets the clock go idle.
func (c *Clock) tick() {
	for {
		switch c.state.Load() {
		case inUse:
			if c.state.CompareAndSwap(inUse, armed) {
				c.refresh()
				c.src.AfterFunc(c.res, c.tick)
				return
			}
		case armed:
			if c.state.CompareAndSwap(armed, idle) {
				return
			}
		default:
			return // not reached: only tick leaves the armed states
		}
	}
}
