package executor_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// TestAdmissionLimits fills one limit or threshold and checks that the next
// task is refused by exactly that one.
func TestAdmissionLimits(t *testing.T) {
	tests := []struct {
		name    string
		opts    []policy.Option
		running []string // group of each task started first (blocked)
		waiting []string // group of each task queued next
		next    string   // group of the task that must be refused
		limit   executor.Limit
		used    int
		max     int
	}{
		{"group bulkhead counts waiting and running",
			[]policy.Option{policy.WithDefaultMaxInFlight(3), policy.WithDefaultMaxConcurrency(1)},
			[]string{"a"}, []string{"a", "a"}, "a", executor.LimitGroupInFlight, 3, 3},
		{"group queue threshold",
			[]policy.Option{policy.WithDefaultQueueThreshold(2), policy.WithDefaultMaxConcurrency(1)},
			[]string{"a"}, []string{"a", "a"}, "a", executor.LimitGroupQueue, 2, 2},
		{"group queue threshold override",
			[]policy.Option{policy.WithDefaultQueueThreshold(5), policy.WithGroupQueueThreshold("a", 1), policy.WithDefaultMaxConcurrency(1)},
			[]string{"a"}, []string{"a"}, "a", executor.LimitGroupQueue, 1, 1},
		{"queue threshold 0 refuses any wait",
			[]policy.Option{policy.WithDefaultQueueThreshold(0), policy.WithDefaultMaxConcurrency(1)},
			[]string{"a"}, nil, "a", executor.LimitGroupQueue, 0, 0},
		{"global queue threshold across groups",
			[]policy.Option{policy.WithGlobalQueueThreshold(2), policy.WithDefaultMaxConcurrency(1)},
			[]string{"a", "b"}, []string{"a", "b"}, "c", executor.LimitGlobalQueue, 2, 2},
		{"bulkhead override",
			[]policy.Option{policy.WithGroupMaxInFlight("a", 1), policy.WithDefaultMaxConcurrency(1)},
			[]string{"a"}, nil, "a", executor.LimitGroupInFlight, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ex := newExec(t, tt.opts)
			g := newGate()
			defer g.open()
			for i, grp := range tt.running {
				submit(t, ex, executor.Task[string]{Group: grp, ID: fmt.Sprint("r", i), Fn: g.fn(grp)})
			}
			g.waitStarted(t, len(tt.running))
			if tt.next == "c" {
				// The global queue case needs c to wait too: block it.
				submit(t, ex, executor.Task[string]{Group: "c", ID: "c-run", Fn: g.fn("c")})
				g.waitStarted(t, 1)
			}
			for i, grp := range tt.waiting {
				submit(t, ex, executor.Task[string]{Group: grp, ID: fmt.Sprint("w", i), Fn: g.fn(grp)})
			}
			h, err := executor.Submit(ex, bg, executor.Task[string]{Group: tt.next, ID: "x", Fn: g.fn("x")})
			var re *executor.RejectedError
			if !errors.As(err, &re) || !errors.Is(err, executor.ErrRejected) {
				t.Fatalf("err = %v, want a *RejectedError", err)
			}
			if re.Limit != tt.limit || re.Used != tt.used || re.Max != tt.max || errors.Unwrap(err) != nil {
				t.Errorf("refused by %+v, want %q with %d of %d used", re, tt.limit, tt.used, tt.max)
			}
			if r, ok := h.Result(); !ok || r.Status != executor.Rejected || r.Err != err {
				t.Errorf("handle = %+v, %v; want completed Rejected with Submit's error", r, ok)
			}
			g.open()
			g.waitStarted(t, len(tt.waiting))
			g.noneStarted(t)
		})
	}
}

func TestFIFOWithinGroup(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)})
	g := newGate()
	submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("blocker")})
	g.waitStarted(t, 1)
	var mu sync.Mutex
	var order []int
	var hs []*executor.Handle[int]
	for i := range 20 {
		hs = append(hs, submit(t, ex, executor.Task[int]{Group: "g", Fn: func(context.Context) (int, error) {
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			return i, nil
		}}))
	}
	g.open()
	for _, h := range hs {
		wait(t, h)
	}
	for i, v := range order {
		if v != i {
			t.Fatalf("run order %v, want FIFO", order)
		}
	}
}

// TestGlobalRoomGoesToGroupsInTurn: with one global permit and three groups
// waiting, freed room rotates over the groups.
func TestGlobalRoomGoesToGroupsInTurn(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithGlobalMaxInFlight(1), policy.WithDefaultMaxConcurrency(5)})
	g := newGate()
	submit(t, ex, executor.Task[string]{Group: "x", Fn: g.fn("blocker")})
	g.waitStarted(t, 1)
	var mu sync.Mutex
	var order []string
	var hs []*executor.Handle[int]
	for _, grp := range []string{"a", "a", "a", "b", "b", "b", "c", "c", "c"} {
		hs = append(hs, submit(t, ex, executor.Task[int]{Group: grp, Fn: func(context.Context) (int, error) {
			mu.Lock()
			order = append(order, grp)
			mu.Unlock()
			return 0, nil
		}}))
	}
	g.open()
	for _, h := range hs {
		wait(t, h)
	}
	if got, want := fmt.Sprint(order), "[a b c a b c a b c]"; got != want {
		t.Errorf("start order %s, want %s", got, want)
	}
}

