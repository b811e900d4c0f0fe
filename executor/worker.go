package executor

import (
	"context"
	"runtime"
	"sync/atomic"
	"time"
)

// Workers. A started task of Submit or Go runs on a worker goroutine. A
// worker whose task finishes runs its group's next task, if the finish
// started one (startFreedLocked), or a task that the finish's dispatch
// started for another group (launchLocked): a backlog keeps its workers busy
// without a goroutine start or a wake-up per task. A worker with nothing to
// run parks, up to maxParked of them, until a start hands it a task
// (launch), and exits otherwise; parked workers exit at Shutdown and
// Close, and none parks once either has begun. Before it parks it spins
// a few microseconds, taking a task that another goroutine starts
// meanwhile: at GOMAXPROCS 2 or less every such worker, yielding;
// above, one at a time, and a worker that takes a task from the spinner's
// queue wakes a parked one to spin next (runq.go, wakeSpinner). A Do call
// needs no worker: it runs in its caller's goroutine (do.go).
//
// Parking is what a started task costs when no worker is at hand: a new
// goroutine starts with a small stack that the executor's own calls grow,
// a copy or two per goroutine, and with several submitting goroutines
// half of all tasks started one (the submitters benchmark).

// maxParked bounds the idle workers kept: as many as the global in-flight
// limit lets run at once, up to 1024, so that a load that comes and goes
// finds its workers parked instead of starting new goroutines, and few
// enough to cost little while idle (a parked goroutine is a few KiB of
// stack, which the collector shrinks). Keeping 256 instead of 64 under a
// global limit of 256 took the grouped batches (GOMAXPROCS 2, the 2-core
// machine) from 453 to 369 ns a task with Go, 519 to 450 with Submit, and
// with ~200 ns of work from 533 to 420 and 557 to 491: workers whose
// group's queue ran dry exited, and new ones started as it filled again.
func maxParked(global int) int { return max(64, 4*runtime.GOMAXPROCS(0), min(global, 1024)) }

// worker is a parked goroutine's inbox; nil tells it to exit.
type worker chan *job

// launchLocked gives started j to the section's worker, if b takes a task
// for it (b.take) and has none yet: a finish that dispatches another
// group's task runs it next, without a goroutine start or a wake-up.
// Otherwise it puts j in b, for a worker (or its Do call's wake-up) after
// the unlock.
func (ex *Executor) launchLocked(j *job, b *batch) {
	if j.kind != kindDo && b.take && b.taken == nil {
		b.taken = j
		return
	}
	b.start.add(j)
}

// launch gives started j a worker, spinning, parked or new, or wakes its
// Do call.
func (ex *Executor) launch(j *job) {
	if j.kind == kindDo {
		close(j.body.doneChan())
		return
	}
	if !ex.runq.offer(j) {
		ex.launchNow(j)
	}
}

// launchNow gives started j a worker, parked or new.
func (ex *Executor) launchNow(j *job) {
	select {
	case w := <-ex.parked:
		w <- j // never blocks: the worker parked with an empty inbox
		return
	default:
	}
	// Counted before it starts, and so before j runs: Close waits for every
	// task to finish before it waits for the workers (releaseParked).
	ex.workers.Add(1)
	if ex.spawn == nil {
		go ex.work(j)
	} else {
		ex.spawnHook(j)
	}
}

