package executor_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// The tests here pin the rule that a group's breaker refuses a queued task
// as it would start (WithGroupBreaker): what a refused task gives back,
// whom it tells and how, and the paths by which a queued task starts.

// wantBreakerRefusal fails t unless err is a refusal by a group breaker
// with cause, for a task of weight w.
func wantBreakerRefusal(t *testing.T, what string, err, cause error, w int) {
	t.Helper()
	var re *executor.RejectedError
	if !errors.Is(err, executor.ErrRejected) || !errors.Is(err, cause) || !errors.As(err, &re) ||
		re.Limit != executor.LimitBreaker || re.Weight != w {
		t.Errorf("%s: %v, want a refusal by the breaker (%v) of weight %d", what, err, cause, w)
	}
}

// Weighted tasks refused as they would start give back their in-flight
// permits and their places under the global queue threshold: another
// group can queue as many tasks as the threshold allows afterwards, and
// no more.
func TestQueuedWeightedTasksRefusedByTheBreakerGiveBackTheirPlaces(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithGlobalMaxInFlight(4), policy.WithDefaultMaxConcurrency(4),
		policy.WithGlobalQueueThreshold(3)},
		executor.WithGroupBreaker(tripOnFirstFailure(breaker.Settings{Clock: fakeClock()})))

	release := make(chan struct{})
	closeAtEnd(t, release)
	first := submit(t, ex, executor.Task[int]{Group: "g", ID: "first", Weight: 4, Fn: failOnRelease(release)})
	var ran atomic.Int32
	runs := func(context.Context) (int, error) { ran.Add(1); return 0, nil }
	two := submit(t, ex, executor.Task[int]{Group: "g", ID: "two", Weight: 2, Fn: runs})
	doErr := make(chan error, 1)
	go func() {
		doErr <- ex.DoWeighted(bg, "g", 3, func(context.Context) error { ran.Add(1); return nil })
	}()
	waitFor(t, func() bool { return groupStats(t, ex, "g").Waiting == 2 })
	one := submit(t, ex, executor.Task[int]{Group: "g", ID: "one", Weight: 1, Fn: runs})
	if s := groupStats(t, ex, "g"); s.Waiting != 3 || s.InFlight != 10 {
		t.Fatalf("g: %+v, want 3 tasks waiting, 10 permits in flight", s)
	}
	if _, err := executor.Submit(ex, bg, executor.Task[int]{Group: "h", Fn: runs}); !errors.Is(err, executor.ErrRejected) {
		t.Fatalf("a fourth task waiting: %v, want refused by the global queue threshold", err)
	}

	close(release)
	if r := wait(t, first); r.Status != executor.Failed {
		t.Fatalf("first: %+v, want Failed", r)
	}
	for h, w := range map[*executor.Handle[int]]int{two: 2, one: 1} {
		r := wait(t, h)
		if r.Status != executor.Rejected {
			t.Errorf("%s: %+v, want Rejected", h.ID(), r)
		}
		wantBreakerRefusal(t, h.ID(), r.Err, breaker.ErrOpenState, w)
	}
	wantBreakerRefusal(t, "DoWeighted", recv(t, doErr, "DoWeighted's return"), breaker.ErrOpenState, 3)
	if n := ran.Load(); n != 0 {
		t.Fatalf("%d queued tasks ran after the breaker opened, want none", n)
	}
	if s := ex.Stats(); s.Running != 0 || s.Waiting != 0 {
		t.Fatalf("stats %+v, want nothing running or waiting", s)
	}
	if s := groupStats(t, ex, "g"); s.InFlight != 0 || s.Rejected != 3 || s.Failed != 1 {
		t.Fatalf("g: %+v, want nothing in flight, 3 rejected, 1 failed", s)
	}
	wantInvariants(t, ex)

	// The places are back: with global room held, three tasks queue, the
	// fourth is refused.
	hold := make(chan struct{})
	closeAtEnd(t, hold)
	holder := submit(t, ex, executor.Task[int]{Group: "h", ID: "holder", Weight: 4, Fn: func(context.Context) (int, error) {
		<-hold
		return 0, nil
	}})
	var queued []*executor.Handle[int]
	for range 3 {
		queued = append(queued, submit(t, ex, executor.Task[int]{Group: "h", Fn: succeeding}))
	}
	if _, err := executor.Submit(ex, bg, executor.Task[int]{Group: "h", Fn: succeeding}); !errors.Is(err, executor.ErrRejected) {
		t.Fatalf("a fourth task waiting: %v, want refused by the global queue threshold", err)
	}
	close(hold)
	wait(t, holder)
	for _, h := range queued {
		if r := wait(t, h); r.Status != executor.Success {
			t.Errorf("h's queued task: %+v, want Success", r)
		}
	}
}

