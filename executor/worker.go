package executor

import (
	"context"
	"runtime"
	"sync/atomic"
	"time"
)

// Workers. A started task goes on the run queue; it holds its permits from
// then on. A worker that finishes a task takes the next one from the run
// queue in the same goroutine; with nothing to run it parks, up to maxParked
// of them, until a task is handed to it. So a steady stream of submissions
// pays neither a goroutine start nor a wake-up per task. Parked workers exit
// at Close.

// worker is a parked goroutine's inbox; nil tells it to exit.
type worker chan *job

// maxParked bounds the idle workers kept: enough to hand a burst of starts
// to parked goroutines, few enough to cost little while idle (a parked
// goroutine is a few KiB of stack; 64 of them well under a MiB).
const maxParked = 64

// work runs j and then, back to back, the tasks handed to this goroutine.
//
// A task that panics or calls runtime.Goexit ends its worker: abort, deferred
// once here rather than once per task (two defers per task were ~9% of a
// tiny task's cost), completes it and hands the next task to another
// goroutine.
func (ex *Executor) work(j *job) {
	defer ex.workers.Done()
	var cur current
	defer ex.abort(&cur)
	w := make(worker, 1)
	var b batch // reused: finish would otherwise zero one per task
	start := unread
	n := 0 // tasks run back to back
	for j != nil {
		var parked bool
		j, start, parked = ex.run(j, start, w, &b, &cur)
		if parked {
			j = <-w
			start = unread
			n = 0
		} else if n++; n == yieldEvery {
			n = 0
			if runtime.GOMAXPROCS(0) > 1 {
				runtime.Gosched()
			}
		}
	}
}

// yieldEvery is how many tasks a worker runs back to back before it yields
// its P (runtime.Gosched). A worker that takes its next task itself readies
// no goroutine, and the runtime wakes an idle P only when one is readied:
// on a deep backlog of tiny tasks, the workers ended up on one P while the
// other stayed idle, half of the time of a flat batch's end on two cores
// (an execution trace). Gosched puts the worker on the global run queue and
// wakes an idle P. Every 1024 tasks: flat Go 10-14% faster on two cores
// (256: 5-9%, 4096: 2-9%, 64: slower). With one P there is nothing to
// wake, and yielding only costs.
const yieldEvery = 1024

// current is the task a worker is running, from begin until Fn returns,
// for abort.
type current struct {
	j             *job
	inFn          bool // begin is done: Fn runs
	start, queued time.Duration
}

// abort, deferred by work, completes the task that ended its worker's
// goroutine in its run: Fn panicked (Failed, with a *PanicError), or Fn, a
// cluster permit's Bind or the listener called runtime.Goexit, or begin
// panicked (Failed, ErrGoexit; the panic goes on, as it would have without
// the executor). It releases the task's permits and starts what fits, with
// no worker to continue: the run queue's tasks go to other goroutines.
func (ex *Executor) abort(cur *current) {
	j := cur.j
	if j == nil {
		return // between tasks: the executor's own code, nothing to complete
	}
	var err error = ErrGoexit
	if cur.inFn {
		if r := recover(); r != nil { // called directly by the deferred function, as recover must be
			err = newPanicError(r)
		}
	}
	ex.settle(j, Failed)
	ran := ex.since() - cur.start
	j.endRun()
	ex.finish(j, Failed, err, cur.queued, ran, nil, new(batch))
}

// unread stands for a time not read from the clock: a task that needs none
// (Executor.timed) leaves its worker without one for the next task.
const unread time.Duration = -1

// run runs a started j that became runnable at start (unread: not known;
// run reads the clock if j is timed). It returns the next task for this
// goroutine and when that became runnable (unread if j was untimed), or
// parks w and reports so. b is the worker's batch, empty; cur is its
// current task, for abort.
//
// The start handed on is the previous task's end, read before finish took
// the lock: a task submitted after that reading, and started by the same
// finish, would get a negative wait. It reads the clock afresh instead;
// unread, below any submission time, is read the same way.
func (ex *Executor) run(j *job, start time.Duration, w worker, b *batch, cur *current) (next *job, end time.Duration, parked bool) {
	timed := ex.timed(j)
	if timed && start < j.submitted {
		start = ex.since()
	}
	queued := start - j.submitted
	*cur = current{j: j, start: start, queued: queued}
	var ctx context.Context
	var err error
	if ex.listener == nil && j.x.Load() == nil && j.reusable() {
		ctx = (*groupCtx)(j.g) // what begin returns then, without the calls
	} else {
		ctx, err = ex.begin(j, queued)
	}
	var st Status
	if err != nil {
		st = Failed // a cluster permit's Bind panicked: Fn does not run
	} else {
		cur.inFn = true
		st, err = j.body.call(ctx)
	}
	cur.j = nil
	ex.settle(j, st)
	end = unread
	if timed {
		end = ex.since()
	}
	j.endRun()
	next, parked = ex.finish(j, st, err, queued, end-start, w, b)
	return next, end, parked
}

