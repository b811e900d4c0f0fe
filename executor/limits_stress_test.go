package executor_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// TestLimitChangesStress submits and cancels from many goroutines while
// another changes the global and group limits up and down, and checks from
// inside each task that the permits running never exceed what the limits
// allow: after a change to L, use stays at most max(L, use right after the
// change), since nothing starts while use is at or over L. The test keeps
// its own counts under mu, which the changer holds across each change and
// the reading of the executor's use that follows it, so that a task counts
// itself against the ceiling of the last change. At the end every handle
// has completed exactly once, no Fn ran twice or after a refusal, and
// nothing is in use.
func TestLimitChangesStress(t *testing.T) {
	const (
		submitters = 24
		perWorker  = 300
		groups     = 6
		global     = 6
		groupConc  = 2
	)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	ex := newExec(t, []policy.Option{
		policy.WithGlobalMaxInFlight(global),
		policy.WithDefaultMaxInFlight(16),
		policy.WithDefaultMaxConcurrency(groupConc),
		policy.WithDefaultQueueThreshold(12),
	}, executor.WithMaxIdleGroups(2))

	var (
		use          = newCeilings(ex, global, groupConc, groups)
		violations   atomic.Int64
		firstViolate atomic.Value
		changes      atomic.Int64
		atCeiling    atomic.Int64 // starts that took use to a ceiling lowered by a change
	)
	violate := func(msg string) {
		violations.Add(1)
		firstViolate.CompareAndSwap(nil, msg)
	}

	chaos := newBackground()
	r := rand.New(rand.NewPCG(seed, 0))
	chaos.loop(func() { // limit changes, up and down
		gi := r.IntN(groups)
		var err error
		switch k := r.IntN(10); {
		case k < 3:
			err = use.setGlobal(1 + r.IntN(global+2))
		case k < 9:
			l := limits(2+r.IntN(30), 1+r.IntN(3), r.IntN(24), 1+r.IntN(3))
			err = use.setGroup(gi, &l)
		default:
			err = use.setGroup(gi, nil)
		}
		if err != nil {
			violate(err.Error())
		}
		changes.Add(1)
	})
	chaos.checkInvariants(ex, violate)

	type record struct {
		h    *executor.Handle[int]
		runs *atomic.Int32
	}
	records := make([][]record, submitters)
	var wg sync.WaitGroup
	for w := range submitters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(w)+1))
			for i := range perWorker {
				gi := r.IntN(groups)
				weight := 1 + r.IntN(2)
				blocks := r.IntN(8) == 0 // runs until cancelled
				runs := new(atomic.Int32)
				fn := func(ctx context.Context) (int, error) {
					if runs.Add(1) > 1 {
						violate("a task ran twice")
					}
					if use.enter(gi, weight, violate) {
						atCeiling.Add(1)
					}
					defer use.leave(gi, weight)
					if blocks {
						<-ctx.Done()
						return 0, ctx.Err()
					}
					for range i % 4 { // a little work
						runtime.Gosched()
					}
					return i, nil
				}
				h, _ := executor.Submit(ex, bg, executor.Task[int]{Group: fmt.Sprint("g", gi), ID: fmt.Sprint(w, "-", i), Weight: weight, Fn: fn})
				switch {
				case blocks || r.IntN(6) == 0:
					h.Cancel()
				case r.IntN(3) == 0:
					// A closed loop now and then, so that not every queue
					// stays full; the changer goes on until every
					// submitter is done, so a stranded head starts.
					h.Wait(bg)
				}
				records[w] = append(records[w], record{h, runs})
				runtime.Gosched()
			}
		}()
	}
	wg.Wait()
	chaos.halt()

	// Limits that every task fits: heads stranded by a lowered limit start.
	if err := use.fitAll(0, groups); err != nil {
		t.Fatal(err)
	}

	var counts [5]int
	reasons := map[string]int{}
	for _, rs := range records {
		for _, rec := range rs {
			r := wait(t, rec.h)
			counts[r.Status]++
			if r.Status == executor.Rejected {
				var rej *executor.RejectedError
				if errors.As(r.Err, &rej) {
					reasons[fmt.Sprint(rej.Limit, errors.Is(rej, executor.ErrTooHeavy))]++
				}
			}
			switch runs := rec.runs.Load(); {
			case r.Status == executor.Rejected && runs != 0:
				t.Errorf("rejected task %s ran", rec.h.ID())
			case (r.Status == executor.Success || r.Status == executor.Failed) && runs != 1:
				t.Errorf("task %s ended %v after %d runs", rec.h.ID(), r.Status, runs)
			}
		}
	}
	if v := violations.Load(); v != 0 {
		t.Fatalf("%d violations; first: %v", v, firstViolate.Load())
	}
	if msg := ex.CheckInvariants(); msg != "" {
		t.Fatal(msg)
	}
	s := ex.Stats()
	if s.Running != 0 || s.Waiting != 0 || s.RunningTasks != 0 {
		t.Errorf("after every handle completed: %+v", s)
	}
	if got, want := s.Succeeded+s.Failed+s.Cancelled+s.Rejected, uint64(submitters*perWorker); got != want {
		t.Errorf("outcomes %d, want %d (%+v)", got, want, s.TaskCounts)
	}
	if n := executor.DoubleCompletions(); n != 0 {
		t.Errorf("%d handles completed twice", n)
	}
	t.Logf("rejections: %v", reasons)
	t.Logf("%d limit changes, %d starts at a lowered ceiling; outcomes: success %d cancelled %d rejected %d", changes.Load(), atCeiling.Load(),
		counts[executor.Success], counts[executor.Cancelled], counts[executor.Rejected])
	if changes.Load() < 100 || counts[executor.Success] == 0 || counts[executor.Cancelled] == 0 || counts[executor.Rejected] == 0 {
		t.Errorf("the run did not exercise changes and every outcome: %d changes, %v", changes.Load(), counts)
	}
}

