package executor_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// TestSetGroupLimitsRacesIdleReclamation: while Do and Go callers make a
// group's state again and again (WithMaxIdleGroups(0) reclaims it each
// time it goes idle) and another goroutine evicts it, a setter changes its
// limits over and over, each change's queue threshold above the last. A
// task running in the group reads, from inside, the number of changes that
// had returned before it looked, then its group's limits: they must be
// those of that change or a later one, whether the state it runs under was
// made before the change (which must have reached it) or after (which must
// have read the override).
func TestSetGroupLimitsRacesIdleReclamation(t *testing.T) {
	atProcs(t, func(t *testing.T) {
		const (
			callers = 6
			changes = 400
			base    = 100 // change i sets QueueThreshold base+i
		)
		ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(2)}, executor.WithMaxIdleGroups(0))
		var (
			v        violations
			returned atomic.Int64 // changes returned
			ran      atomic.Int64 // tasks that ran
			checked  atomic.Int64 // tasks that saw a change returned
			stop     = make(chan struct{})
			wg       sync.WaitGroup
		)
		check := func(context.Context) error {
			seen := returned.Load()
			s, ok := ex.GroupStats("k")
			switch {
			case !ok:
				v.add("a running task's group has no state")
			case seen > 0 && s.QueueThreshold < base+int(seen)-1:
				v.add(fmt.Sprintf("after %d changes returned, a task runs under QueueThreshold %d, want >= %d (MaxConcurrency %d)",
					seen, s.QueueThreshold, base+int(seen)-1, s.MaxConcurrency))
			case seen > 0 && s.MaxConcurrency != 1+int(seen-1)%3 && s.QueueThreshold == base+int(seen)-1:
				v.add(fmt.Sprintf("change %d applied in part: MaxConcurrency %d", seen, s.MaxConcurrency))
			}
			ran.Add(1)
			if seen > 0 {
				checked.Add(1)
			}
			runtime.Gosched()
			return nil
		}
		for ci := range callers {
			wg.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					var err error
					if (ci+i)%2 == 0 {
						err = ex.Do(bg, "k", check)
					} else {
						err = ex.Go(bg, "k", check)
					}
					if err != nil {
						v.add("refused: " + err.Error())
					}
				}
			})
		}
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
					ex.EvictGroup("k")
					runtime.Gosched()
				}
			}
		})
		// The changes race with running callers only once those run: on
		// a loaded machine the setter's loop may otherwise end before any
		// caller is scheduled.
		await(t, "a caller's task ran", func() bool { return ran.Load() > 0 })
		for i := range changes {
			l := limits(policy.Unlimited, 1+i%3, base+i, 1+i%2)
			if err := ex.SetGroupLimits("k", l); err != nil {
				t.Fatal(err)
			}
			returned.Store(int64(i) + 1)
			runtime.Gosched()
		}
		// The callers stop once a task has run after a change: stopped
		// as the setter returns, they may not have run one yet (the
		// setter's loop took no time at all while the callers were not
		// scheduled), which tells nothing of the executor.
		await(t, "a task ran after a change", func() bool { return checked.Load() > 0 })
		close(stop)
		waitAll(t, &wg, "the callers stopped")
		await(t, "the group's tasks finished", func() bool { return ex.Stats().RunningTasks == 0 && ex.Stats().Waiting == 0 })
		v.check(t)
		// Made afresh, the group reads the last override.
		ex.EvictGroup("k")
		if err := ex.Do(bg, "k", check); err != nil {
			t.Fatal(err)
		}
		v.check(t)
	})
}

// TestConcurrentSetGroupLimitsAgree: SetGroupLimits calls on one group from
// many goroutines, while its state is made and reclaimed, leave it with
// one set of limits: the state that outlives them has the limits that a
// state made afresh reads from the override in force.
func TestConcurrentSetGroupLimitsAgree(t *testing.T) {
	atProcs(t, func(t *testing.T) {
		ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(2)}, executor.WithMaxIdleGroups(0))
		for round := range 300 {
			key := fmt.Sprint("k", round)
			// A task that holds the group's state through the changes,
			// unless the round leaves it idle to be reclaimed.
			holding := round%3 != 0
			var held chan error
			hold := make(chan struct{})
			if holding {
				held = make(chan error, 1)
				started := make(chan struct{})
				go func() {
					held <- ex.Do(bg, key, func(context.Context) error { close(started); <-hold; return nil })
				}()
				recv(t, started, "the holding task started")
			}
			start := make(chan struct{})
			var wg sync.WaitGroup
			for s := range 4 {
				wg.Go(func() {
					<-start
					l := limits(policy.Unlimited, 1+s, 10+s, 1+s)
					if err := ex.SetGroupLimits(key, l); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Go(func() {
				<-start
				ex.Go(bg, key, func(context.Context) error { return nil })
			})
			close(start)
			waitAll(t, &wg, "the changes returned")
			seen := func() (l policy.GroupLimits) {
				if err := ex.Do(bg, key, func(context.Context) error {
					l, _ = limitsOf(ex, key)
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				return l
			}
			// The holding task keeps the state (and perhaps all the
			// concurrency the changes left): read it as it is.
			live, ok := limitsOf(ex, key)
			if !ok {
				live = seen()
			}
			close(hold)
			if holding {
				if err := recv(t, held, "the holding task returned"); err != nil {
					t.Fatal(err)
				}
			}
			await(t, "the group was reclaimed", func() bool { _, ok := ex.GroupStats(key); return !ok })
			if fresh := seen(); live != fresh {
				t.Fatalf("round %d: the group kept %+v through concurrent changes, but the override in force is %+v", round, live, fresh)
			}
		}
	})
}

// limitsOf returns the limits in force for a group with state.
func limitsOf(ex *executor.Executor, key string) (policy.GroupLimits, bool) {
	s, ok := ex.GroupStats(key)
	return limits(s.MaxInFlight, s.MaxConcurrency, s.QueueThreshold, s.Share), ok
}