// settle records j's outcome in its group's breaker, which may run user code
// (OnStateChange), and only then counts the worker in ex.returned: from
// there on it takes the lock and pops the run queue without further delay,
// which is what lets launchLocked leave tasks on the run queue for it. The
// sooner a worker is counted, the fewer tasks need a wake-up: counting it
// right after Fn returns is worth a third of the per-task cost on tiny tasks.
func (ex *Executor) settle(j *job, st Status) {
	j.settle(st)
	ex.returned.Add(1)
}

// begin makes j's run context and tells the listener that j starts, queued
// after its submission. An error is a cluster permit's Bind that panicked.
func (ex *Executor) begin(j *job, queued time.Duration) (context.Context, error) {
	ctx, err := j.runContext()
	if ex.listener != nil {
		e := ex.event(j)
		e.Queued = queued
		ex.notify(onStarted, e)
	}
	return ctx, err
}

// finish ends a running j: it releases j's permits, starts what now fits,
// and completes j's handle after the permits are back. With w, it returns
// the next task on the run queue for the calling worker, or parks w. The
// caller has counted itself in ex.returned (settle). b is an empty batch,
// left empty.
//
// Without a listener, j's handle completes in the same locked section as
// the release, so j is never unsettled and finish pays for no drain
// accounting, unless Done handed out a channel: that is closed after the
// unlock, and j is unsettled until then. With a listener, the listener is
// told first, outside the lock, and the handle completes after it. A
// reusable j whose group's head is a light task hands its permits to that
// task instead of releasing them (handOffLocked).
func (ex *Executor) finish(j *job, st Status, err error, queued, ran time.Duration, w worker, b *batch) (next *job, parked bool) {
	inline := ex.listener == nil
	var doneCh chan struct{}
	var spare *goTask // j, kept for reuse (keepLocked)
	// Finishing workers queue on the gate, so that at most one of them at a
	// time waits on the executor's lock. Tiny tasks end almost together, and
	// without the gate dozens of workers queue on the lock in turn, with a
	// Submit that needs it (a task that starts, or waits first in its group)
	// behind them all: on two cores the submitting goroutine spent much of
	// its time there (mutex profile), and it is what feeds every worker.
	// A lock found free is taken at once, past the gate: that queues no one
	// on the lock, and spares the gate's two atomic writes, which most
	// finishes pay for nothing (session 14: flat Go -14%, grouped Go -9%).
	if !ex.mu.TryLock() {
		ex.gate.Lock()
		ex.mu.Lock()
		ex.gate.Unlock()
	}
	ex.finished++
	g := j.g
	if inline && ex.handsOffLocked(g, j) {
		next = ex.handOffLocked(g, j, st)
	} else {
		g.running--
		if trackRunning {
			g.trackLocked(j, false)
		}
		g.conc.Release(j.weight)
		ex.global.Release(j.weight)
		if ex.cluster != nil {
			ex.releaseClusterLocked(g, j)
		}
		g.counts.add(st)
		ex.counts.add(st)
		if inline {
			ex.endAdmissionLocked(g, j)
			// The breaker ticket was settled before the lock (ex.settle).
			if j.reusable() {
				j.publishReusable(st) // publish's case for j, inlined
			} else {
				doneCh, _ = j.publish(st, err, queued, ran)
			}
			if doneCh != nil {
				// Done handed out a channel, closed after the unlock: until
				// then j counts as unsettled, so that no Shutdown returns
				// while it is open.
				ex.unsettleLocked(g, j)
			} else {
				if ex.drainWanted.Load() {
					ex.wakeDrainedLocked()
				}
				spare = ex.keepLocked(j) // from here on, j may be another Go call's
			}
		} else {
			ex.releaseLocked(g, j)
		}
		// The freed group's next task is this worker's next, unless tasks
		// started before it wait on the run queue: the same order as a push
		// and a pop, without them.
		next = ex.startFreedLocked(g, &spare)
		if spare != nil {
			ex.free = append(ex.free, spare)
		}
	}
	switch {
	case next == nil:
		ex.updateReadyLocked(g)
	case w == nil || ex.runq.Len() > 0:
		ex.runq.Push(next)
		next = nil
	}
	if ex.ready.Len() != 0 { // as dispatchLocked would find, without the call
		ex.dispatchLocked(b)
	}
	if w != nil {
		if next == nil {
			next, _ = ex.runq.Pop()
		}
		if next == nil && ex.state != closed && len(ex.parked) < maxParked {
			ex.parked = append(ex.parked, w)
			parked = true
		}
	}
	if ex.runq.Len() > ex.finishingLocked() { // launchLocked's loop, tested without the call
		ex.launchLocked(b)
	}
	ex.mu.Unlock()
	if !b.empty() { // as for most finishes: a call and a reset saved
		ex.afterUnlock(b)
		b.reset()
	}
	if inline {
		if doneCh != nil {
			close(doneCh)
			ex.settled(g)
		}
		return next, parked
	}
	e := ex.event(j)
	e.Status, e.Err, e.Queued, e.Duration = st, err, queued, ran
	ex.notify(onCompleted, e)
	j.complete(st, err, queued, ran)
	return next, parked
}