// ceilings is a stress test's own count of the permits its tasks hold,
// against the most that the limits allow while a changer moves them: after
// a change to L, use stays at most max(L, use right after the change),
// since nothing starts while use is at or over L. Each change holds mu
// across the change and the reading of the executor's use that follows it,
// so that a task counts itself against the ceiling of the last change.
// Groups are named "g0", "g1", and so on.
type ceilings struct {
	ex     *executor.Executor
	global int // the policy's global limit
	conc   int // the policy's group concurrency

	mu         sync.Mutex
	globalUse  int
	groupUse   []int
	globalCeil int
	groupCeil  []int
}

func newCeilings(ex *executor.Executor, global, conc, groups int) *ceilings {
	c := &ceilings{ex: ex, global: global, conc: conc, globalCeil: global,
		groupUse: make([]int, groups), groupCeil: make([]int, groups)}
	for i := range c.groupCeil {
		c.groupCeil[i] = conc
	}
	return c
}

// setGlobal sets the global limit to n.
func (c *ceilings) setGlobal(n int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.ex.SetGlobalMaxInFlight(n); err != nil {
		return err
	}
	c.globalCeil = max(n, c.ex.Stats().Running)
	return nil
}

// setGroup sets group gi's limits to *l, or resets them to the policy's if
// l is nil.
func (c *ceilings) setGroup(gi int, l *policy.GroupLimits) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	grp := fmt.Sprint("g", gi)
	conc, err := c.conc, error(nil)
	if l == nil {
		err = c.ex.ResetGroupLimits(grp)
	} else {
		conc, err = l.MaxConcurrency, c.ex.SetGroupLimits(grp, *l)
	}
	if err != nil {
		return err
	}
	s, _ := c.ex.GroupStats(grp) // no state: nothing running
	c.groupCeil[gi] = max(conc, s.Running)
	return nil
}

// evict evicts group gi. It comes back with its override, if it has one,
// or the policy's limits: its ceiling already allows either, up to what
// runs.
func (c *ceilings) evict(gi int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ex.EvictGroup(fmt.Sprint("g", gi))
}

// fitAll sets limits that every task fits, the policy's global limit and,
// for groups from to groups-1, no bounds but the policy's concurrency, so
// that heads stranded by a lowered limit start.
func (c *ceilings) fitAll(from, groups int) error {
	if err := c.setGlobal(c.global); err != nil {
		return err
	}
	for gi := from; gi < groups; gi++ {
		l := limits(policy.Unlimited, c.conc, policy.Unlimited, 1)
		if err := c.setGroup(gi, &l); err != nil {
			return err
		}
	}
	return nil
}

// enter counts the weight permits of group gi that a starting task holds,
// tells violate of every ceiling they exceed, and reports whether use
// reached a ceiling lowered below the policy's limit.
func (c *ceilings) enter(gi, weight int, violate func(string)) (lowered bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.globalUse += weight
	c.groupUse[gi] += weight
	if c.globalUse > c.globalCeil {
		violate(fmt.Sprintf("global use %d > %d", c.globalUse, c.globalCeil))
	}
	if c.groupUse[gi] > c.groupCeil[gi] {
		violate(fmt.Sprintf("group g%d use %d > %d", gi, c.groupUse[gi], c.groupCeil[gi]))
	}
	return c.globalUse == c.globalCeil && c.globalCeil < c.global ||
		c.groupUse[gi] == c.groupCeil[gi] && c.groupCeil[gi] < c.conc
}

// leave gives back what enter counted.
func (c *ceilings) leave(gi, weight int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.globalUse -= weight
	c.groupUse[gi] -= weight
}
