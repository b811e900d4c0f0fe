package executor_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

var errBackend = errors.New("backend down")

func failing(context.Context) (int, error)    { return 0, errBackend }
func succeeding(context.Context) (int, error) { return 1, nil }

func TestGroupBreakerTripsAndRejectsAtOnce(t *testing.T) {
	for _, rp := range []policy.RejectionPolicy{policy.Abort, policy.Discard, policy.CallerRuns} {
		t.Run(rp.String(), func(t *testing.T) {
			ex := newExec(t, []policy.Option{policy.WithRejectionPolicy(rp)},
				executor.WithGroupBreaker(breaker.Settings{Clock: fakeClock()}))
			for i := range breaker.DefaultConsecutiveFailures {
				// The outcome is recorded before the handle completes: after
				// the 5th Wait, the breaker is open.
				if r := wait(t, submit(t, ex, executor.Task[int]{Group: "bad", Fn: failing})); r.Status != executor.Failed {
					t.Fatalf("task %d: %+v", i, r)
				}
			}
			if s := groupStats(t, ex, "bad"); s.Breaker != breaker.StateOpen {
				t.Fatalf("breaker %v after %d failures", s.Breaker, breaker.DefaultConsecutiveFailures)
			}
			ran := false
			h, err := executor.Submit(ex, bg, executor.Task[int]{Group: "bad", ID: "x",
				Fn: func(context.Context) (int, error) { ran = true; return 0, nil }})
			var re *executor.RejectedError
			if !errors.Is(err, breaker.ErrOpenState) || !errors.Is(err, executor.ErrRejected) || !errors.As(err, &re) || re.Limit != executor.LimitBreaker {
				t.Fatalf("err = %v, want a refusal by the open breaker", err)
			}
			if r, ok := h.Result(); !ok || r.Status != executor.Rejected || ran {
				t.Fatalf("result %+v ran=%v: want Rejected at once, never run", r, ran)
			}
			if s := groupStats(t, ex, "bad"); s.Waiting != 0 || s.InFlight != 0 {
				t.Errorf("refused task took capacity: %+v", s)
			}
			// Other groups have their own breakers.
			if r := wait(t, submit(t, ex, executor.Task[int]{Group: "good", Fn: succeeding})); r.Status != executor.Success {
				t.Errorf("other group: %+v", r)
			}
		})
	}
}

func TestGroupBreakerRecovers(t *testing.T) {
	clk := fakeClock()
	ex := newExec(t, nil, executor.WithGroupBreaker(breaker.Settings{
		Clock: clk, Timeout: time.Minute, ReadyToTrip: func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 1 },
	}))
	wait(t, submit(t, ex, executor.Task[int]{Group: "g", Fn: failing}))
	if _, err := executor.Submit(ex, bg, executor.Task[int]{Group: "g", Fn: succeeding}); !errors.Is(err, breaker.ErrOpenState) {
		t.Fatalf("err = %v", err)
	}
	clk.Advance(time.Minute) // half-open: one probe
	if r := wait(t, submit(t, ex, executor.Task[int]{Group: "g", Fn: succeeding})); r.Status != executor.Success {
		t.Fatalf("probe: %+v", r)
	}
	if s := groupStats(t, ex, "g"); s.Breaker != breaker.StateClosed {
		t.Fatalf("breaker %v after a successful probe", s.Breaker)
	}
}

// A group breaker without a Clock of its own reads the executor's, whether
// WithClock comes before WithGroupBreaker or after it; an Option given to
// two executors times each one's breakers on that executor's clock.
func TestGroupBreakerUsesExecutorClock(t *testing.T) {
	brk := executor.WithGroupBreaker(breaker.Settings{
		Timeout: time.Minute, ReadyToTrip: func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 1 },
	})
	for _, order := range []string{"clock first", "breaker first", "breaker reused"} {
		t.Run(order, func(t *testing.T) {
			clk := fakeClock()
			var ex *executor.Executor
			if order == "clock first" {
				ex = newExec(t, nil, executor.WithClock(clk), brk)
			} else {
				ex = newExec(t, nil, brk, executor.WithClock(clk))
			}
			wait(t, submit(t, ex, executor.Task[int]{Group: "g", Fn: failing}))
			clk.Advance(20 * time.Second)
			if s := groupStats(t, ex, "g"); s.Breaker != breaker.StateOpen || s.BreakerRemainingDelay != 40*time.Second {
				t.Fatalf("open breaker 20s into its 1m on the executor's clock: %v, BreakerRemainingDelay %v, want 40s", s.Breaker, s.BreakerRemainingDelay)
			}
			clk.Advance(40 * time.Second) // half-open: one probe
			if r := wait(t, submit(t, ex, executor.Task[int]{Group: "g", Fn: succeeding})); r.Status != executor.Success {
				t.Fatalf("probe after the breaker's timeout on the executor's clock: %+v", r)
			}
		})
	}
}

