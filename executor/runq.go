package executor

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// The run queue: started tasks handed to workers that are about to park.
//
// A worker whose finish leaves it nothing to run does not park at once: it
// spins, looking at the run queue a few times and yielding its P in
// between (spin). A start made meanwhile by another goroutine (a
// submitter, or a finish that started more than one task) is left on the
// queue for it (offer), as long as the queue holds fewer tasks than there
// are spinning workers; only past that does a start wake a parked worker
// or start a goroutine. A parked worker's wake-up is what a start cost
// when groups drain faster than their submitters fill them: a goroutine
// readied on the submitter's P, where it waits until the submitter yields
// or another P, woken by the kernel, steals it. On two cores a run of the
// grouped batches could spend most of its time there, the second P idle.
//
// Where Ps are few (maxSpinProcs) every worker with nothing to run spins:
// each look yields its P, which keeps a P with nothing else to run from
// going idle, so that a goroutine readied elsewhere is stolen at once.
// With more Ps the yields of many spinning workers contend on the
// scheduler's global run queue, so one worker at a time spins, without
// yielding, on a P that would otherwise be idle (busySpins).
//
// What it buys, at GOMAXPROCS 2 on the 2-core machine (three interleaved
// rounds): the grouped batch with Go 353 to 226 ns a task, with Submit
// 440 to 399; with ~200 ns of work 428 to 271 and 472 to 366; the
// submitters' shape 385 to 255; the server's Submit+Wait 800 to 727. The
// flat batches, whose one group keeps its workers busy, did not change.
// At GOMAXPROCS 2 on the 16-core machine (five interleaved rounds): the
// grouped batch with Go 909 to 674, with work 964 to 710, submitters 1008
// to 763. At 8 and 16 it took the server's Submit+Wait from 915 to 1362
// and 1056 to 1346 ns, and at 4 (four rounds) the grouped batches with Go
// from 921 to 1152 and 1026 to 1130, Submit+Wait from 1222 to 1324: hence
// the bound. Capping the spinning workers instead (1, 2 or 4 at a time)
// lost the gain at 2.
//
// The single spinner at more Ps, on the 16-core machine (three
// interleaved rounds, GOMAXPROCS 8 and 16): the grouped submitters' shape
// 0.74x to 0.82x the time per task, the grouped batches 0.90x to 0.96x,
// the rest within the noise (flat batches, the server's Do and
// Submit+Wait). Allowing two spinners gained little, four lost up to 1.6x
// (Submit+Wait at 8): spinners read the queue's count that every start
// writes.
//
// Where Ps are many, the spinner takes every task queued for it, and
// wakes a parked worker to spin in its place, counted before it wakes
// (Executor.wakeSpinner): starts queue for it meanwhile, so that the
// wake-ups are paid by workers, each on its own P, and not by the one
// goroutine that submits for many cores. A worker with nothing to run
// that finds the one spinner's place taken takes what is queued, once,
// before it parks (steal): the worker woken to spin may wait for a P, and
// a worker already running takes its tasks instead. On the 16-core machine
// (five interleaved rounds, GOMAXPROCS 8 and 16): the grouped batches
// 0.69x to 0.76x the time per task, with ~200 ns of work 0.71x to 0.73x,
// the server's Submit+Wait 0.88x to 0.96x, the rest within the noise.
// Without steal, the grouped batches gained less (0.82x to 0.95x) and the
// submitters' shape and the server's Submit+Wait lost 1.1x to 1.2x: their
// starts waited on a woken spinner that every P was too busy to run.
// Counting the woken worker only once it runs lost the gain (1.05x to
// 1.18x).
//
// No task is left behind. A task is queued only while a spinning worker
// will take it (offer, under mu: where Ps are few, while the queue holds
// fewer than the spinning workers), and a spinning worker stops counting
// itself and then looks at the queue once more (done). An offer that
// finds no worker spinning right after queuing its task takes the task
// back, unless a worker took it; otherwise a worker counted when
// it looked had not yet made its last look, and will see the task (the
// counts are sequentially consistent). A worker spins only once its task
// is complete and its finish has returned: no user code runs while it
// counts, so none can wait for a task left to it.
//
// Where Ps are many, the last look takes every queued task, a worker
// that does not spin may take them sooner (steal), and a count taken for
// a worker to be woken is given up, when none is parked, with a last look
// of its own. The count of a woken worker is held before it runs: it runs
// no user code before its last look either, and the tasks queued for it
// wait until it has a P, unless a worker that finishes meanwhile steals
// them.
type runQueue struct {
	_ [64]byte // its own cache lines: written by every worker that spins
	// few is set, once, where Ps are few (maxSpinProcs): every worker
	// with nothing to run spins, yielding; otherwise one at a time does,
	// without.
	few bool
	// spinning counts the workers that will look at the queue before they
	// park; n mirrors the queue's length, read without mu.
	spinning atomic.Int64
	n        atomic.Int64
	mu       sync.Mutex
	// head and tail list the queued tasks through their next links: a
	// started task is in no group's queue.
	head, tail *job
	_          [64]byte
}

