package executor

import (
	"context"
	"runtime"
	"sync"
	"weak"
)

// Reusing Go tasks.
//
// A task started with Go and context.Background leaves nothing behind when
// it completes: it has no handle, no watcher on its context, and its run
// context is its group's (groupCtx), not the task itself. So once the
// worker that ran it has completed it, in finish, under the executor's
// lock, nothing refers to it, and the executor keeps it for a later Go call
// instead of leaving it to the collector.
//
// That is what the collector costs on tiny tasks: a task allocated per call
// keeps it marking much of the time, with write barriers on every pointer
// write meanwhile. Reusing tasks made Go 12% faster on the flat benchmark
// and 11% on the grouped one, on two cores (benchmarks/README.md, session
// 16). A sync.Pool was measured too, and gained nothing: Go takes tasks on
// the submitter's P and workers put them back on theirs. Bounding the list
// by the tasks in flight, and dropping it when the executor went idle, made
// things slower: a batch's tasks were then mostly allocated anyway.
//
// Bounds, as sync.Pool's: what is kept does not outlive two collections
// unused. Finishing workers keep freed tasks in ex.free (under the lock); at
// each collection (a cleanup armed while anything is kept) those move to
// ex.old and the previous ex.old is dropped. Go takes them, ex.free first,
// a whole list at a time into a cache of its own (ex.spare, under its own
// mutex, so that Go takes no executor lock per call), which is dropped at a
// collection if no Go call took from it since the one before. A burst's
// tasks are so kept while Go calls keep taking them, which under a steady
// load means no collection at all, and no longer than two collections
// after it stops; Close drops them. After a refill that found nothing, Go
// allocates for spareBackoff calls before it asks again.

// spareBackoff is how many Go calls allocate before Go asks the finishing
// workers for tasks again after finding none: the ask takes the executor's
// lock.
const spareBackoff = 64

// background is the context that Go must be given for its task to be
// reused: any other may carry values or a deadline that the group's run
// context could not serve.
var background = context.Background()

// spares is Go's cache of reusable tasks. It sits on cache lines of its
// own: every Go call writes it, and finishing workers never touch it.
type spares struct {
	_     [64]byte
	mu    sync.Mutex
	tasks []*goTask // taken from the front (next), in the order they were freed
	next  int
	skip  int  // Go calls left to allocate before the next refill
	taken bool // a task was taken since the last collection
	_     [64]byte
}

// newGoTask returns a Go task for fn and ctx: a reused one when ctx is
// background and one is spare, otherwise a new one.
func (ex *Executor) newGoTask(ctx context.Context, fn func(ctx context.Context) error) *goTask {
	bg := ctx == background
	if bg {
		if t := ex.takeSpare(); t != nil {
			t.reset(fn, stateNew) // a spare task's flags are bgGo (keepLocked)
			return t
		}
	}
	t := &goTask{fn: fn}
	t.parent, t.body, t.weight = ctx, t, 1
	if bg {
		t.flags = bgGo
	}
	return t
}

// takeSpare returns a spare task, for the caller to reset, or nil.
func (ex *Executor) takeSpare() *goTask {
	s := &ex.spare
	s.mu.Lock()
	if s.next == len(s.tasks) {
		if s.skip > 0 {
			s.skip--
			s.mu.Unlock()
			return nil
		}
		ex.refillSpares(s)
		if len(s.tasks) == 0 {
			s.skip = spareBackoff
			s.mu.Unlock()
			return nil
		}
	}
	t := s.tasks[s.next]
	s.tasks[s.next] = nil
	s.next++
	s.taken = true
	s.mu.Unlock()
	return t // its group is set by submit, whatever the outcome
}

// reset makes t, a reusable Go task that has completed, a task for fn in
// state s. What finish left as it was (the links, the extra, the context)
// is nil and background by the conditions of keepLocked; the group is set
// by the caller.
func (t *goTask) reset(fn goFn, s jobState) {
	t.fn = fn
	t.submitted, t.state, t.released, t.status = 0, s, false, 0
	t.done = completion{} // a plain store: nothing reads it before t is shared again
}

