package executor

import "time"

// Workers. A task runs on a worker goroutine. A worker that finishes a task
// runs, in the same goroutine, a task that the completion let start; with
// nothing to run it parks, up to maxParked of them, until a task is handed
// to it, so that a steady stream of submissions pays a channel handoff, not
// a goroutine start, per task. Parked workers exit at Close.

// worker is a parked goroutine's inbox; nil tells it to exit.
type worker chan *job

// maxParked bounds the idle workers kept: enough to hand a burst of starts
// to parked goroutines, few enough to cost little while idle (a parked
// goroutine is a few KiB of stack; 64 of them well under a MiB).
const maxParked = 64

// work runs j and then, back to back, the tasks handed to this goroutine.
func (ex *Executor) work(j *job) {
	defer ex.workers.Done()
	w := make(worker, 1)
	start := ex.since()
	for j != nil {
		var parked bool
		j, start, parked = ex.run(j, start, w)
		if parked {
			j = <-w
			start = ex.since()
		}
	}
}

// run runs a started j that became runnable at start. It returns the next
// task for this goroutine and when it became runnable, or parks w and
// reports so. With w nil it neither continues nor parks.
func (ex *Executor) run(j *job, start time.Duration, w worker) (next *job, end time.Duration, parked bool) {
	ctx := j.runContext()
	queued := start - j.submitted
	if ex.listener != nil {
		e := ex.event(j)
		e.Queued = queued
		ex.notify(onStarted, e)
	}
	returned := false
	defer func() {
		if !returned { // Fn called runtime.Goexit; this goroutine is ending.
			ex.finish(j, Failed, ErrGoexit, queued, ex.since()-start, nil)
		}
	}()
	st, err := j.body.call(ctx)
	returned = true
	end = ex.since()
	next, parked = ex.finish(j, st, err, queued, end-start, w)
	return next, end, parked
}

// finish ends a running j: it releases j's permits, starts what now fits,
// and completes j's handle after the permits are back. With w, it returns a
// started task for the calling worker to run next, or parks w.
func (ex *Executor) finish(j *job, st Status, err error, queued, ran time.Duration, w worker) (next *job, parked bool) {
	j.endRun()
	var b batch
	ex.mu.Lock()
	g := j.g
	g.running.Remove(&j.node)
	g.conc.Release(j.weight)
	ex.global.Release(j.weight)
	g.counts.add(st)
	ex.counts.add(st)
	ex.releaseLocked(g, j)
	ex.updateReadyLocked(g)
	ex.dispatchLocked(&b)
	if w != nil {
		next = b.started.pop()
		if next == nil && ex.state != closed && len(ex.parked) < maxParked {
			ex.parked = append(ex.parked, w)
			parked = true
		}
	}
	ex.launchLocked(&b)
	ex.mu.Unlock()
	ex.afterUnlock(&b)
	if ex.listener != nil {
		e := ex.event(j)
		e.Status, e.Err, e.Queued, e.Duration = st, err, queued, ran
		ex.notify(onCompleted, e)
	}
	j.complete(st, err, queued, ran)
	return next, parked
}

// launchLocked hands b's started tasks to parked workers; the rest stay in
// b.started for afterUnlock to start on new goroutines, counted now, under
// the lock, so that Close never waits on a count that may still rise.
func (ex *Executor) launchLocked(b *batch) {
	var spawn jobs
	for j := b.started.pop(); j != nil; j = b.started.pop() {
		if n := len(ex.parked); n > 0 {
			w := ex.parked[n-1]
			ex.parked[n-1] = nil
			ex.parked = ex.parked[:n-1]
			w <- j // never blocks: a parked worker's inbox is empty
			continue
		}
		ex.workers.Add(1)
		spawn.add(j)
	}
	b.started = spawn
}

// afterUnlock starts new goroutines for b's started tasks, as counted by
// launchLocked, and completes its expired ones.
func (ex *Executor) afterUnlock(b *batch) {
	for j := b.started.pop(); j != nil; j = b.started.pop() {
		if ex.spawn == nil {
			go ex.work(j)
		} else {
			ex.spawn(func() { ex.work(j) })
		}
	}
	for j := b.expired.pop(); j != nil; j = b.expired.pop() {
		ex.completeExpired(j)
	}
}

// releaseParkedLocked tells every parked worker to exit.
func (ex *Executor) releaseParkedLocked() {
	for _, w := range ex.parked {
		w <- nil
	}
	clear(ex.parked)
	ex.parked = ex.parked[:0]
}