// work runs j and then, back to back, the tasks of its group that each
// finish starts for it.
//
// A task whose Fn calls runtime.Goexit, or whose run context or listener
// call exits the goroutine or panics outside Fn, ends its worker: the
// deferred function completes it (Failed, ErrGoexit), lets a panic go on
// as it would have without the executor, and hands the next task to
// another goroutine.
//
// The panic is recovered and raised again from a deferred call, after the
// task's finish: the finish tells the listener, and breaker callbacks may
// run, user code that may exit the goroutine, which would drop a panic
// still under way (Go drops a panic when a deferred call exits its
// goroutine). Raised as the goroutine exits, it goes on up.
func (ex *Executor) work(j *job) {
	defer ex.workers.Done()
	var cur *job
	var queued, start time.Duration
	defer func() {
		if cur == nil {
			return
		}
		if p := recover(); p != nil {
			defer panic(p)
		}
		// Its next task, if the finish starts one, gets a worker of its own.
		if x := cur.x.Load(); x != nil && x.asking {
			// The context exited the goroutine (or panicked) as it was
			// asked: cur never runs.
			defer ex.finishUnrun(cur, Failed, ErrGoexit, queued, 0)
		} else {
			defer ex.finish(cur, Failed, ErrGoexit, queued, ex.since()-start, 0)
		}
		// Its run context is released as after a Fn that returns (its
		// watcher on Submit's context, its place in the group's watched
		// set); the deferred finish runs even if this panics.
		cur.endRun()
	}()
	var inbox worker
	// end is when the previous task ended, if it was read: the start of a
	// task that follows at once, submitted before it. One clock reading
	// saved per task run back to back (~25 ns on the 2-core machine, ~8%
	// of the flat batch with Submit); a task submitted after it reads the
	// clock afresh, so that its wait is never negative.
	end := time.Duration(-1)
	for {
		if j == nil {
			if inbox == nil {
				inbox = make(worker, 1)
			}
			if j = ex.park(inbox); j == nil {
				return
			}
			end = -1
			if j == spinOrder {
				if j = ex.taken(ex.runq.spinCounted()); j == nil {
					continue
				}
			}
		}
		cur = j
		timed := ex.timed(j)
		if timed {
			if end >= j.submitted {
				start = end
			} else {
				start = ex.since()
			}
		}
		queued = start - j.submitted
		if x := j.x.Load(); x != nil && (x.stopAfter != nil || x.unwatched) && ex.endedAtStart(j, x) {
			// Submit's context ended while j waited: as for Do, Fn does
			// not run and the permits go to the next in line. The cause
			// is read while cur is set, and x asking: the context is user
			// code. Once cur is cleared, nothing reads x.asking again.
			cause := x.endedWith(context.Cause(j.parent))
			cur = nil
			j.endRunWith(x)
			end = -1
			if j = ex.finishUnrun(j, Cancelled, cause, queued, finishWorker); j == nil {
				j = ex.taken(ex.runq.spin())
			}
			continue
		}
		ctx, err := ex.begin(j, queued)
		st := Failed
		if err == nil { // else a cluster permit's Bind panicked: Fn does not run
			st, err = callRecovered(j.body, ctx)
		}
		var ran time.Duration
		end = -1
		if timed {
			end = ex.since()
			ran = end - start
		}
		j.endRun()
		cur = nil
		if j = ex.finish(j, st, err, queued, ran, finishWorker); j == nil {
			j = ex.taken(ex.runq.spin())
		}
	}
}

// endedAtStart reports whether Submit's context of started j ended while j
// waited: its watcher, which j's start leaves to its worker, had fired
// (its stop reports false), or the context reports an error (j started
// before its watcher was armed, unwatched, or before the context's
// cancellation reached the watcher). If so j never runs,
// and its worker finishes it as never started (finishUnrun). It runs on
// j's worker, with j as its current task, and no lock held: the stop and
// the context are user code. It marks x asking meanwhile, and leaves it
// so if it reports true: the worker reads the context's cause next.
func (ex *Executor) endedAtStart(j *job, x *jobExtra) bool {
	x.asking = true
	var ended bool
	if stop := x.stopAfter; stop != nil {
		// The run context derives from Submit's: no watcher needed. A
		// watcher stopped before it fired does not mean the context had
		// not ended: its cancellation may have reached another of its
		// children first (a running task, whose finish started j) and
		// not this watcher yet. The context is asked as well.
		x.stopAfter = nil
		ended = !stopWatcher(stop) || j.parent.Err() != nil
	} else {
		ended = j.parent.Err() != nil
	}
	x.asking = ended
	return ended
}

// finishUnrun finishes j, counted started but never run: its context had
// ended by its start, or panicked or exited the goroutine as it was asked
// then (endedAtStart, doEndedAtStart). Its start is taken back, it ran for
// 0, and the listener, never told it started, hears of its completion
// with Event.Started false (finishUnstarted).
func (ex *Executor) finishUnrun(j *job, st Status, err error, queued time.Duration, how finishHow) *job {
	g := j.g
	g.mu.Lock()
	g.counts.Started--
	g.served -= uint64(j.weight)
	g.mu.Unlock()
	return ex.finish(j, st, err, queued, 0, how|finishUnstarted)
}

