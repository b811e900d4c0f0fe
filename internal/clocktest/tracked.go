package clocktest

import (
	"sync"
	"time"

	"github.com/groupexec/groupexec/clock"
)

// Tracked is a clock.Fake that counts the timer functions it has started
// and that have not yet returned. A Fake's Advance starts each due timer's
// function in its own goroutine and returns before it runs: a function
// that reads Now and then arms a timer for a time relative to it (a
// queue timeout re-arming for its next task) reads one time and arms from
// another if the test advances the clock again in between, and its timer
// fires late by the step. A test that waits on Idle before each Advance
// moves the time only while no timer function is between the two.
// Tracked is safe for concurrent use.
type Tracked struct {
	*clock.Fake

	mu      sync.Mutex
	running int             // timer functions started, not yet returned
	waiters []chan struct{} // Idle's, closed when running drops to 0
}

// NewTracked returns a Tracked clock reading start.
func NewTracked(start time.Time) *Tracked { return &Tracked{Fake: clock.NewFake(start)} }

// AfterFunc is Fake's, with f counted as running from the moment its
// timer fires until it returns.
func (c *Tracked) AfterFunc(d time.Duration, f func()) clock.Timer {
	if f == nil {
		return c.Fake.AfterFunc(d, nil) // Fake's panic, naming the call
	}
	if d <= 0 {
		// Fake starts it at once, not through Advance.
		c.mu.Lock()
		c.running++
		c.mu.Unlock()
	}
	return c.Fake.AfterFunc(d, func() {
		defer c.returned()
		f()
	})
}

// Advance is Fake's: it moves the time by d and starts the timers now
// due, which count as running from then on. The count is taken under the
// same lock as the start, so that a function that returns at once is
// never seen returned before it is seen started.
func (c *Tracked) Advance(d time.Duration) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.Fake.Advance(d)
	c.running += n
	return n
}

// Running reports how many timer functions have started and not returned.
func (c *Tracked) Running() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.running
}

// Idle returns a channel closed once no timer function is running: at
// once if none is. A function started after the channel is closed does
// not reopen it; call Idle again.
func (c *Tracked) Idle() <-chan struct{} {
	ch := make(chan struct{})
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running == 0 {
		close(ch)
	} else {
		c.waiters = append(c.waiters, ch)
	}
	return ch
}

func (c *Tracked) returned() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.running--
	if c.running == 0 {
		for _, ch := range c.waiters {
			close(ch)
		}
		c.waiters = nil
	}
}
