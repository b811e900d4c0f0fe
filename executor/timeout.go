package executor

import "time"

// Queue timeouts cost one timer per group with waiting tasks, not one per
// task: every task waits the same policy timeout and a group's queue is FIFO,
// so its head always has the group's earliest deadline. The timer is armed
// for the head; when it fires it removes every head past its deadline and
// re-arms for the new head. A timer that fires after its head has started
// just re-arms.

// armLocked arms g's timer for its head, if a timeout is set and none is
// armed. now is the current time since the epoch.
func (ex *Executor) armLocked(g *group, now time.Duration) {
	if ex.timeout <= 0 || g.timer != nil || ex.state == closed {
		return
	}
	h := g.head()
	if h == nil {
		return
	}
	g.timerSeq++
	seq := g.timerSeq
	g.timer = ex.clk.AfterFunc(h.submitted+ex.timeout-now, func() { ex.expire(g, seq) })
}

// expire removes g's waiting tasks that are past the queue timeout. seq
// identifies the timer that fired: a timer stopped too late (it had fired,
// its call not yet run) finds another armed in its place and does nothing.
func (ex *Executor) expire(g *group, seq uint64) {
	now := ex.since()
	var b batch
	ex.mu.Lock()
	if seq != g.timerSeq || g.timer == nil {
		ex.mu.Unlock()
		return
	}
	g.timer = nil
	if ex.state == closed {
		ex.mu.Unlock()
		return
	}
	for h := g.head(); h != nil && now-h.submitted >= ex.timeout; h = g.head() {
		ex.removeWaitingLocked(h, Rejected)
		b.expired.add(h)
	}
	ex.armLocked(g, now)
	ex.dispatchLocked(&b)
	ex.launchLocked(&b)
	ex.mu.Unlock()
	ex.afterUnlock(&b)
}