// The listener hears of each queued task refused by the breaker once, with
// OnRejected and a *RejectedError (LimitBreaker), never OnStarted or
// OnCompleted; a Go task's refusal reaches it the same way. A listener
// may submit into the same group from OnRejected: the breaker, open,
// refuses that task at its admission.
func TestQueuedTaskRefusedByTheBreakerToldOnce(t *testing.T) {
	type told struct{ started, completed, rejected int }
	var (
		mu     sync.Mutex
		events = map[string]*told{} // by ID, or "go"/"do" by weight for the tasks without one
		errs   = map[string]error{}
		ex     *executor.Executor
		again  = make(chan error, 1)
	)
	key := func(e executor.Event) string {
		switch {
		case e.ID != "":
			return e.ID
		case e.Weight == 2:
			return "do"
		}
		return "go"
	}
	note := func(e executor.Event, f func(*told)) {
		mu.Lock()
		defer mu.Unlock()
		k := key(e)
		if events[k] == nil {
			events[k] = &told{}
		}
		f(events[k])
	}
	l := executor.ListenerFuncs{
		Started:   func(e executor.Event) { note(e, func(c *told) { c.started++ }) },
		Completed: func(e executor.Event) { note(e, func(c *told) { c.completed++ }) },
		Rejected: func(e executor.Event) {
			note(e, func(c *told) { c.rejected++ })
			mu.Lock()
			errs[key(e)] = e.Err
			mu.Unlock()
			if e.ID == "queued" {
				_, err := executor.Submit(ex, bg, executor.Task[int]{Group: "g", ID: "again", Fn: succeeding})
				again <- err
			}
		},
	}
	ex = newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(2)},
		executor.WithGroupBreaker(tripOnFirstFailure(breaker.Settings{Clock: fakeClock()})), executor.WithListener(l))

	release := make(chan struct{})
	closeAtEnd(t, release)
	first := submit(t, ex, executor.Task[int]{Group: "g", ID: "first", Weight: 2, Fn: failOnRelease(release)})
	queued := submit(t, ex, executor.Task[int]{Group: "g", ID: "queued", Fn: succeeding})
	if err := ex.Go(bg, "g", func(context.Context) error { return nil }); err != nil {
		t.Fatalf("Go: %v", err)
	}
	doErr := make(chan error, 1)
	go func() { doErr <- ex.DoWeighted(bg, "g", 2, func(context.Context) error { return nil }) }()
	waitFor(t, func() bool { return groupStats(t, ex, "g").Waiting == 3 })

	close(release)
	wait(t, first)
	r := wait(t, queued)
	wantBreakerRefusal(t, "queued", r.Err, breaker.ErrOpenState, 1)
	wantBreakerRefusal(t, "Do", recv(t, doErr, "Do's return"), breaker.ErrOpenState, 2)
	wantBreakerRefusal(t, "the task submitted from OnRejected", recv(t, again, "Submit from OnRejected"), breaker.ErrOpenState, 1)
	waitFor(t, func() bool { s := groupStats(t, ex, "g"); return s.InFlight == 0 && s.Rejected == 4 })
	// The listener is told outside the locks, after the counts move: wait
	// for it to have heard all five outcomes.
	waitFor(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, c := range events {
			n += c.completed + c.rejected
		}
		return n == 5
	})

	mu.Lock()
	defer mu.Unlock()
	if c := events["first"]; c == nil || *c != (told{started: 1, completed: 1}) {
		t.Errorf("first: told %+v, want started and completed once", c)
	}
	for _, k := range []string{"queued", "go", "do", "again"} {
		if c := events[k]; c == nil || *c != (told{rejected: 1}) {
			t.Errorf("%s: told %+v, want rejected once, nothing else", k, c)
		}
	}
	for k, w := range map[string]int{"queued": 1, "go": 1, "do": 2, "again": 1} {
		wantBreakerRefusal(t, k+"'s OnRejected", errs[k], breaker.ErrOpenState, w)
	}
}