// GroupStats says how long an open group breaker has left, on the
// breaker's clock, so that a server refusing the group's tasks can tell its
// clients when to come back; 0 while it is closed or half-open.
func TestGroupStatsBreakerRemainingDelay(t *testing.T) {
	clk := fakeClock()
	ex := newExec(t, nil, executor.WithGroupBreaker(breaker.Settings{
		Clock: clk, Timeout: time.Minute, ReadyToTrip: func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 1 },
	}))
	wait(t, submit(t, ex, executor.Task[int]{Group: "g", Fn: succeeding}))
	if s := groupStats(t, ex, "g"); s.BreakerRemainingDelay != 0 {
		t.Fatalf("closed breaker: BreakerRemainingDelay %v, want 0", s.BreakerRemainingDelay)
	}
	wait(t, submit(t, ex, executor.Task[int]{Group: "g", Fn: failing}))
	clk.Advance(20 * time.Second)
	if _, err := executor.Submit(ex, bg, executor.Task[int]{Group: "g", Fn: succeeding}); !errors.Is(err, breaker.ErrOpenState) {
		t.Fatalf("err = %v", err)
	}
	if s := groupStats(t, ex, "g"); s.Breaker != breaker.StateOpen || s.BreakerRemainingDelay != 40*time.Second {
		t.Fatalf("open breaker 20s into its 1m: %v, BreakerRemainingDelay %v, want 40s", s.Breaker, s.BreakerRemainingDelay)
	}
	clk.Advance(40 * time.Second)
	if s := groupStats(t, ex, "g"); s.BreakerRemainingDelay != 0 {
		t.Fatalf("open breaker past its timeout: BreakerRemainingDelay %v, want 0", s.BreakerRemainingDelay)
	}
}

// TestCancelledAndTimedOutTasksDoNotCount: only Success and Failed reach the
// breaker; a half-open probe slot held by a task cancelled while waiting is
// given back.
func TestCancelledAndTimedOutTasksDoNotCount(t *testing.T) {
	clk := fakeClock()
	ex := newExec(t, []policy.Option{policy.WithQueueTimeout(time.Second)}, executor.WithClock(clk),
		executor.WithGroupBreaker(breaker.Settings{Clock: clk, ReadyToTrip: func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 1 }}))
	g := newGate()
	defer g.open()
	blocker := submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("blocker")})
	g.waitStarted(t, 1)
	cancelled := submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("never")})
	cancelled.Cancel()
	timedOut := submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("never")})
	clk.Advance(time.Second)
	if r := wait(t, timedOut); !errors.Is(r.Err, executor.ErrQueueTimeout) {
		t.Fatalf("%+v", r)
	}
	g.open()
	wait(t, blocker)
	if s := groupStats(t, ex, "g"); s.Breaker != breaker.StateClosed {
		t.Fatalf("breaker %v", s.Breaker)
	}

	// Trip it, move to half-open, and cancel the only probe while it waits:
	// its slot comes back, so the next task may probe.
	wait(t, submit(t, ex, executor.Task[int]{Group: "g", Fn: failing}))
	clk.Advance(breaker.DefaultTimeout)
	g2 := newGate()
	defer g2.open()
	probe := submit(t, ex, executor.Task[string]{Group: "g", Fn: func(ctx context.Context) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	}})
	probe.Cancel()
	if r := wait(t, probe); r.Status != executor.Cancelled {
		t.Fatalf("probe %+v", r)
	}
	if r := wait(t, submit(t, ex, executor.Task[int]{Group: "g", Fn: succeeding})); r.Status != executor.Success {
		t.Fatalf("after a cancelled probe: %+v, want the slot back", r)
	}
	if s := groupStats(t, ex, "g"); s.Breaker != breaker.StateClosed {
		t.Fatalf("breaker %v", s.Breaker)
	}
}

