package benchmarks

import (
	"sync"
	"sync/atomic"
	"time"
)

// mutexfloor: the smallest executor with ours' shape, as a yardstick for
// what ours adds. Submit allocates a handle and takes a clock reading; a
// task starts at once while fewer than size run, else waits in a FIFO; a
// worker that finishes takes the next task from the FIFO in the same
// goroutine, records the queued and run times, and completes the handle;
// Wait makes a Done channel only when the task is not done yet. One mutex
// guards the FIFO and the running count, held for a few loads and stores.
// There is no group, no admission limit past the running count, no
// cancellation, no listener, no statistics.
//
// burn adds that much bookkeeping-like work (a loop over a small array)
// under the mutex, on both sides, so that the cost of the work ours does
// under its lock can be told from the cost of the shape.

type floorHandle struct {
	next     *floorHandle
	done     atomic.Bool
	mu       sync.Mutex
	ch       chan struct{}
	fn       func()
	sub      time.Duration
	queued   time.Duration
	duration time.Duration
}

type floorRunner struct {
	mu      sync.Mutex
	running int
	size    int
	head    *floorHandle
	tail    *floorHandle
	burn    int
	scratch [64]uint64

	epoch   time.Time
	workers sync.WaitGroup
	task    func()
	hs      []*floorHandle
}

func newFloor(c *counter, size, burn int) *floorRunner {
	return &floorRunner{size: size, burn: burn, epoch: time.Now(), task: c.tiny}
}

func (r *floorRunner) since() time.Duration { return time.Since(r.epoch) }

// bookkeep stands for work done under the lock.
func (r *floorRunner) bookkeep() {
	for i := range r.burn {
		r.scratch[i&63] += uint64(i)
	}
}

func (r *floorRunner) submit(fn func()) *floorHandle {
	h := &floorHandle{fn: fn, sub: r.since()}
	r.mu.Lock()
	r.bookkeep()
	if r.running < r.size {
		r.running++
		r.mu.Unlock()
		r.workers.Add(1)
		go r.work(h)
		return h
	}
	if r.tail == nil {
		r.head = h
	} else {
		r.tail.next = h
	}
	r.tail = h
	r.mu.Unlock()
	return h
}

func (r *floorRunner) work(h *floorHandle) {
	defer r.workers.Done()
	start := r.since()
	for h != nil {
		h.fn()
		end := r.since()
		h.queued, h.duration = start-h.sub, end-start
		start = end
		r.mu.Lock()
		r.bookkeep()
		next := r.head
		if next != nil {
			r.head = next.next
			if r.head == nil {
				r.tail = nil
			}
			next.next = nil
		} else {
			r.running--
		}
		r.mu.Unlock()
		h.mu.Lock()
		h.done.Store(true)
		ch := h.ch
		h.mu.Unlock()
		if ch != nil {
			close(ch)
		}
		h = next
	}
}

func (h *floorHandle) wait() {
	if h.done.Load() {
		return
	}
	h.mu.Lock()
	if h.done.Load() {
		h.mu.Unlock()
		return
	}
	if h.ch == nil {
		h.ch = make(chan struct{})
	}
	ch := h.ch
	h.mu.Unlock()
	<-ch
}

func (r *floorRunner) run(n int) error {
	if cap(r.hs) < n {
		r.hs = make([]*floorHandle, n)
	}
	hs := r.hs[:n]
	for i := range hs {
		hs[i] = r.submit(r.task)
	}
	for i, h := range hs {
		h.wait()
		hs[i] = nil
	}
	return nil
}

// close waits for the workers, which exit once the FIFO is empty.
func (r *floorRunner) close() error {
	r.workers.Wait()
	return nil
}