// With a queue timeout, a queued task refused by the breaker completes
// once, Rejected by the breaker, and is not timed out later: its group's
// listener hears of one rejection, its counts show one.
func TestQueuedTaskRefusedByTheBreakerUnderAQueueTimeout(t *testing.T) {
	clk := fakeClock()
	var rejected atomic.Int32
	ex := newExec(t, []policy.Option{policy.WithGlobalMaxInFlight(2), policy.WithDefaultMaxConcurrency(1),
		policy.WithQueueTimeout(time.Minute)},
		executor.WithClock(clk), executor.WithGroupBreaker(tripOnFirstFailure(breaker.Settings{})),
		executor.WithListener(executor.ListenerFuncs{Rejected: func(executor.Event) { rejected.Add(1) }}))

	release := make(chan struct{})
	closeAtEnd(t, release)
	first := submit(t, ex, executor.Task[int]{Group: "g", ID: "first", Fn: failOnRelease(release)})
	queued := submit(t, ex, executor.Task[int]{Group: "g", ID: "queued", Fn: succeeding})
	close(release)
	wait(t, first)
	r := wait(t, queued)
	if r.Status != executor.Rejected {
		t.Errorf("queued: %+v, want Rejected", r)
	}
	wantBreakerRefusal(t, "queued", r.Err, breaker.ErrOpenState, 1)
	clk.Advance(2 * time.Minute) // past the timeout: nothing left to time out
	waitFor(t, func() bool { return groupStats(t, ex, "g").InFlight == 0 })
	if s := groupStats(t, ex, "g"); s.Rejected != 1 || rejected.Load() != 1 {
		t.Errorf("g: %+v, listener told %d rejections, want 1 each", s, rejected.Load())
	}
}

// A head that waits for its group's cluster limiter when a task of its
// group fails and opens the breaker is refused as that task's permit goes
// back (its group no longer waits for a notify), before the limiter is
// asked again: no permit is taken or bound for the queued tasks.
func TestQueuedTaskWaitingForTheClusterLimiterRefusedWhenTheBreakerOpens(t *testing.T) {
	lim := newMemLimiter()
	lim.avail["g"] = 1
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(4)}, executor.WithGroupLimiter(lim),
		executor.WithGroupBreaker(tripOnFirstFailure(breaker.Settings{Clock: fakeClock()})))

	release := make(chan struct{})
	closeAtEnd(t, release)
	first := submit(t, ex, executor.Task[int]{Group: "g", ID: "first", Fn: failOnRelease(release)})
	var ran atomic.Int32
	runs := func(context.Context) (int, error) { ran.Add(1); return 0, nil }
	queued := []*executor.Handle[int]{
		submit(t, ex, executor.Task[int]{Group: "g", ID: "q1", Fn: runs}),
		submit(t, ex, executor.Task[int]{Group: "g", ID: "q2", Fn: runs}),
	}
	if s := groupStats(t, ex, "g"); s.Waiting != 2 || s.RunningTasks != 1 {
		t.Fatalf("g: %+v, want one running and two waiting for the limiter", s)
	}
	asked := func() int { lim.mu.Lock(); defer lim.mu.Unlock(); return lim.asked["g"] }
	askedBefore := asked()
	close(release)
	wait(t, first)
	for _, h := range queued {
		r := wait(t, h)
		if r.Status != executor.Rejected {
			t.Errorf("%s: %+v, want Rejected", h.ID(), r)
		}
		wantBreakerRefusal(t, h.ID(), r.Err, breaker.ErrOpenState, 1)
	}
	if n, out, binds := ran.Load(), lim.outstanding(), lim.binds.Load(); n != 0 || out != 0 || binds != 1 {
		t.Errorf("ran %d, permits out %d, binds %d: want 0, 0 and 1 (first's)", n, out, binds)
	}
	if n := asked(); n != askedBefore {
		t.Errorf("the limiter was asked %d more times for the refused tasks, want none", n-askedBefore)
	}
	lim.give("g", 1) // a notify with nothing left waiting
	if s := groupStats(t, ex, "g"); s.InFlight != 0 || s.Rejected != 2 {
		t.Errorf("g: %+v, want nothing in flight, two rejected", s)
	}
}