// TestHeavyHeadIsNotStarved: a weight-4 task at the front of the line gets
// the global room as it frees, ahead of a light group's backlog that could
// otherwise keep taking it one permit at a time.
func TestHeavyHeadIsNotStarved(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithGlobalMaxInFlight(4), policy.WithDefaultMaxConcurrency(4)})
	light := make([]*gate, 4)
	for i := range light {
		light[i] = newGate()
		submit(t, ex, executor.Task[string]{Group: "light", Fn: light[i].fn("light-running")})
		light[i].waitStarted(t, 1)
	}
	var mu sync.Mutex
	var order []string
	record := func(name string) func(context.Context) (int, error) {
		return func(context.Context) (int, error) {
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			return 0, nil
		}
	}
	heavy := submit(t, ex, executor.Task[int]{Group: "heavy", Weight: 4, Fn: record("heavy")})
	var backlog []*executor.Handle[int]
	for i := range 5 {
		backlog = append(backlog, submit(t, ex, executor.Task[int]{Group: "light", Fn: record(fmt.Sprint("light-", i))}))
	}
	for i, lg := range light[:3] {
		lg.open()
		// Each freed permit must wait for the heavy head: nothing starts.
		for {
			if s := groupStats(t, ex, "light"); s.RunningTasks == 3-i {
				break
			}
		}
		if s := groupStats(t, ex, "light"); s.Waiting != 5 {
			t.Fatalf("after %d releases, light backlog started: %+v", i+1, s)
		}
		if isDone(heavy) {
			t.Fatal("heavy task ran before 4 permits were free")
		}
	}
	light[3].open()
	wait(t, heavy)
	for _, h := range backlog {
		wait(t, h)
	}
	if order[0] != "heavy" {
		t.Errorf("start order %v, want heavy first", order)
	}
}

// TestWaitingTaskHoldsNoGlobalPermit is the isolation guarantee: a hot group
// with a deep backlog (blocked by its own concurrency limit) does not delay
// another group's task while global room is free. The cold task's start is
// decided inside Submit, so the check needs no clock.
func TestWaitingTaskHoldsNoGlobalPermit(t *testing.T) {
	const backlog = 100_000
	ex := newExec(t, []policy.Option{
		policy.WithGlobalMaxInFlight(4),
		policy.WithDefaultMaxConcurrency(2),
		policy.WithDefaultMaxInFlight(policy.Unlimited),
	})
	hot := newGate()
	for range 2 {
		submit(t, ex, executor.Task[string]{Group: "hot", Fn: hot.fn("hot")})
	}
	hot.waitStarted(t, 2)
	hs := make([]*executor.Handle[string], 0, backlog)
	for range backlog {
		hs = append(hs, submit(t, ex, executor.Task[string]{Group: "hot", Fn: hot.fn("hot")}))
	}
	if s := ex.Stats(); s.Waiting != backlog || s.Running != 2 {
		t.Fatalf("stats = %+v, want %d waiting and 2 running", s, backlog)
	}
	cold := newGate()
	defer cold.open()
	submit(t, ex, executor.Task[string]{Group: "cold", Fn: cold.fn("cold")})
	if s := groupStats(t, ex, "cold"); s.RunningTasks != 1 || s.Waiting != 0 {
		t.Fatalf("cold task did not start at once: %+v", s)
	}
	if got := cold.waitStarted(t, 1); got[0] != "cold" {
		t.Fatal(got)
	}
	// Drain the hot backlog so the test ends quickly.
	for _, h := range hs {
		h.Cancel()
	}
	hot.open()
}

// TestLoneGroupPaysForItsStarts: a group whose finished task hands its
// room to its own next task, with no other group waiting (the shortcut of
// startFreedLocked), is charged for that start as deficit round robin
// charges any other: when a second group then waits for the global room,
// the turns alternate at the next release, not one task later.
func TestLoneGroupPaysForItsStarts(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithGlobalMaxInFlight(1), policy.WithDefaultMaxConcurrency(1)})
	started := make(chan string, 16)
	gates := map[string]*gate{}
	t.Cleanup(func() { // before the executor's Close, on failure too
		for _, g := range gates {
			g.open()
		}
	})
	task := func(name string) executor.Task[string] {
		g := &gate{started: started, release: make(chan struct{})}
		gates[name] = g
		return executor.Task[string]{Group: name[:1], ID: name, Fn: g.fn(name)}
	}
	var hs []*executor.Handle[string]
	for _, name := range []string{"a0", "a1", "a2", "a3"} {
		hs = append(hs, submit(t, ex, task(name)))
	}
	next := func(want string) {
		t.Helper()
		if got := (&gate{started: started}).waitStarted(t, 1)[0]; got != want {
			t.Fatalf("%s started, want %s", got, want)
		}
	}
	next("a0")
	gates["a0"].open() // a1 starts from a0's release: a is alone
	next("a1")
	hs = append(hs, submit(t, ex, task("b0"))) // b now waits for the global room
	gates["a1"].open()
	next("b0") // a paid for a1's start: its turn is over
	gates["b0"].open()
	next("a2")
	gates["a2"].open()
	next("a3")
	gates["a3"].open()
	for _, h := range hs {
		if r := wait(t, h); r.Status != executor.Success {
			t.Fatalf("%s: %v", h.ID(), r.Status)
		}
	}
}
