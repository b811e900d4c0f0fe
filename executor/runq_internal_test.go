package executor

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/policy"
)

// TestRunQueueOffersOnlyToSpinners: where Ps are few, a task is left on
// the queue only for a worker that spins, one per spinning worker, and the
// worker's last look takes it.
func TestRunQueueOffersOnlyToSpinners(t *testing.T) {
	q := runQueue{few: true}
	a, b := new(job), new(job)
	if q.offer(a) {
		t.Fatal("offered with no worker spinning")
	}
	q.spinning.Add(1)
	if !q.offer(a) {
		t.Fatal("not offered to a spinning worker")
	}
	if q.offer(b) {
		t.Fatal("offered two tasks to one spinning worker")
	}
	if got := q.done(); got != a {
		t.Fatalf("the spinning worker took %p, want %p", got, a)
	}
	if got := q.done(); got != nil || q.n.Load() != 0 || q.spinning.Load() != -1 {
		t.Fatalf("took %p; queue %d, spinning %d", got, q.n.Load(), q.spinning.Load())
	}
}

// TestRunQueueOffersAllToTheOneSpinner: where Ps are many, every task
// started while the one worker spins is queued for it, and its last look
// takes them all, in order.
func TestRunQueueOffersAllToTheOneSpinner(t *testing.T) {
	var q runQueue
	a, b, c := new(job), new(job), new(job)
	if q.offer(a) {
		t.Fatal("offered with no worker spinning")
	}
	q.spinning.Add(1)
	for _, j := range []*job{a, b, c} {
		if !q.offer(j) {
			t.Fatalf("task %p not offered to the spinning worker", j)
		}
	}
	got := q.done()
	if got != a || a.next != b || b.next != c || c.next != nil {
		t.Fatalf("the spinner took %p (then %p, %p), want %p, %p, %p", got, a.next, b.next, a, b, c)
	}
	if q.n.Load() != 0 || q.head != nil || q.tail != nil || q.spinning.Load() != 0 {
		t.Fatalf("after the spin: %d queued, spinning %d", q.n.Load(), q.spinning.Load())
	}
}

// TestRunQueueTakesBackWhatNoWorkerWillSee: a task queued for a worker that
// then stops spinning without a last look is taken back by its offer, and
// one that a worker took is not.
func TestRunQueueTakesBackWhatNoWorkerWillSee(t *testing.T) {
	var q runQueue
	a, b := new(job), new(job)
	q.spinning.Add(1)
	if !q.push(a) {
		t.Fatal("not queued for a spinning worker")
	}
	q.spinning.Add(-1) // the worker stops between the push and the check
	if q.left(a) || q.n.Load() != 0 || q.head != nil {
		t.Fatalf("a task no worker will see was left on the queue (%d queued)", q.n.Load())
	}
	q.spinning.Add(1)
	if !q.push(b) {
		t.Fatal("not queued for a spinning worker")
	}
	if got := q.done(); got != b {
		t.Fatalf("the worker took %p, want %p", got, b)
	}
	if !q.left(b) {
		t.Fatal("a task a worker took was reported taken back")
	}
}

// TestRunQueueLosesNoTask: offering goroutines and spinning workers at
// once, where every idle worker spins and where one at a time does: every
// task is either kept by its offerer or taken by one worker, exactly once,
// and none is left on the queue.
func TestRunQueueLosesNoTask(t *testing.T) {
	for _, few := range []bool{true, false} {
		t.Run(fmt.Sprintf("few=%v", few), func(t *testing.T) { testRunQueueLosesNoTask(t, few) })
	}
}

func testRunQueueLosesNoTask(t *testing.T, few bool) {
	const offerers, workers, perOfferer = 4, 4, 5000
	q := runQueue{few: few}
	var kept, taken [offerers * perOfferer]atomic.Int32
	index := make(map[*job]int, offerers*perOfferer)
	jobs := make([]*job, offerers*perOfferer)
	for i := range jobs {
		jobs[i] = new(job)
		index[jobs[i]] = i
	}
	var stop atomic.Bool
	defer stop.Store(true) // a test failed on a wait below stops the workers too
	var ws, os sync.WaitGroup
	take := func(j *job) int {
		n := 0
		for j != nil {
			next := j.next
			j.next = nil
			taken[index[j]].Add(1)
			n++
			j = next
		}
		return n
	}
	for w := range workers {
		ws.Go(func() {
			for i := 0; !stop.Load(); i++ {
				// Mostly the shortest spin, whose last look races the
				// offers most often.
				var j *job
				if !few || i%8 == 0 {
					j = q.spin()
				} else {
					q.spinning.Add(1)
					j = q.done()
				}
				if take(j) == 0 || few {
					continue
				}
				// Where Ps are many, a worker that took tasks counts a
				// spinner for a parked worker it wakes (Executor.
				// wakeSpinner): here, half the workers find one parked
				// and it spins; the others find none and take back the
				// count, with what was queued for it meanwhile.
				if q.spinning.CompareAndSwap(0, 1) {
					if w%2 == 0 {
						take(q.spinCounted())
					} else {
						take(q.done())
					}
				}
			}
		})
	}
	for o := range offerers {
		os.Go(func() {
			for i := o * perOfferer; i < (o+1)*perOfferer; i++ {
				if !q.offer(jobs[i]) {
					kept[i].Add(1)
				}
			}
		})
	}
	waitAll(t, &os, "every offerer returned")
	stop.Store(true)
	waitAll(t, &ws, "every worker stopped")
	handed := 0
	for i := range jobs {
		k, tk := kept[i].Load(), taken[i].Load()
		if k+tk != 1 {
			t.Fatalf("task %d: kept %d times, taken %d", i, k, tk)
		}
		handed += int(tk)
	}
	if n := q.n.Load(); n != 0 || q.head != nil || q.spinning.Load() != 0 {
		t.Fatalf("%d tasks left on the queue, %d workers spinning", n, q.spinning.Load())
	}
	t.Logf("%d of %d tasks handed to spinning workers", handed, len(jobs))
}