// maxSpinProcs is the most Ps at which every idle worker spins.
const maxSpinProcs = 2

// busySpins bounds the looks the one spinning worker takes, where Ps are
// many, without yielding: a few microseconds.
const busySpins = 4000

// spins bounds the looks a worker with nothing to run takes at the run
// queue before it parks: with a yield between looks, a few microseconds.
const spins = 16

// offer queues j, started for a worker, for a spinning worker to take, and
// reports whether it did.
func (q *runQueue) offer(j *job) bool {
	return q.push(j) && q.left(j)
}

// push queues j if a worker spins that will take it, and reports whether
// it did: where Ps are few, while the queue holds fewer tasks than workers
// spin (each takes one); where they are many, while the one spinner spins
// (it takes them all).
func (q *runQueue) push(j *job) bool {
	if !q.room() {
		return false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.room() {
		return false
	}
	if q.tail == nil {
		q.head = j
	} else {
		q.tail.next = j
	}
	q.tail = j
	q.n.Add(1)
	return true
}

// room reports whether a spinning worker will take one more task.
func (q *runQueue) room() bool {
	if q.few {
		return q.spinning.Load() > q.n.Load()
	}
	return q.spinning.Load() > 0
}

// left reports whether j, just pushed, is left to a spinning worker: true
// if a worker spins now (it will look at the queue again), or if one has
// taken j already; otherwise it takes j back, for a worker of its own.
func (q *runQueue) left(j *job) bool {
	if q.spinning.Load() > 0 {
		return true
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return !q.removeLocked(j)
}

// removeLocked takes j off the queue, and reports whether it was there.
func (q *runQueue) removeLocked(j *job) bool {
	var prev *job
	for t := q.head; t != nil; prev, t = t, t.next {
		if t != j {
			continue
		}
		if prev == nil {
			q.head = t.next
		} else {
			prev.next = t.next
		}
		if q.tail == t {
			q.tail = prev
		}
		t.next = nil
		q.n.Add(-1)
		return true
	}
	return false
}

// spin looks at the queue a few times, yielding in between, for a worker
// with nothing to run, and returns what it takes from it (done, steal), or
// nil: then the worker parks.
func (q *runQueue) spin() *job {
	if !q.few {
		// Many Ps: one spinner at a time, holding its P a few
		// microseconds at most.
		if !q.spinning.CompareAndSwap(0, 1) {
			return q.steal()
		}
		return q.spinCounted()
	}
	q.spinning.Add(1)
	for range spins {
		if q.n.Load() > 0 {
			break
		}
		runtime.Gosched()
	}
	return q.done()
}

// spinCounted is the one spin where Ps are many, by a worker counted in
// spinning already: by spin, or by the worker that woke it to spin
// (Executor.wakeSpinner).
func (q *runQueue) spinCounted() *job {
	for range busySpins {
		if q.n.Load() > 0 {
			break
		}
	}
	return q.done()
}

// done ends the calling worker's spin, and returns what it takes from the
// queue, or nil: where Ps are few, one task; where they are many, every
// task queued, linked through next, since starts queue them for the one
// spinner only (the worker runs the first and launches the rest).
func (q *runQueue) done() *job {
	q.spinning.Add(-1)
	if q.n.Load() == 0 {
		return nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	j := q.head
	if j == nil || !q.few {
		return q.takeAllLocked()
	}
	q.removeLocked(j) // the head: found at the first step
	return j
}

// steal takes every queued task, linked through next, for a worker that
// does not spin because another one does, where Ps are many: the tasks
// were queued for the spinner, which may be waiting for a P.
func (q *runQueue) steal() *job {
	if q.n.Load() == 0 {
		return nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.takeAllLocked()
}

// takeAllLocked empties the queue, and returns its tasks linked through
// next.
func (q *runQueue) takeAllLocked() *job {
	j := q.head
	q.head, q.tail = nil, nil
	q.n.Store(0)
	return j
}