// With MaxRequests 2, a probe that fails reopens the breaker: the other
// probe, still queued behind it, is refused as it would start
// (ErrOpenState), never run.
func TestQueuedProbeRefusedWhenAnotherProbeReopensTheBreaker(t *testing.T) {
	clk := fakeClock()
	s := tripOnFirstFailure(breaker.Settings{Clock: clk})
	s.MaxRequests = 2
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)}, executor.WithGroupBreaker(s))

	wait(t, submit(t, ex, executor.Task[int]{Group: "g", Fn: failing}))
	clk.Advance(time.Minute)
	release := make(chan struct{})
	closeAtEnd(t, release)
	p1 := submit(t, ex, executor.Task[int]{Group: "g", ID: "p1", Fn: failOnRelease(release)})
	var ran atomic.Bool
	p2 := submit(t, ex, executor.Task[int]{Group: "g", ID: "p2", Fn: func(context.Context) (int, error) {
		ran.Store(true)
		return 0, nil
	}})
	if st := groupStats(t, ex, "g"); st.Breaker != breaker.StateHalfOpen || st.Waiting != 1 {
		t.Fatalf("g: %+v, want half-open, p2 queued", st)
	}
	close(release)
	if r := wait(t, p1); r.Status != executor.Failed {
		t.Fatalf("p1: %+v, want Failed", r)
	}
	r := wait(t, p2)
	wantBreakerRefusal(t, "p2", r.Err, breaker.ErrOpenState, 1)
	if ran.Load() {
		t.Error("p2 ran after p1 reopened the breaker")
	}
	// p2's probe slot is back: after the timeout, two probes get in.
	clk.Advance(time.Minute)
	gate := newGate()
	defer gate.open()
	a := submit(t, ex, executor.Task[string]{Group: "g", ID: "a", Fn: gate.fn("a")})
	b := submit(t, ex, executor.Task[string]{Group: "g", ID: "b", Fn: gate.fn("b")})
	gate.open()
	for _, h := range []*executor.Handle[string]{a, b} {
		if r := wait(t, h); r.Status != executor.Success {
			t.Errorf("%s: %+v, want Success", h.ID(), r)
		}
	}
	if st := groupStats(t, ex, "g"); st.Breaker != breaker.StateClosed {
		t.Errorf("breaker %v after two probes succeeded, want closed", st.Breaker)
	}
}