// TestWorkersSpinOneAtATimeWhereProcsAreMany: every idle worker spins
// where GOMAXPROCS is at most maxSpinProcs; above, one at a time: a second
// worker with nothing to run takes what is queued for the spinner, without
// spinning, and parks.
func TestWorkersSpinOneAtATimeWhereProcsAreMany(t *testing.T) {
	p, err := policy.New()
	if err != nil {
		t.Fatal(err)
	}
	for _, procs := range []int{1, maxSpinProcs, maxSpinProcs + 1, 16} {
		prev := runtime.GOMAXPROCS(procs)
		ex, err := New(p)
		runtime.GOMAXPROCS(prev)
		if err != nil {
			t.Fatal(err)
		}
		q := &ex.runq
		if want := procs <= maxSpinProcs; q.few != want {
			t.Errorf("GOMAXPROCS %d: every idle worker spins %v, want %v", procs, q.few, want)
		}
		if j := q.spin(); j != nil || q.spinning.Load() != 0 {
			t.Errorf("GOMAXPROCS %d: a spin with nothing queued took %p and left the count at %d", procs, j, q.spinning.Load())
		}
		if !q.few {
			q.spinning.Store(1) // a worker spins
			a := new(job)
			if !q.offer(a) {
				t.Errorf("GOMAXPROCS %d: not offered to the spinning worker", procs)
			}
			b := new(job)
			if !q.offer(b) {
				t.Errorf("GOMAXPROCS %d: not offered to the spinning worker", procs)
			}
			// A second worker does not spin; it takes what is queued.
			if j := q.spin(); j != a || a.next != b || q.spinning.Load() != 1 {
				t.Errorf("GOMAXPROCS %d: a second worker took %p then %p, count %d: want %p then %p, and no count", procs, j, a.next, q.spinning.Load(), a, b)
			}
			if j := q.spin(); j != nil || q.spinning.Load() != 1 {
				t.Errorf("GOMAXPROCS %d: a third worker took %p from an empty queue, count %d", procs, j, q.spinning.Load())
			}
			if j := q.done(); j != nil {
				t.Errorf("GOMAXPROCS %d: the spinning worker took %p, want nothing", procs, j)
			}
		}
		ex.Close()
	}
}

// TestWakeSpinner: where Ps are many, a worker that took a task wakes a
// parked worker to spin if none spins, counting it before it wakes, so
// that starts queue for it; with a spinner, or none parked, it wakes none.
func TestWakeSpinner(t *testing.T) {
	ex := newWhereProcsAreMany(t)
	q := &ex.runq
	ex.wakeSpinner() // none parked
	if n := q.spinning.Load(); n != 0 {
		t.Fatalf("with no worker parked, %d counted spinning", n)
	}
	inbox := make(worker, 1)
	ex.parked <- inbox
	ex.wakeSpinner()
	if got := recv(t, inbox, "the parked worker was woken"); got != spinOrder || q.spinning.Load() != 1 {
		t.Fatalf("the parked worker got %p with %d counted spinning, want the spin order and 1", got, q.spinning.Load())
	}
	a, b := new(job), new(job)
	if !q.offer(a) || !q.offer(b) {
		t.Fatal("starts not queued for the worker woken to spin")
	}
	ex.parked <- inbox
	ex.wakeSpinner() // one spins already
	if len(ex.parked) != 1 || q.spinning.Load() != 1 {
		t.Fatalf("with one spinning, %d parked left and %d counted spinning, want 1 and 1", len(ex.parked), q.spinning.Load())
	}
	<-ex.parked
	if got := q.spinCounted(); got != a || a.next != b || q.spinning.Load() != 0 {
		t.Fatalf("the woken worker took %p, then %p; %d spinning", got, a.next, q.spinning.Load())
	}
}