// TestIdleReclamationBoundsOpenBreakers: a group whose breaker is open is
// idle, and reclaimed like any other idle group once WithMaxIdleGroups
// groups went idle after it, so that tenants that trip their breaker and
// go away do not pile up. One that keeps calling is kept: each refusal
// makes it the most recently idle.
func TestIdleReclamationBoundsOpenBreakers(t *testing.T) {
	const maxIdle = 2
	ex := newExec(t, nil, executor.WithMaxIdleGroups(maxIdle), executor.WithGroupBreaker(breaker.Settings{
		Clock: fakeClock(), ReadyToTrip: func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 1 },
	}))
	trip := func(group string) {
		wait(t, submit(t, ex, executor.Task[int]{Group: group, Fn: failing}))
		if s := groupStats(t, ex, group); s.Breaker != breaker.StateOpen {
			t.Fatalf("%s: breaker %v, want open", group, s.Breaker)
		}
	}
	// More tenants than maxIdle go first, so that groups going idle are
	// listed from the caller's on: the list, when it comes into use, puts
	// the groups kept before in no particular order.
	for i := range maxIdle + 1 {
		trip(fmt.Sprint("gone-", i))
	}
	trip("caller")
	for i := maxIdle + 1; i < 20; i++ { // tenants that trip their breaker and go away
		trip(fmt.Sprint("gone-", i))
		if _, err := executor.Submit(ex, bg, executor.Task[int]{Group: "caller", Fn: succeeding}); !errors.Is(err, breaker.ErrOpenState) {
			t.Fatalf("caller: err = %v, want its breaker still open", err)
		}
		if s := ex.Stats(); s.Groups > maxIdle || s.IdleGroups > maxIdle {
			t.Fatalf("after %d tenants: %d groups kept (%d idle), want at most %d", i+1, s.Groups, s.IdleGroups, maxIdle)
		}
	}
	if _, ok := ex.GroupStats("gone-0"); ok {
		t.Error("the open breaker idle the longest was kept")
	}
	// A reclaimed breaker is forgotten: the group is made again, closed.
	if r := wait(t, submit(t, ex, executor.Task[int]{Group: "gone-0", Fn: succeeding})); r.Status != executor.Success {
		t.Fatalf("after reclamation: %+v", r)
	}
	// Explicit eviction drops the breaker with the group.
	if !ex.EvictGroup("caller") {
		t.Fatal("idle group not evicted")
	}
	if r := wait(t, submit(t, ex, executor.Task[int]{Group: "caller", Fn: succeeding})); r.Status != executor.Success {
		t.Fatalf("after eviction: %+v", r)
	}
}

func TestBreakerCallbackRunsOutsideExecutorLocks(t *testing.T) {
	var mu sync.Mutex
	var changes []string
	var ex *executor.Executor
	ex = newExec(t, nil, executor.WithGroupBreaker(breaker.Settings{
		Name:  "api",
		Clock: fakeClock(),
		OnStateChange: func(name string, from, to breaker.State) {
			ex.Stats() // would deadlock under an executor lock
			mu.Lock()
			changes = append(changes, fmt.Sprintf("%s %v->%v", name, from, to))
			mu.Unlock()
		},
		ReadyToTrip: func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 1 },
	}))
	wait(t, submit(t, ex, executor.Task[int]{Group: "g", Fn: failing}))
	mu.Lock()
	defer mu.Unlock()
	if len(changes) != 1 || changes[0] != "api:g closed->open" {
		t.Errorf("changes %v", changes)
	}
}

func TestInvalidBreakerSettings(t *testing.T) {
	p, _ := policy.New()
	_, err := executor.New(p, executor.WithGroupBreaker(breaker.Settings{Timeout: -time.Second}))
	if !errors.Is(err, breaker.ErrInvalidSettings) || !strings.Contains(err.Error(), "Timeout") {
		t.Fatalf("err = %v, want an error naming Timeout", err)
	}
}