// endedWith returns the error that a task whose Submit context ended
// before it could run (endedAtStart), with cause, completes with: the
// first cancellation recorded for its run. For the executor the task has
// started, so Handle.Cancel may have come first: it then reported true,
// and the task completes with its cause, context.Canceled. Otherwise
// cause is recorded, and a later Cancel reports false, as for any task
// already cancelled.
func (x *jobExtra) endedWith(cause error) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.cancelled != nil {
		return x.cancelled
	}
	x.cancelled = cause
	return cause
}

// taken returns the first of the tasks that the calling worker took from
// the run queue (linked through next), or nil: it launches the others,
// and, where Ps are many, wakes a parked worker to spin if none does
// (wakeSpinner): the caller was the spinner, or took tasks queued for one.
func (ex *Executor) taken(j *job) *job {
	if j == nil {
		return nil
	}
	if !ex.runq.few {
		ex.wakeSpinner()
	}
	rest := j.next
	j.next = nil
	ex.launchAll(rest)
	return j
}

// spinOrder, sent to a parked worker, wakes it to spin (wakeSpinner).
var spinOrder = new(job)

// wakeSpinner wakes a parked worker to spin, where Ps are many and no
// worker spins, counting it as spinning before it wakes: the starts made
// meanwhile are queued for it. The calling worker has just taken a task
// from the run queue, so the one spinner is gone; without a new one, the
// next start would wake a parked worker itself. The wake-up is thus paid
// by a worker, on its own P, before it runs its task, instead of by the
// submitting goroutine: where one goroutine submits for many idle cores,
// waking parked workers was 80% of its time (the grouped batch at
// GOMAXPROCS 16).
func (ex *Executor) wakeSpinner() {
	q := &ex.runq
	if !q.spinning.CompareAndSwap(0, 1) {
		return
	}
	select {
	case w := <-ex.parked:
		w <- spinOrder // never blocks: the worker parked with an empty inbox
		return
	default:
	}
	// No worker is parked: none spins after all. Starts that saw the count
	// queued their tasks; they get workers of their own.
	ex.launchAll(q.done())
}

// launchAll launches the started tasks linked through next from j.
func (ex *Executor) launchAll(j *job) {
	for j != nil {
		next := j.next
		j.next = nil
		ex.launchNow(j)
		j = next
	}
}

// park waits, in the executor's parked workers, for a task to run next,
// and returns it, or nil if the worker is to exit: the executor keeps
// enough parked workers already, or it is shut down or closed. Once it
// takes no task, the tasks left to start are those its groups admitted
// before: a finish hands its group's next to its own worker, and a start
// finds none parked and starts one (launchNow). A worker parked then
// would wait for ever: Shutdown alone releases the executor.
func (ex *Executor) park(inbox worker) *job {
	if ex.stateNow() != open {
		return nil
	}
	select {
	case ex.parked <- inbox:
	default:
		return nil
	}
	if ex.stateNow() != open {
		// Shutdown began as this worker parked: its release of the
		// parked workers may have come before the send above. Shutdown
		// writes the state, then looks at the parked workers; this worker
		// sends, then reads the state: one of the two sees what the other
		// did. That holds as the runtime orders a channel send before a
		// later atomic read; the memory model does not promise it of a
		// receive that finds the channel empty. Close does not depend on
		// it: it releases workers until every one has exited.
		ex.releaseParkedNow()
	}
	return <-inbox
}

// releaseParkedNow tells the workers parked now to exit.
func (ex *Executor) releaseParkedNow() {
	for {
		select {
		case w := <-ex.parked:
			w <- nil
		default:
			return
		}
	}
}

// releaseParked tells parked workers to exit, those parked now and those
// that park later, until done is closed.
func (ex *Executor) releaseParked(done <-chan struct{}) {
	for {
		select {
		case w := <-ex.parked:
			w <- nil
		case <-done:
			return
		}
	}
}

// timed reports whether j's wait and run times are wanted: by its handle's
// Result, by the listener's events, or by the queue timeout.
func (ex *Executor) timed(j *job) bool {
	return j.kind == kindHandle || ex.listener != nil || ex.timeout > 0
}

