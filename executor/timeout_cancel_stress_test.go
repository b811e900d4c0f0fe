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

// TestQueueTimeoutsRaceCancelsAndDispatch: on a fake clock that a driver
// moves in small steps, Submit and Do calls of weights 1 and 2 in several
// groups wait for a small global limit (the dispatcher hands freed room
// from group to group) under a queue timeout, while other goroutines
// cancel handles and end Do contexts. The timer of a group, a finish
// starting its head, the dispatcher and a cancel all race to decide a
// waiting task. Each task is decided once: one that succeeded ran once,
// one refused with ErrQueueTimeout had waited at least the timeout and
// never ran, a Cancel
// that reports true never loses to the timeout, and Do returns the
// timeout only for a function that never ran. At the end the counts sum
// up and the functions that ran are the tasks started.
func TestQueueTimeoutsRaceCancelsAndDispatch(t *testing.T) {
	atProcs(t, func(t *testing.T) {
		all := map[string]int{}
		for range 4 {
			for k, n := range testQueueTimeoutsRaceCancels(t) {
				all[k] += n
			}
		}
		t.Logf("Submit outcomes: %v", all)
	})
}

func testQueueTimeoutsRaceCancels(t *testing.T) map[string]int {
	const (
		timeout   = 10 * time.Millisecond
		groups    = 4
		callers   = 8
		perCaller = 80
	)
	seed := uint64(time.Now().UnixNano())
	clk := fakeClock()
	ex := newExec(t, []policy.Option{
		policy.WithGlobalMaxInFlight(2),
		policy.WithDefaultMaxConcurrency(2),
		policy.WithDefaultMaxInFlight(policy.Unlimited),
		policy.WithDefaultQueueThreshold(policy.Unlimited),
		policy.WithQueueTimeout(timeout),
	}, executor.WithClock(clk))

	var (
		v    violations
		runs atomic.Int64
	)
	type submitted struct {
		h         *executor.Handle[int]
		ran       *atomic.Int32
		cancelled atomic.Bool // a Cancel of it reported true
	}
	handles := make(chan *submitted, callers*perCaller)
	// Tasks hold their permits until the clock moves, so that queues form
	// and heads wait across timer firings.
	var holdMu sync.Mutex
	hold := make(chan struct{})
	tick := func() {
		holdMu.Lock()
		close(hold)
		hold = make(chan struct{})
		holdMu.Unlock()
	}
	held := func() <-chan struct{} { holdMu.Lock(); defer holdMu.Unlock(); return hold }

	var callersDone sync.WaitGroup
	for ci := range callers {
		callersDone.Go(func() {
			r := rand.New(rand.NewPCG(seed, uint64(ci)))
			for i := range perCaller {
				grp, w := fmt.Sprint("g", r.IntN(groups)), 1+r.IntN(2)
				ran := new(atomic.Int32)
				body := func(ctx context.Context) error {
					if ran.Add(1) > 1 {
						v.add("a function ran twice")
					}
					runs.Add(1)
					if i%3 == 0 {
						select {
						case <-held():
						case <-ctx.Done():
						}
					}
					return nil
				}
				if r.IntN(3) == 0 {
					ctx, cancel := context.WithCancel(bg)
					if r.IntN(3) == 0 {
						go cancel()
					}
					err := ex.DoWeighted(ctx, grp, w, body)
					cancel()
					n := ran.Load()
					switch {
					case errors.Is(err, executor.ErrQueueTimeout) && n != 0:
						v.add("Do refused by the queue timeout after its function ran")
					case err == nil && n != 1:
						v.add(fmt.Sprintf("Do returned nil after %d runs", n))
					}
					continue
				}
				s := &submitted{ran: ran}
				var err error
				s.h, err = executor.Submit(ex, bg, executor.Task[int]{Group: grp, Weight: w,
					Fn: func(ctx context.Context) (int, error) { return 0, body(ctx) }})
				if err != nil {
					v.add("Submit: " + err.Error())
					continue
				}
				handles <- s
				if r.IntN(3) == 0 {
					go func() {
						runtime.Gosched()
						if s.h.Cancel() {
							s.cancelled.Store(true)
						}
					}()
				}
			}
		})
	}
	// The driver moves the clock in steps below and around the timeout
	// until the callers are done, releasing the held tasks at each step.
	callersReturned := waitChan(&callersDone)
	r := rand.New(rand.NewPCG(seed, 1<<20))
	for driving := true; driving; {
		select {
		case <-callersReturned:
			driving = false
		default:
			clk.Advance(time.Duration(1+r.IntN(6)) * time.Millisecond)
			tick()
			runtime.Gosched()
		}
	}
	// Whatever still waits times out; whatever still runs is released.
	await(t, "nothing waiting or running", func() bool {
		clk.Advance(timeout)
		tick()
		s := ex.Stats()
		return s.Waiting == 0 && s.RunningTasks == 0
	})
	close(handles)
	outcomes := map[string]int{}
	for s := range handles {
		res := wait(t, s.h)
		n := s.ran.Load()
		timedOut := errors.Is(res.Err, executor.ErrQueueTimeout)
		outcomes[fmt.Sprint(res.Status, " timeout=", timedOut)]++
		switch {
		case res.Status == executor.Success && n != 1:
			t.Errorf("a task succeeded after %d runs", n)
		case timedOut && (res.Status != executor.Rejected || n != 0 || res.Queued < timeout):
			t.Errorf("a task timed out %v after %d runs, having waited %v", res.Status, n, res.Queued)
		case s.cancelled.Load() && res.Status == executor.Rejected:
			t.Errorf("Cancel reported true, but the task ended %v (%v)", res.Status, res.Err)
		case s.cancelled.Load() && n == 0 && res.Status != executor.Cancelled:
			t.Errorf("Cancel reported true and the task never ran, but it ended %v", res.Status)
		case res.Status == executor.Rejected && !timedOut:
			t.Errorf("a task was rejected, but not by the timeout: %v", res.Err)
		}
	}
	v.check(t)
	wantInvariants(t, ex)
	s := ex.Stats()
	if got := s.Succeeded + s.Failed + s.Cancelled + s.Rejected; got != s.Submitted || s.Submitted != callers*perCaller {
		t.Errorf("outcomes sum to %d, Submitted %d, want %d (%+v)", got, s.Submitted, callers*perCaller, s.TaskCounts)
	}
	if got := uint64(runs.Load()); got != s.Started {
		t.Errorf("%d functions ran, Started %d", got, s.Started)
	}
	return outcomes
}
