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

// TestDiscardOldestWeightedUnderLimitChangesStress mixes Submit, Go and Do
// calls of weights 1 to 3 under DiscardOldest, with group queues small
// enough that full queues displace all the time, while a changer lowers and
// raises the global limit and the groups' limits and evicts groups kept
// idle past WithMaxIdleGroups(0). A displacement frees a waiting task's
// bulkhead place for a task of another weight, and a lowered global limit
// strands heavy heads that DiscardOldest then displaces: from inside every
// task it checks that the permits running stay under the ceilings (see
// ceilings), and at the end that every Fn ran at most once and only for a
// call that says so, every handle completed once, and the counts sum up.
func TestDiscardOldestWeightedUnderLimitChangesStress(t *testing.T) {
	atProcs(t, testDiscardOldestWeightedUnderLimitChanges)
}

func testDiscardOldestWeightedUnderLimitChanges(t *testing.T) {
	const (
		callers   = 12
		perCaller = 150
		groups    = 4
		global    = 5
		groupConc = 3
		maxWeight = 3
	)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	ex := newExec(t, []policy.Option{
		policy.WithGlobalMaxInFlight(global),
		policy.WithDefaultMaxInFlight(12),
		policy.WithDefaultMaxConcurrency(groupConc),
		policy.WithDefaultQueueThreshold(2),
		policy.WithRejectionPolicy(policy.DiscardOldest),
	}, executor.WithMaxIdleGroups(0))

	var v violations
	use := newCeilings(ex, global, groupConc, groups)
	var changes atomic.Int64
	change := func(r *rand.Rand) { // limits down and up, evictions
		var err error
		switch k := r.IntN(10); {
		case k < 4:
			err = use.setGlobal(1 + r.IntN(global+1))
		case k < 8:
			l := limits(2+r.IntN(14), 1+r.IntN(groupConc), r.IntN(4), 1+r.IntN(3))
			err = use.setGroup(r.IntN(groups), &l)
		case k < 9:
			err = use.setGroup(r.IntN(groups), nil)
		default:
			use.evict(r.IntN(groups))
		}
		if err != nil {
			v.add(err.Error())
		}
		changes.Add(1)
	}
	// The callers change limits too, but a caller blocked in Do or Wait
	// behind a head stranded by a lowered limit changes nothing: the
	// changer goes on until every caller is done, so such a head starts.
	chaos := newBackground()
	rnd := rand.New(rand.NewPCG(seed, 0))
	chaos.loop(func() { change(rnd) })
	chaos.checkInvariants(ex, v.add)

	type call struct {
		kind callKind
		h    *executor.Handle[int]
		err  error // Go's or Do's
		runs atomic.Int32
	}
	calls := make([][]*call, callers)
	var wg sync.WaitGroup
	for ci := range callers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seed, uint64(ci)+1))
			for i := range perCaller {
				if r.IntN(8) == 0 {
					change(r)
				}
				gi, w := r.IntN(groups), 1+r.IntN(maxWeight)
				c := &call{kind: callKind(r.IntN(3))}
				if c.kind == callGo {
					w = 1 // Go has no weight
				}
				spin := r.IntN(4)
				body := func(ctx context.Context) error {
					if c.runs.Add(1) > 1 {
						v.add("a function ran twice")
					}
					use.enter(gi, w, v.add)
					defer use.leave(gi, w)
					for range spin {
						runtime.Gosched()
					}
					return nil
				}
				grp := fmt.Sprint("g", gi)
				switch c.kind {
				case callSubmit:
					c.h, c.err = executor.Submit(ex, bg, executor.Task[int]{Group: grp, Weight: w,
						Fn: func(ctx context.Context) (int, error) { return i, body(ctx) }})
					if c.err != nil && !errors.Is(c.err, executor.ErrTooHeavy) {
						// A refusal for room is Discard's: a handle completed Rejected.
						v.add("Submit returned an error under DiscardOldest: " + c.err.Error())
					}
					switch {
					case c.h == nil:
					case r.IntN(5) == 0:
						c.h.Cancel()
					case r.IntN(3) == 0:
						c.h.Wait(bg) // a closed loop now and then, so that queues also drain
					}
				case callGo:
					c.err = ex.Go(bg, grp, body)
				case callDo:
					c.err = ex.DoWeighted(bg, grp, w, body)
					if (c.err == nil) != (c.runs.Load() == 1) {
						v.add(fmt.Sprintf("Do returned %v after %d runs", c.err, c.runs.Load()))
					}
				}
				calls[ci] = append(calls[ci], c)
			}
		})
	}
	waitAll(t, &wg, "the callers returned")
	chaos.halt()
	if err := use.fitAll(0, groups); err != nil {
		t.Fatal(err)
	}

	outcomes := map[executor.Status]int{}
	reasons := map[string]int{}
	var ran int
	for _, cs := range calls {
		for _, c := range cs {
			switch c.kind {
			case callSubmit:
				if c.h == nil {
					continue
				}
				res := wait(t, c.h)
				outcomes[res.Status]++
				if res.Status == executor.Rejected {
					var rej *executor.RejectedError
					if errors.As(res.Err, &rej) {
						reasons[fmt.Sprint(rej.Limit, " displaced=", errors.Is(res.Err, executor.ErrDisplaced), " heavy=", errors.Is(res.Err, executor.ErrTooHeavy))]++
					}
				}
				runs := c.runs.Load()
				if res.Status == executor.Rejected && runs != 0 || res.Status == executor.Success && runs != 1 {
					t.Errorf("Submit ended %v (%v) after %d runs", res.Status, res.Err, runs)
				}
				if res.Status == executor.Rejected && !errors.Is(res.Err, executor.ErrRejected) && !errors.Is(res.Err, executor.ErrDisplaced) {
					t.Errorf("Submit rejected with %v", res.Err)
				}
			case callGo:
				// A Go that returned nil was admitted: it runs unless displaced
				// (then its Fn never runs). Its Fn has returned by quiescence.
				if c.err != nil && c.runs.Load() != 0 {
					t.Errorf("Go refused with %v ran", c.err)
				}
			}
		}
	}
	await(t, "nothing running or waiting", func() bool {
		s := ex.Stats()
		return s.Running == 0 && s.RunningTasks == 0 && s.Waiting == 0
	})
	for _, cs := range calls {
		for _, c := range cs {
			ran += int(c.runs.Load())
		}
	}
	v.check(t)
	wantInvariants(t, ex)
	s := ex.Stats()
	if got := s.Succeeded + s.Failed + s.Cancelled + s.Rejected; got != s.Submitted {
		t.Errorf("outcomes sum to %d, Submitted %d (%+v)", got, s.Submitted, s.TaskCounts)
	}
	if s.Submitted != callers*perCaller {
		t.Errorf("Submitted %d, want %d", s.Submitted, callers*perCaller)
	}
	if s.Started != uint64(ran) || s.Succeeded != uint64(ran) {
		t.Errorf("%d functions ran; Started %d Succeeded %d", ran, s.Started, s.Succeeded)
	}
	t.Logf("%d changes; Submit outcomes %v (rejections %v); stats %+v", changes.Load(), outcomes, reasons, s.TaskCounts)
	if s.Rejected == 0 || s.Succeeded == 0 {
		t.Errorf("the run did not exercise changes and displacement: %d changes, %+v", changes.Load(), s.TaskCounts)
	}
}