// begin tells the listener that j starts, queued after its submission,
// and makes j's run context. An error is a cluster permit's Bind that
// panicked. The listener hears first: making the context may call
// Submit's context, user code that can panic or exit the goroutine, and
// then j, counted started, completes with Event.Started set as it must,
// OnStarted having been called.
func (ex *Executor) begin(j *job, queued time.Duration) (context.Context, error) {
	if ex.listener != nil {
		e := ex.event(j)
		e.Queued = queued
		ex.notify(onStarted, e)
	}
	return j.runContext()
}

// finishHow says how finish is called: by a worker (finishWorker), and for
// a task that never started (finishUnstarted, set by finishUnrun only: the
// listener was not told it started).
type finishHow uint8

const (
	finishWorker finishHow = 1 << iota
	finishUnstarted
)

// finish ends running j, whose outcome is st and err: it settles j's
// breaker ticket, releases j's permits, starts what now fits, and completes
// j after its permits are back. It returns the task of j's group that the
// release started for the caller to run, if the caller is a worker
// (worker) and that task runs on one.
//
// Without a listener, j completes in the locked section of its release,
// so that no drain accounting is needed. With one, the listener is told
// first, outside the lock, and j completes after it, counted unsettled
// until then (drain.go).
func (ex *Executor) finish(j *job, st Status, err error, queued, ran time.Duration, how finishHow) (next *job) {
	if x := j.x.Load(); x != nil && x.hasTicket() {
		ex.settleFinishing(x, j, st, err, queued, ran, how) // the breaker calls user code: no lock held
	}
	worker := how&finishWorker != 0
	g := j.g
	if !g.mu.TryLock() && !(worker && ex.runq.few && yieldLock(g)) {
		// Finishing workers that find their group locked queue on the
		// gate, so that at most one of them at a time waits on the
		// group's mutex: a group with many workers and tiny tasks otherwise
		// has dozens queued on it, with its submitter behind them all. On
		// the flat batch (one group, 64 workers, two cores) Go took ~0.7x
		// the time per task with the gate.
		g.gate.Lock()
		g.mu.Lock()
		g.gate.Unlock()
	}
	if g.laneOpen.Load() && g.queued() <= laneDrainDepth {
		ex.drainLaneLocked(g, false, true)
	}
	g.running -= j.weight
	g.runningTasks--
	if trackRunning {
		g.trackLocked(j, false)
	}
	if ex.cluster != nil {
		ex.releaseClusterLocked(g, j)
	}
	g.counts.add(st)
	g.inFlight -= j.weight
	j.state = stateDone
	// A Do call has nothing to complete: its caller has the outcome.
	inline := ex.listener == nil || j.kind == kindDo
	var spare *goTask // to pool once nothing refers to j
	handle := false   // j completes at the end of the section (b.fin)
	switch {
	case !inline:
		ex.unsettleLocked(g, j)
	case j.kind == kindGo:
		// Nothing waits on a Go task: it completes now, and is reused if
		// it can be: for the light task at its group's head (light.go), or
		// for a later Go call (recycle.go).
		j.complete(st, err, queued, ran)
		if !j.reusable() {
			break
		}
		if t := j.body.(*goTask); ex.handsOffLocked(g, t) {
			ex.handOffLocked(g, t)
			if worker && ex.quietLocked(g) {
				// Nothing for unlock to act on: the worker runs j
				// again, with no listener to tell (inline).
				g.mu.Unlock()
				return j
			}
			next = j
		} else {
			spare = g.keepLocked(t)
		}
	case j.kind != kindDo:
		handle = true
	}
	var b batch // declared here: a finish that hands off has no use for it
	if handle {
		b.fin = finished{j: j, st: st, err: err, queued: queued, ran: ran} // completed by unlock
	}
	if next == nil {
		next = ex.startFreedLocked(g, j.weight, &b)
	}
	if next != nil && (!worker || next.kind == kindDo) {
		ex.launchLocked(next, &b)
		next = nil
	}
	b.take = worker && next == nil
	// With a listener, a listener call may exit the goroutine
	// (runtime.Goexit): onCompleted's below, or the unlock's, whose
	// dispatch of the permits given back may complete another group's head
	// found past its queue timeout and tell the listener. Either ends the
	// caller, a worker or a Do call, and leaves nothing undone: the
	// listener is told of j, if the exit came before, j completes, and the
	// task started for the worker to run next gets a worker of its own.
	// So may the unlock that settles j (settled), which resyncs g if a
	// dispatch left g out of date meanwhile, and dispatches.
	told, exited := false, ex.listener != nil
	completed := false // j completed, its settling begun
	if exited {
		defer func() {
			if !exited {
				return
			}
			defer func() { // even if the listener exits again
				defer func() { // even if j's settling exits
					if next == nil {
						next = b.taken
					}
					if next != nil {
						ex.launchNow(next)
					}
				}()
				if !inline && !completed {
					j.complete(st, err, queued, ran)
					ex.settled(g)
				}
			}()
			if !told {
				told = true
				ex.tellCompleted(j, st, err, queued, ran, how)
			}
		}()
	}
	ex.unlock(g, &b)
	if spare != nil {
		putSpare(spare)
	}
	if b.taken != nil {
		next = b.taken
	}
	if ex.listener != nil {
		told = true
		ex.tellCompleted(j, st, err, queued, ran, how)
	}
	if !inline {
		j.complete(st, err, queued, ran)
		completed = true
		ex.settled(g)
	}
	exited = false
	return next
}