// TestOnStateChangeMayWaitForExecutorWork: the callback runs on the worker
// whose task tripped the breaker, before that worker is counted as about to
// pick up queued work, so a task the callback submits and waits for runs.
func TestOnStateChangeMayWaitForExecutorWork(t *testing.T) {
	var ex *executor.Executor
	res := make(chan executor.Status, 1)
	ex = newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(4)},
		executor.WithGroupBreaker(breaker.Settings{Clock: fakeClock(),
			OnStateChange: func(name string, from, to breaker.State) {
				if name != "bad" || to != breaker.StateOpen {
					return
				}
				h, err := executor.Submit(ex, bg, executor.Task[int]{Group: "ops", Fn: succeeding})
				if err != nil {
					res <- executor.Rejected
					return
				}
				ctx, cancel := context.WithTimeout(bg, 10*time.Second) // a hang guard
				defer cancel()
				r, _ := h.Wait(ctx)
				res <- r.Status // 0 if the wait timed out
			}}))
	for range breaker.DefaultConsecutiveFailures {
		wait(t, submit(t, ex, executor.Task[int]{Group: "bad", Fn: failing}))
	}
	if st := <-res; st != executor.Success {
		t.Fatalf("task submitted from OnStateChange: status %v (0: it never ran)", st)
	}
}

// TestBackToBackWaitIsNeverNegative: a worker starts the task that follows
// its finished one at once at that task's end, without reading the clock
// again, unless the next task was submitted after that end: here, from the
// breaker's OnStateChange, which runs on the worker between the two. Its
// wait must be zero, not negative.
func TestBackToBackWaitIsNeverNegative(t *testing.T) {
	clk := fakeClock()
	var ex *executor.Executor
	next := make(chan *executor.Handle[int], 1)
	ex = newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)}, executor.WithClock(clk),
		executor.WithGroupBreaker(breaker.Settings{
			Clock: clk, Timeout: time.Minute,
			ReadyToTrip: func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 1 },
			OnStateChange: func(_ string, from, to breaker.State) {
				if from != breaker.StateHalfOpen || to != breaker.StateClosed {
					return
				}
				clk.Advance(time.Second) // after the probe's end, before its finish
				h, err := executor.Submit(ex, bg, executor.Task[int]{Group: "g", Fn: succeeding})
				if err != nil {
					t.Error(err)
				}
				next <- h
			},
		}))
	wait(t, submit(t, ex, executor.Task[int]{Group: "g", Fn: failing})) // open
	clk.Advance(time.Minute)                                            // half-open
	if r := wait(t, submit(t, ex, executor.Task[int]{Group: "g", Fn: succeeding})); r.Status != executor.Success {
		t.Fatalf("probe: %+v", r)
	}
	h := <-next
	if h == nil {
		t.FailNow()
	}
	if r := wait(t, h); r.Status != executor.Success || r.Queued != 0 || r.Duration != 0 {
		t.Fatalf("the task submitted at the probe's finish: %+v, want Success, queued 0, duration 0", r)
	}
}