// launchLocked makes sure every task on the run queue gets a goroutine. A
// worker that has returned and not yet finished is about to take the lock
// and pop the queue, so tasks up to that count are left for them: under a
// steady load, tasks go from worker to worker with no wake-up at all. Past
// that count, tasks go to parked workers, then to new goroutines, counted
// now, under the lock, so that Close never waits on a count that may still
// rise.
func (ex *Executor) launchLocked(b *batch) {
	for ex.runq.Len() > ex.finishingLocked() {
		j, _ := ex.runq.Pop()
		if n := len(ex.parked); n > 0 {
			b.hand.add(handoff{ex.parked[n-1], j})
			ex.parked[n-1] = nil
			ex.parked = ex.parked[:n-1]
			continue
		}
		ex.workers.Add(1)
		b.spawn.add(j)
	}
}

// finishingLocked returns how many workers are between settle and the lock
// in finish: each will pop the run queue.
func (ex *Executor) finishingLocked() int {
	return int(ex.returned.Load() - ex.finished)
}

// afterUnlock hands tasks to parked workers, starts new goroutines, and
// completes expired and displaced tasks, as launchLocked and dispatchLocked decided.
func (ex *Executor) afterUnlock(b *batch) {
	for i := range b.hand.n {
		h := b.hand.at(i)
		h.w <- h.j // never blocks: the worker was parked with an empty inbox
	}
	for i := range b.spawn.n {
		j := b.spawn.at(i)
		if ex.spawn == nil {
			go ex.work(j)
		} else {
			ex.spawnHook(j)
		}
	}
	for i := range b.expired.n {
		ex.completeExpired(b.expired.at(i))
	}
	for i := range b.displaced.n {
		d := b.displaced.at(i)
		ex.publishRejected(d.j, d.rej, ex.since()-d.j.submitted)
	}
}

// spawnHook starts a worker for j through the WithSpawn function. That
// function is user code: if it panics, the worker is started with a go
// statement instead, unless the function had started it already, so that j
// still runs exactly once and its permits come back. The panic goes no
// further: it would otherwise unwind through the caller (a Submit, or a
// worker between releasing a task and closing its Done channel) and leave
// the rest of the batch unstarted, holding permits.
func (ex *Executor) spawnHook(j *job) {
	var once atomic.Bool
	f := func() {
		if once.CompareAndSwap(false, true) {
			ex.work(j)
		}
	}
	defer func() {
		if recover() != nil {
			go f()
		}
	}()
	ex.spawn(f)
}

// releaseParkedLocked tells every parked worker to exit.
func (ex *Executor) releaseParkedLocked() {
	for _, w := range ex.parked {
		w <- nil
	}
	clear(ex.parked)
	ex.parked = ex.parked[:0]
}