// tellCompleted tells the listener that j, which finish ends, completed.
func (ex *Executor) tellCompleted(j *job, st Status, err error, queued, ran time.Duration, how finishHow) {
	e := ex.event(j)
	e.Status, e.Err, e.Queued, e.Duration = st, err, queued, ran
	e.Started = how&finishUnstarted == 0
	ex.notify(onCompleted, e)
}

// settleFinishing settles x, finishing j's, before finish releases j's
// permits. Recording the outcome may call ReadyToTrip and OnStateChange,
// user code in the goroutine that ran j; a runtime.Goexit there, which
// cannot be stopped, would keep j's permits for good and leave j
// incomplete. The deferred call finishes j on the way out, as for a Fn
// that exits its goroutine; x's ticket is settled by then (a finished
// Ticket is zero), and a task that the release starts gets a worker of
// its own.
func (ex *Executor) settleFinishing(x *jobExtra, j *job, st Status, err error, queued, ran time.Duration, how finishHow) {
	settled := false
	defer func() {
		if !settled {
			ex.finish(j, st, err, queued, ran, how&^finishWorker)
		}
	}()
	x.settle(st)
	settled = true
}

// spawnHook starts a worker for j through the WithSpawn function. That
// function is user code: if it panics, the worker is started with a go
// statement instead, unless the function had started it already, so that j
// still runs exactly once and its permits come back. The panic goes no
// further: it would otherwise unwind through the caller (a Submit, or a
// worker between releasing a task and completing it) and leave the rest of
// the batch unstarted, holding permits. A function that exits the
// goroutine (runtime.Goexit) gets j its worker the same way; the rest of
// the batch, which the exit skips, WithSpawn's contract forbids.
func (ex *Executor) spawnHook(j *job) {
	var once atomic.Bool
	f := func() {
		if once.CompareAndSwap(false, true) {
			ex.work(j)
		}
	}
	returned := false
	defer func() {
		// A spawn that exits the goroutine (runtime.Goexit) is one that
		// panics whose exit goes on: j still needs its worker.
		if recover() != nil || !returned {
			go f()
		}
	}()
	ex.spawn(f)
	returned = true
}

// yieldLock yields the P once, for the goroutine holding g's mutex or one
// with work to do, and then tries the mutex again, where Ps are few. A
// worker that queues on the gate parks, and its turn comes only through a
// wake-up: with work between finishes, most of a group's workers waited
// there, each hand-over a wake-up after the last, one of two Ps busy (a
// trace of the flat batch with ~200 ns of work at GOMAXPROCS 2: 94% of
// the goroutines' blocked time there). Go's mutex does not spin while its
// P has other goroutines to run, which a pool's P always has. One yield
// took that batch with Go to 0.60x-0.63x the time per task, with Submit
// 0.80x-0.83x, and the grouped batches within the noise, but the
// empty-task flat batch's Go, whose finishes are all its work, to 1.22x
// (six and eight alternating rounds at GOMAXPROCS 2, the 2-core machine);
// two yields gained no more and cost that batch 1.42x. With more Ps it is
// not used: it was not measured there, where a yield goes through the
// scheduler's shared run queue.
func yieldLock(g *group) bool {
	runtime.Gosched()
	return g.mu.TryLock()
}