// The breaker lets a panic in ReadyToTrip go on up the caller that records
// the failure: here the executor, between a task's end and the release of
// its permits. The task still releases them and completes: a Do call
// returns fn's error, a Submit task completes Failed (on a worker, the
// panic would crash the process), and the group goes on serving.
func TestReadyToTripPanicReleasesPermits(t *testing.T) {
	p, err := policy.New(policy.WithDefaultMaxConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	ex, err := executor.New(p, executor.WithGroupBreaker(breaker.Settings{
		ReadyToTrip: func(breaker.Counts) bool { panic("trip bug") }}))
	if err != nil {
		t.Fatal(err)
	}
	var got error
	if v := func() (v any) {
		defer func() { v = recover() }()
		got = ex.Do(bg, "a", func(context.Context) error { return errBackend })
		return nil
	}(); v != nil {
		// The permits may be held: Close would wait for ever.
		t.Fatalf("Do panicked: %v", v)
	}
	if !errors.Is(got, errBackend) {
		t.Fatalf("Do: %v, want fn's error", got)
	}
	ctx, cancel := context.WithTimeout(bg, 10*time.Second) // a hang guard
	defer cancel()
	h, err := executor.Submit(ex, ctx, executor.Task[int]{Group: "a", Fn: failing})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := h.Wait(ctx); err != nil || r.Status != executor.Failed {
		t.Fatalf("Submit: %+v %v, want Failed", r, err)
	}
	if err := ex.Do(ctx, "a", func(context.Context) error { return nil }); err != nil {
		t.Fatalf("the next call: %v", err)
	}
	if s, _ := ex.GroupStats("a"); s.Running != 0 || s.Failed != 2 || s.Succeeded != 1 || s.Breaker != breaker.StateClosed {
		t.Fatalf("group a: %+v", s)
	}
	if msg := ex.CheckInvariants(); msg != "" {
		t.Fatal(msg)
	}
	ex.Close()
}

// OnStateChange is user code the breaker calls in the goroutine that made
// the change; it recovers a panic there, but not a runtime.Goexit. At
// admission the change is open to half-open, made by the caller of Submit,
// Do or Go while its group is pinned, its lock released: a Goexit there
// must leave the group unpinned and the task counted, so that the group
// goes idle, is evicted at once, and its outcomes add up.
func TestOnStateChangeGoexitAtAdmission(t *testing.T) {
	for _, via := range []string{"Submit", "Do", "Go"} {
		t.Run(via, func(t *testing.T) {
			clk := fakeClock()
			ex := newExec(t, nil, executor.WithGroupBreaker(breaker.Settings{
				Clock: clk, Timeout: time.Minute,
				ReadyToTrip: func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 1 },
				OnStateChange: func(_ string, _, to breaker.State) {
					if to == breaker.StateHalfOpen {
						runtime.Goexit()
					}
				},
			}))
			wait(t, submit(t, ex, executor.Task[int]{Group: "g", Fn: failing})) // open
			clk.Advance(time.Minute)
			exited := make(chan struct{})
			go func() {
				defer close(exited)
				switch via {
				case "Submit":
					executor.Submit(ex, bg, executor.Task[int]{Group: "g", Fn: succeeding})
				case "Do":
					ex.Do(bg, "g", func(context.Context) error { return nil })
				default:
					ex.Go(bg, "g", func(context.Context) error { return nil })
				}
			}()
			<-exited
			if !ex.EvictGroup("g") {
				t.Fatalf("group g not evicted at once: %+v", groupStats(t, ex, "g"))
			}
			s := ex.Stats()
			if sum := s.Succeeded + s.Failed + s.Cancelled + s.Rejected; sum != s.Submitted {
				t.Fatalf("%+v: want every submitted task's outcome counted", s.TaskCounts)
			}
		})
	}
}