// lightTaskLocked returns a reusable Go task for fn, waiting in g: a light
// task moved out of g's lane (go.go). It takes what finishing workers kept,
// most recently kept first, or allocates.
func (ex *Executor) lightTaskLocked(g *group, fn goFn) *goTask {
	return ex.lightTaskFromLocked(g, fn, nil)
}

// lightTaskFromLocked is lightTaskLocked, taking *spare first if it is not
// nil (and leaving nil there).
func (ex *Executor) lightTaskFromLocked(g *group, fn goFn, spare **goTask) *goTask {
	var t *goTask
	if spare != nil && *spare != nil {
		t, *spare = *spare, nil
	} else if n := len(ex.free); n > 0 {
		t = ex.free[n-1]
		ex.free[n-1] = nil
		ex.free = ex.free[:n-1]
	} else if n := len(ex.old); n > 0 {
		t = ex.old[n-1]
		ex.old[n-1] = nil
		ex.old = ex.old[:n-1]
	}
	if t == nil {
		t = &goTask{fn: fn}
		t.parent, t.body, t.weight, t.flags, t.state = background, t, 1, bgGo, stateWaiting
	} else {
		t.reset(fn, stateWaiting)
	}
	t.g = g
	return t
}

// refillSpares gives s, which is empty and locked, the tasks that
// finishing workers freed since the last collection, or else those they
// freed before it.
func (ex *Executor) refillSpares(s *spares) {
	ex.mu.Lock()
	if len(ex.free) > 0 {
		s.tasks, ex.free = ex.free, s.tasks[:0]
	} else {
		s.tasks, ex.old = ex.old, s.tasks[:0]
	}
	ex.mu.Unlock()
	s.next = 0
}

// keepLocked returns j, which has just completed in finish, as a Go task
// to keep for a later Go call if it is a reusable one, or nil. The caller
// appends it to ex.free unless a light task takes it first
// (startLightLocked).
func (ex *Executor) keepLocked(j *job) *goTask {
	if !j.reusable() || j.x.Load() != nil || ex.state == closed {
		return nil
	}
	if !ex.aging {
		ex.startAgingLocked()
	}
	return j.body.(*goTask)
}

// startAgingLocked makes what ex keeps age from the next collection on.
func (ex *Executor) startAgingLocked() {
	ex.aging = true
	armAging(weak.Make(ex))
}

// agingTick is a heap object made unreachable at once, so that its cleanup
// runs after the next collection. It holds a pointer so that it is never
// one of the tiny objects that share an allocation, whose cleanups may never
// run.
type agingTick struct{ _ *byte }

// armAging makes ex's spare tasks age at the next collection. The cleanup
// holds ex weakly: an executor dropped without Close is still collected,
// and its aging stops.
func armAging(ex weak.Pointer[Executor]) {
	runtime.AddCleanup(new(agingTick), func(ex weak.Pointer[Executor]) {
		if e := ex.Value(); e != nil && e.age() {
			armAging(ex)
		}
	}, ex)
}

// age is a collection's turn to drop the spare tasks unused since the
// previous one. It reports whether any are left, to age at the next.
func (ex *Executor) age() bool {
	s := &ex.spare
	s.mu.Lock()
	if !s.taken {
		clear(s.tasks)
		s.tasks, s.next = nil, 0
	}
	s.taken = false
	left := s.next < len(s.tasks)
	s.mu.Unlock()

	ex.mu.Lock()
	defer ex.mu.Unlock()
	clear(ex.old)
	ex.old, ex.free = ex.free, ex.old[:0]
	if ex.state == closed {
		ex.old, ex.free = nil, nil
	}
	left = left || len(ex.old) > 0
	ex.aging = left
	return left
}

// dropSparesLocked drops the tasks finishing workers kept: the executor
// is closed, and keeps no more.
func (ex *Executor) dropSparesLocked() {
	ex.free, ex.old = nil, nil
}

// dropSpareCache drops Go's cache: the executor is closed.
func (ex *Executor) dropSpareCache() {
	s := &ex.spare
	s.mu.Lock()
	clear(s.tasks)
	s.tasks, s.next = nil, 0
	s.mu.Unlock()
}

// reusable reports whether j is a Go task with context.Background run by
// the executor (not by CallerRuns): its run context is then its group's,
// and nothing of it is left once it completes.
func (j *job) reusable() bool {
	return j.flags == bgGo
}
