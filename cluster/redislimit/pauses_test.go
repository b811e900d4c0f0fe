package redislimit_test

import (
	"sync"
	"testing"
	"time"
)

// pauseWatch records the spells in which this process or its redis-server
// stood still: a goroutine pings Redis in a loop, and a gap between two
// answers longer than pauseGap is a spell in which either the process was
// not run (a GC pause, a descheduled process) or Redis did not answer (a
// paused or descheduled redis-server). A test that bounds how long
// something takes on the real clock takes these spells out of what it
// measures: no holder makes progress through them, and a loaded machine
// has them at any moment.
type pauseWatch struct {
	mu     sync.Mutex
	spells [][2]time.Time
	last   time.Time // the last answer
}

// pauseGap is the gap between two answers that counts as a spell: well
// above a ping's round trip and the loop's own sleep on a busy machine.
const pauseGap = 50 * time.Millisecond

// watchPauses starts a pauseWatch on the redis-server at addr, until the
// test ends.
func watchPauses(t *testing.T, addr string) *pauseWatch {
	t.Helper()
	c := newClient(t, addr)
	w := &pauseWatch{last: time.Now()}
	stop, done := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(stop); <-done })
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			if c.Ping(bg).Err() != nil {
				continue // no answer: the spell goes on
			}
			now := time.Now()
			w.mu.Lock()
			if now.Sub(w.last) > pauseGap {
				w.spells = append(w.spells, [2]time.Time{w.last, now})
			}
			w.last = now
			w.mu.Unlock()
		}
	}()
	return w
}

// within returns how much of [from, to] the spells cover, once the watch
// has had an answer after to: a spell that ends after to is recorded by
// then.
func (w *pauseWatch) within(t *testing.T, from, to time.Time) time.Duration {
	t.Helper()
	eventually(t, "redis-server answers a ping", time.Minute, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.last.After(to)
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	var d time.Duration
	for _, s := range w.spells {
		a, b := s[0], s[1]
		if a.Before(from) {
			a = from
		}
		if b.After(to) {
			b = to
		}
		if b.After(a) {
			d += b.Sub(a)
		}
	}
	return d
}
