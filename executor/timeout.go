package executor

import (
	"sync/atomic"
	"time"

	"github.com/groupexec/groupexec/clock"
)

// Queue timeouts cost one timer per group with waiting tasks, not one per
// task: every task waits the same policy timeout and a group's queue is FIFO
// (its tasks' submission times are read under the group's mutex, in queue
// order), so its head always has the group's earliest deadline. The timer is
// armed for the head; when it fires it removes every head past its deadline
// and re-arms for the new head. A timer that fires after its head has
// started just re-arms.

// armLocked arms g's timer for its head, if a timeout is set and none is
// armed. now is the current time since the epoch, read under g's mutex:
// a reading taken before the head joined the queue (it joined between the
// reading and the lock) would arm the timer late by the time between.
func (ex *Executor) armLocked(g *group, now time.Duration) {
	if ex.timeout <= 0 || g.timer != nil || ex.stateNow() == closed {
		return
	}
	h := g.waiting.front
	if h == nil {
		return
	}
	g.timerSeq++
	seq := g.timerSeq
	g.timer = afterFunc(ex.clk, h.submitted+ex.timeout-now, func() { ex.expire(g, seq) })
}

// afterFunc arms a timer of clk, or returns nil if its AfterFunc panics.
// An injected clock (WithClock) is user code, called under a group's
// mutex: a panic going on up would leave it held. A group whose timer is
// not armed still refuses a head past its deadline when a finish or a
// dispatch would start it, and arms a timer again when its queue next
// fills.
func afterFunc(clk clock.Clock, d time.Duration, f func()) (t clock.Timer) {
	defer func() {
		if recover() != nil {
			t = nil
		}
	}()
	return clk.AfterFunc(d, f)
}

// stopTimer stops t, ignoring a panic, for afterFunc's reason: a timer
// that fires after all finds its group's timer gone, or another, and does
// nothing (expire).
func stopTimer(t clock.Timer) {
	defer func() { _ = recover() }()
	t.Stop()
}

// expire removes g's waiting tasks that are past the queue timeout. seq
// identifies the timer that fired: a timer stopped too late (it had fired,
// its call not yet run) finds another armed in its place and does nothing.
func (ex *Executor) expire(g *group, seq uint64) {
	if h := testHookExpiring.Load(); h != nil {
		(*h)(ex)
	}
	var b batch
	g.mu.Lock()
	if seq != g.timerSeq || g.timer == nil {
		g.mu.Unlock()
		return
	}
	now := ex.since() // under the lock: no task queued since is ahead of it (armLocked)
	g.timer = nil
	if ex.stateNow() == closed {
		g.mu.Unlock()
		return
	}
	for h := g.waiting.front; h != nil && now-h.submitted >= ex.timeout; h = g.waiting.front {
		ex.removeWaitingLocked(g, h, Rejected)
		b.expired.add(h)
	}
	ex.armLocked(g, now)
	ex.unlock(g, &b)
}

// testHookExpiring, when set by a test, runs as a queue timeout's timer
// of any executor fires, before it locks its group. Atomic: timers of
// executors of earlier tests may still fire as a test sets it.
var testHookExpiring atomic.Pointer[func(*Executor)]
