package clock

import (
	"cmp"
	"slices"
	"sync"
	"time"
)

// Fake is a Clock that moves only when told to. Timers due at or before the
// new time are started in due order, each in its own goroutine, as Real's
// are: their functions may run in any order, and a test that needs one
// order waits for each in turn.
// Fake is safe for concurrent use.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
	seq    uint64
}

// NewFake returns a Fake reading start.
func NewFake(start time.Time) *Fake { return &Fake{now: start} }

// Now returns the fake time.
func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc schedules f to run when the fake time reaches Now()+d; a d of
// 0 or less runs it at once, in its own goroutine. It panics if f is nil:
// the call would otherwise fail, unrecoverably, only when the timer fires,
// in whatever goroutine moved the time.
func (c *Fake) AfterFunc(d time.Duration, f func()) Timer {
	if f == nil {
		panic("clock: Fake.AfterFunc(" + d.String() + ", nil): the function must not be nil")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &fakeTimer{c: c, due: c.now.Add(d), seq: c.seq, f: f}
	if d <= 0 {
		go f()
		return t
	}
	c.timers = append(c.timers, t)
	return t
}

// Advance moves the time forward by d and starts every timer now due. It
// returns the number of timers it started; their functions run concurrently
// and may still be running when Advance returns. d must be >= 0: time never
// goes backwards (Real's monotonic reading does not, and the code under test
// takes durations as differences of Now), so a negative d is a bug in the
// test, and Advance panics naming it, with the time and timers unchanged.
// 0 starts nothing new: every timer already due has been started.
func (c *Fake) Advance(d time.Duration) int {
	if d < 0 {
		panic("clock: Fake.Advance(" + d.String() + "): the duration must be >= 0; time never goes backwards")
	}
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*fakeTimer
	keep := c.timers[:0]
	for _, t := range c.timers {
		if !t.due.After(c.now) {
			due = append(due, t)
		} else {
			keep = append(keep, t)
		}
	}
	clear(c.timers[len(keep):])
	c.timers = keep
	c.mu.Unlock()
	slices.SortFunc(due, func(a, b *fakeTimer) int {
		if c := a.due.Compare(b.due); c != 0 {
			return c
		}
		return cmp.Compare(a.seq, b.seq)
	})
	for _, t := range due {
		go t.f()
	}
	return len(due)
}

// Pending reports how many timers are waiting to fire.
func (c *Fake) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

type fakeTimer struct {
	c   *Fake
	due time.Time
	seq uint64
	f   func()
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	for i, x := range t.c.timers {
		if x == t {
			t.c.timers = slices.Delete(t.c.timers, i, i+1)
			return true
		}
	}
	return false
}