// A group evicted while its breaker is open and tasks wait is dropped once
// they are refused as they would start: it comes back with a closed
// breaker.
func TestEvictedGroupWithQueuedTasksDroppedOnceTheBreakerRefusesThem(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)},
		executor.WithGroupBreaker(tripOnFirstFailure(breaker.Settings{Clock: fakeClock()})))

	release := make(chan struct{})
	closeAtEnd(t, release)
	first := submit(t, ex, executor.Task[int]{Group: "g", ID: "first", Fn: failOnRelease(release)})
	queued := submit(t, ex, executor.Task[int]{Group: "g", ID: "queued", Fn: succeeding})
	if ex.EvictGroup("g") {
		t.Fatal("EvictGroup dropped a busy group at once")
	}
	close(release)
	wait(t, first)
	wantBreakerRefusal(t, "queued", wait(t, queued).Err, breaker.ErrOpenState, 1)
	waitFor(t, func() bool { _, ok := ex.GroupStats("g"); return !ok })
	if r := wait(t, submit(t, ex, executor.Task[int]{Group: "g", Fn: succeeding})); r.Status != executor.Success {
		t.Errorf("a task of the group made again: %+v, want Success under a closed breaker", r)
	}
}

// A listener that panics, or exits the goroutine, as it is told of a
// queued task refused by the breaker (on the finishing worker whose
// failure opened it) leaves no refused task uncompleted: the others are
// refused as well, a Do call returns, the books balance.
func TestQueuedTasksRefusedByTheBreakerWithAListenerThatPanicsOrExits(t *testing.T) {
	for name, raise := range map[string]func(){"panic": func() { panic("listener") }, "Goexit": runtime.Goexit} {
		t.Run(name, func(t *testing.T) {
			var raised atomic.Bool
			l := executor.ListenerFuncs{Rejected: func(executor.Event) {
				if raised.CompareAndSwap(false, true) {
					raise()
				}
			}}
			ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)}, executor.WithListener(l),
				executor.WithGroupBreaker(tripOnFirstFailure(breaker.Settings{Clock: fakeClock()})))

			release := make(chan struct{})
			closeAtEnd(t, release)
			first := submit(t, ex, executor.Task[int]{Group: "g", ID: "first", Fn: failOnRelease(release)})
			var ran atomic.Int32
			runs := func(context.Context) (int, error) { ran.Add(1); return 0, nil }
			q1 := submit(t, ex, executor.Task[int]{Group: "g", ID: "q1", Fn: runs})
			q2 := submit(t, ex, executor.Task[int]{Group: "g", ID: "q2", Fn: runs})
			doErr := make(chan error, 1)
			go func() { doErr <- ex.Do(bg, "g", func(context.Context) error { ran.Add(1); return nil }) }()
			waitFor(t, func() bool { return groupStats(t, ex, "g").Waiting == 3 })

			close(release)
			wait(t, first)
			for _, h := range []*executor.Handle[int]{q1, q2} {
				wantBreakerRefusal(t, h.ID(), wait(t, h).Err, breaker.ErrOpenState, 1)
			}
			wantBreakerRefusal(t, "Do", recv(t, doErr, "Do's return"), breaker.ErrOpenState, 1)
			if !raised.Load() || ran.Load() != 0 {
				t.Errorf("listener raised %v, queued tasks ran %d: want raised, none ran", raised.Load(), ran.Load())
			}
			waitFor(t, func() bool { s := groupStats(t, ex, "g"); return s.InFlight == 0 && s.Rejected == 3 })
			wantInvariants(t, ex)
		})
	}
}

// Shutdown waits for the queued tasks, and those the breaker refuses as
// they would start end its wait as a run would.
func TestShutdownEndsOnceTheBreakerRefusesTheQueuedTasks(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)},
		executor.WithGroupBreaker(tripOnFirstFailure(breaker.Settings{Clock: fakeClock()})))

	release := make(chan struct{})
	closeAtEnd(t, release)
	submit(t, ex, executor.Task[int]{Group: "g", ID: "first", Fn: failOnRelease(release)})
	queued := submit(t, ex, executor.Task[int]{Group: "g", ID: "queued", Fn: succeeding})
	ctx := newWaitingCtx()
	done := make(chan error, 1)
	go func() { done <- ex.Shutdown(ctx) }()
	recv(t, ctx.asked, "Shutdown's wait")
	close(release)
	if err := recv(t, done, "Shutdown's return"); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	wantBreakerRefusal(t, "queued", wait(t, queued).Err, breaker.ErrOpenState, 1)
}