// At a task's finish, its failure is recorded in the breaker before its
// permits are released; ReadyToTrip and OnStateChange (closed to open) run
// there, in the goroutine that ran the task. One that exits the goroutine
// must not keep the task's permits: with a concurrency limit of 1, the
// group would serve nothing more, and Close would wait for ever.
func TestBreakerGoexitAtFinishReleasesPermits(t *testing.T) {
	for _, in := range []string{"ReadyToTrip", "OnStateChange"} {
		for _, via := range []string{"Submit", "Do", "Go"} {
			t.Run(in+"/"+via, func(t *testing.T) {
				clk := fakeClock()
				s := breaker.Settings{Clock: clk}
				var armed atomic.Bool
				armed.Store(true)
				if in == "ReadyToTrip" {
					s.ReadyToTrip = func(breaker.Counts) bool {
						if armed.Swap(false) {
							runtime.Goexit()
						}
						return false
					}
				} else {
					s.ReadyToTrip = func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 1 }
					s.OnStateChange = func(_ string, _, to breaker.State) {
						if to == breaker.StateOpen && armed.Swap(false) {
							runtime.Goexit()
						}
					}
				}
				p, err := policy.New(policy.WithDefaultMaxConcurrency(1))
				if err != nil {
					t.Fatal(err)
				}
				ex, err := executor.New(p, executor.WithGroupBreaker(s))
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(bg, 10*time.Second) // a hang guard
				defer cancel()
				var h *executor.Handle[int]
				exited := make(chan struct{})
				go func() {
					defer close(exited)
					switch via {
					case "Submit":
						h, _ = executor.Submit(ex, bg, executor.Task[int]{Group: "g", Fn: failing})
					case "Do":
						ex.Do(bg, "g", func(context.Context) error { return errBackend })
					default:
						ex.Go(bg, "g", func(context.Context) error { return errBackend })
					}
				}()
				recv(t, exited, "the call's goroutine exited")
				if h != nil {
					if r, err := h.Wait(ctx); err != nil || r.Status != executor.Failed {
						t.Fatalf("the task: %+v %v, want Failed", r, err)
					}
				}
				// Go returns before its task runs: the breaker opens, and
				// times its opening, only as the task finishes, which must
				// come before the clock moves.
				await(t, "the failed task finished, its permits back", func() bool {
					s, ok := ex.GroupStats("g")
					return ok && s.Failed == 1 && s.InFlight == 0
				})
				// The breaker opened: half-open, it lets the next call probe.
				clk.Advance(breaker.DefaultTimeout)
				// Admitted only once the failed task's permits are back.
				if err := ex.Do(ctx, "g", func(context.Context) error { return nil }); err != nil {
					t.Fatalf("the next call: %v (the failed task's permits kept)", err)
				}
				if err := ex.Shutdown(ctx); err != nil {
					t.Fatalf("Shutdown: %v", err)
				}
				st := ex.Stats()
				if st.Failed != 1 || st.Succeeded != 1 || st.Submitted != 2 {
					t.Fatalf("%+v: want one failure, one success", st.TaskCounts)
				}
				if msg := ex.CheckInvariants(); msg != "" {
					t.Fatal(msg)
				}
				ex.Close()
			})
		}
	}
}

// A task whose admission a breaker callback ends, exiting the goroutine
// (or a breaker Clock panicking there), was told to the listener as
// submitted and is counted Rejected: the listener hears of that refusal
// too, once, as it does of every refused task.
func TestBreakerExitAtAdmissionIsToldToTheListener(t *testing.T) {
	for _, how := range []string{"Goexit", "panic"} {
		for _, via := range []string{"Submit", "Do", "Go"} {
			t.Run(how+"/"+via, func(t *testing.T) {
				clk := &panickyClock{Fake: fakeClock()}
				var mu sync.Mutex
				var rejected []executor.Event
				submitted := 0
				ex := newExec(t, nil, executor.WithGroupBreaker(breaker.Settings{
					Clock: clk, Timeout: time.Minute,
					ReadyToTrip: func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 1 },
					OnStateChange: func(_ string, _, to breaker.State) {
						if to == breaker.StateHalfOpen && how == "Goexit" {
							runtime.Goexit()
						}
					},
				}), executor.WithListener(executor.ListenerFuncs{
					Submitted: func(executor.Event) { mu.Lock(); submitted++; mu.Unlock() },
					Rejected:  func(e executor.Event) { mu.Lock(); rejected = append(rejected, e); mu.Unlock() },
				}))
				wait(t, submit(t, ex, executor.Task[int]{Group: "g", Fn: failing})) // open
				clk.Advance(time.Minute)
				if how == "panic" {
					clk.panics.Store(true)
				}
				exited := make(chan struct{})
				go func() {
					defer close(exited)
					defer func() { _ = recover() }()
					switch via {
					case "Submit":
						executor.Submit(ex, bg, executor.Task[int]{Group: "g", ID: "probe", Fn: succeeding})
					case "Do":
						ex.Do(bg, "g", func(context.Context) error { return nil })
					default:
						ex.Go(bg, "g", func(context.Context) error { return nil })
					}
				}()
				<-exited
				clk.panics.Store(false)
				mu.Lock()
				defer mu.Unlock()
				if submitted != 2 || len(rejected) != 1 {
					t.Fatalf("%d submitted, %d rejected events (%+v), want 2 and 1", submitted, len(rejected), rejected)
				}
				e := rejected[0]
				wantID := ""
				if via == "Submit" {
					wantID = "probe"
				}
				var rej *executor.RejectedError
				if e.Group != "g" || e.ID != wantID || e.Weight != 1 || e.Status != executor.Rejected ||
					!errors.As(e.Err, &rej) || rej.Limit != executor.LimitBreaker {
					t.Fatalf("rejected event %+v, want group g, ID %q, Rejected by the breaker", e, wantID)
				}
				var pe *executor.PanicError
				if how == "Goexit" && !errors.Is(e.Err, executor.ErrGoexit) ||
					how == "panic" && (!errors.As(e.Err, &pe) || pe.Value != "clock bug") {
					t.Fatalf("rejected event's error %v, want the %s's", e.Err, how)
				}
				if s := ex.Stats(); s.Rejected != 1 || s.Submitted != 2 {
					t.Fatalf("%+v: want the refused task counted Rejected", s.TaskCounts)
				}
			})
		}
	}
}