// TestWakeSpinnerLeavesNoTask: a worker that counts a spinner and then
// finds none parked takes back the count with the tasks that starts queued
// for it meanwhile, and launches them: every task offered is either kept
// by its offerer or launched, once.
func TestWakeSpinnerLeavesNoTask(t *testing.T) {
	var launched atomic.Int64
	// No worker ever runs or parks: a launch is a call of spawn.
	ex := newWhereProcsAreMany(t, WithSpawn(func(func()) { launched.Add(1) }))
	defer func() { ex.workers.Add(-int(launched.Load())) }() // the workers counted for them never ran
	const tasks = 20000
	var kept int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		for !stop.Load() {
			ex.wakeSpinner()
		}
	})
	for range tasks {
		if !ex.runq.offer(new(job)) {
			kept++
		}
	}
	stop.Store(true)
	wg.Wait()
	q := &ex.runq
	if kept+launched.Load() != tasks || q.n.Load() != 0 || q.head != nil || q.spinning.Load() != 0 {
		t.Fatalf("of %d tasks: %d kept, %d launched; %d left queued, %d spinning", tasks, kept, launched.Load(), q.n.Load(), q.spinning.Load())
	}
	t.Logf("%d of %d tasks queued for a spinner and launched", launched.Load(), tasks)
}

// TestRunQueueLockstep races one offer against one last look per round,
// released together, and checks each round at once: the offer kept its
// task or the look took it, never both, and nothing is left queued. The
// look is a spinner's (its count lowered, then the queue read), or, where
// Ps are many, a wake-up that finds no worker parked and gives up the
// count it took. A task left behind fails the round it was left in.
func TestRunQueueLockstep(t *testing.T) {
	var launched atomic.Int64
	// No worker ever runs or parks: a launch is a call of spawn.
	ex := newWhereProcsAreMany(t, WithSpawn(func(func()) { launched.Add(1) }))
	defer func() { ex.workers.Add(-int(launched.Load())) }() // the workers counted for them never ran
	q := &ex.runq
	looks := map[string]func() int64{
		"spinner": func() int64 {
			n := int64(0)
			for j := q.done(); j != nil; j = j.next {
				n++
			}
			return n
		},
		"wake-up": func() int64 {
			before := launched.Load()
			ex.wakeSpinner()
			return launched.Load() - before
		},
	}
	for name, look := range looks {
		kept, taken := 0, 0
		for round := range 20000 {
			if name == "spinner" {
				q.spinning.Store(1) // counted when it began to spin
			}
			var ready atomic.Int32
			start := func() {
				ready.Add(1)
				for ready.Load() < 2 {
					runtime.Gosched()
				}
			}
			var offered bool
			var took int64
			var wg sync.WaitGroup
			wg.Go(func() { start(); offered = q.offer(new(job)) })
			wg.Go(func() { start(); took = look() })
			waitAll(t, &wg, "the offer and the look returned")
			if n := q.n.Load(); n != 0 || q.head != nil || q.spinning.Load() != 0 || (offered) != (took == 1) || took > 1 {
				t.Fatalf("%s, round %d: offer left its task %v, the look took %d; %d queued, %d spinning", name, round, offered, took, n, q.spinning.Load())
			}
			if offered {
				taken++
			} else {
				kept++
			}
		}
		t.Logf("%s: %d tasks taken by the look, %d kept by their offer", name, taken, kept)
	}
}

// TestWorkerWokenToSpin: a parked worker woken to spin takes the starts
// queued for it, runs them, and gives up its count.
func TestWorkerWokenToSpin(t *testing.T) {
	ex := newWhereProcsAreMany(t)
	eventually := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("not in a minute: %s", what)
			}
		}
	}
	ran := make(chan int, 8)
	for range 50 {
		if err := ex.Go(context.Background(), "g", func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
		eventually("a worker parks", func() bool { return len(ex.parked) > 0 && ex.runq.spinning.Load() == 0 })
		ex.wakeSpinner() // the woken worker may spin and park again before the Go calls
		for i := range cap(ran) {
			if err := ex.Go(context.Background(), "g", func(context.Context) error { ran <- i; return nil }); err != nil {
				t.Fatal(err)
			}
		}
		for range cap(ran) {
			recv(t, ran, "a task queued for the woken worker ran")
		}
		eventually("the woken worker gives up its count", func() bool { return ex.runq.spinning.Load() == 0 })
	}
}

// newWhereProcsAreMany returns an executor made while GOMAXPROCS is above
// maxSpinProcs, closed when the test ends: one worker at a time spins.
func newWhereProcsAreMany(t *testing.T, opts ...Option) *Executor {
	t.Helper()
	p, err := policy.New()
	if err != nil {
		t.Fatal(err)
	}
	prev := runtime.GOMAXPROCS(maxSpinProcs + 2)
	ex, err := New(p, opts...)
	runtime.GOMAXPROCS(prev)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ex.Close() })
	return ex
}
