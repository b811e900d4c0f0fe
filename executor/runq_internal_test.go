package executor

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/groupexec/groupexec/policy"
)

// TestRunQueueOffersOnlyToSpinners: a task is left on the queue only for
// a worker that spins, one per spinning worker, and the worker's last look
// takes it.
func TestRunQueueOffersOnlyToSpinners(t *testing.T) {
	var q runQueue
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
// once: every task is either kept by its offerer or taken by one worker,
// exactly once, and none is left on the queue.
func TestRunQueueLosesNoTask(t *testing.T) {
	const offerers, workers, perOfferer = 4, 4, 5000
	q := runQueue{on: true}
	var kept, taken [offerers * perOfferer]atomic.Int32
	index := make(map[*job]int, offerers*perOfferer)
	jobs := make([]*job, offerers*perOfferer)
	for i := range jobs {
		jobs[i] = new(job)
		index[jobs[i]] = i
	}
	var stop atomic.Bool
	var ws, os sync.WaitGroup
	for range workers {
		ws.Go(func() {
			for i := 0; !stop.Load(); i++ {
				// Mostly the shortest spin, whose last look races the
				// offers most often.
				var j *job
				if i%8 == 0 {
					j = q.spin()
				} else {
					q.spinning.Add(1)
					j = q.done()
				}
				if j != nil {
					taken[index[j]].Add(1)
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
	os.Wait()
	stop.Store(true)
	ws.Wait()
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

// TestWorkersSpinOnlyWhereProcsAreFew: the run queue is on where
// GOMAXPROCS is at most maxSpinProcs, off above.
func TestWorkersSpinOnlyWhereProcsAreFew(t *testing.T) {
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
		if want := procs <= maxSpinProcs; ex.runq.on != want {
			t.Errorf("GOMAXPROCS %d: workers spin %v, want %v", procs, ex.runq.on, want)
		}
		if j := ex.runq.spin(); j != nil || ex.runq.spinning.Load() != 0 {
			t.Errorf("GOMAXPROCS %d: a spin with nothing queued took %p and left the count at %d", procs, j, ex.runq.spinning.Load())
		}
		ex.Close()
	}
}