// A client sending work for more new groups than WithMaxIdleGroups does
// not reset the open breaker of a group gone idle: groups whose breakers
// are closed are reclaimed before it, so that its dependency is not sent
// the calls the breaker was shedding. Groups with tripped breakers stay
// bounded: past 8 of them at the front, the one idle the longest goes.
func TestIdleReclamationSparesAnOpenBreakerForANewGroupsFlood(t *testing.T) {
	const maxIdle = 4
	ex := newExec(t, nil, executor.WithMaxIdleGroups(maxIdle), executor.WithGroupBreaker(breaker.Settings{
		Clock: fakeClock(), ReadyToTrip: func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 1 },
	}))
	// Enough groups first that the idle list is in use.
	for i := range maxIdle + 1 {
		wait(t, submit(t, ex, executor.Task[int]{Group: fmt.Sprint("early-", i), Fn: succeeding}))
	}
	wait(t, submit(t, ex, executor.Task[int]{Group: "victim", Fn: failing}))
	if s := groupStats(t, ex, "victim"); s.Breaker != breaker.StateOpen {
		t.Fatalf("victim: breaker %v, want open", s.Breaker)
	}
	for i := range 100 { // the flood: new groups, each going idle
		wait(t, submit(t, ex, executor.Task[int]{Group: fmt.Sprint("new-", i), Fn: succeeding}))
		if s := ex.Stats(); s.Groups > maxIdle {
			t.Fatalf("after %d new groups: %d groups kept, want at most %d", i+1, s.Groups, maxIdle)
		}
	}
	if _, err := executor.Submit(ex, bg, executor.Task[int]{Group: "victim", Fn: succeeding}); !errors.Is(err, breaker.ErrOpenState) {
		t.Fatalf("victim after the flood: err = %v, want its breaker still open", err)
	}
}

// A group going idle may be the one trimmed itself, when the groups idle
// longer have tripped breakers: it is then dropped in the section that
// left it idle, its finished task completing first, as with
// WithMaxIdleGroups(0). Left to be reclaimed after the section, the task
// completed before the group was dropped, unsettled until then, and a
// caller that saw it complete found more groups kept than maxIdle.
func TestIdleGroupTrimmedItselfIsDroppedAsItsTaskCompletes(t *testing.T) {
	const maxIdle = 2
	ex := newExec(t, nil, executor.WithMaxIdleGroups(maxIdle), executor.WithGroupBreaker(breaker.Settings{
		Clock: fakeClock(), ReadyToTrip: func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 1 },
	}))
	for _, group := range []string{"open-a", "open-b"} {
		wait(t, submit(t, ex, executor.Task[int]{Group: group, Fn: failing}))
		if s := groupStats(t, ex, group); s.Breaker != breaker.StateOpen {
			t.Fatalf("%s: breaker %v, want open", group, s.Breaker)
		}
	}
	if dropped, done := ex.FinishIdle("closed"); !dropped || !done {
		t.Fatalf("closed, gone idle behind %d open breakers: dropped %v, its task completed %v by the section's end; want both", maxIdle, dropped, done)
	}
	if s := ex.Stats(); s.Groups > maxIdle {
		t.Fatalf("%d groups kept, want at most %d", s.Groups, maxIdle)
	}
	for _, group := range []string{"open-a", "open-b"} {
		if s := groupStats(t, ex, group); s.Breaker != breaker.StateOpen {
			t.Fatalf("%s: breaker %v, want still open", group, s.Breaker)
		}
	}
	if bad := ex.CheckInvariants(); bad != "" {
		t.Fatal(bad)
	}
}
