package executor_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// A group whose queue grows long takes Submit's tasks, and Go's light
// ones, through its lane, without its lock (lane.go). These tests hold a group's one running task so
// that everything submitted after it waits, with the lane open, and check
// that the lane changes nothing a caller can see.

// laneExec returns an executor whose groups may open their lane: no
// in-flight limit, no queue threshold, a concurrency limit of one.
func laneExec(t *testing.T, eopts ...executor.Option) *executor.Executor {
	return newExec(t, []policy.Option{
		policy.WithGlobalMaxInFlight(4),
		policy.WithDefaultMaxConcurrency(1),
		policy.WithDefaultMaxInFlight(policy.Unlimited),
	}, eopts...)
}

// runOrder records the order in which tasks run.
type runOrder struct {
	mu  sync.Mutex
	ran []string
}

func (o *runOrder) fn(name string) func(context.Context) (string, error) {
	return func(context.Context) (string, error) {
		o.mu.Lock()
		o.ran = append(o.ran, name)
		o.mu.Unlock()
		return name, nil
	}
}

// numbered returns the names "0" to "n-1", as backlog and goBacklog name
// their tasks.
func numbered(n int) []string {
	var names []string
	for i := range n {
		names = append(names, fmt.Sprint(i))
	}
	return names
}

// expect fails t unless the tasks ran in the order of want.
func (o *runOrder) expect(t *testing.T, want []string) {
	t.Helper()
	if got := o.names(); !slices.Equal(got, want) {
		t.Errorf("ran in order\n%v\nwant\n%v", got, want)
	}
}

func (o *runOrder) names() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.ran)
}

// holdGroup starts a task in group that runs until the returned func is
// called, and waits for its start.
func holdGroup(t *testing.T, ex *executor.Executor, group string) (release func(), h *executor.Handle[string]) {
	t.Helper()
	g := newGate()
	t.Cleanup(g.open) // before Close: a failed test's executor still closes
	h = submit(t, ex, executor.Task[string]{Group: group, ID: "hold", Fn: g.fn("hold")})
	g.waitStarted(t, 1)
	return g.open, h
}

// backlog submits n tasks named "0" to "n-1" to group, which must be
// held, and checks that the ones past the lane's opening depth of 64
// joined the lane.
func backlog(t *testing.T, ex *executor.Executor, group string, o *runOrder, n int) []*executor.Handle[string] {
	t.Helper()
	pushed := executor.LanePushes()
	var hs []*executor.Handle[string]
	for i := range n {
		hs = append(hs, submit(t, ex, executor.Task[string]{Group: group, Fn: o.fn(fmt.Sprint(i))}))
	}
	if got := executor.LanePushes() - pushed; got != int64(n-64) {
		t.Fatalf("%d of %d tasks joined the lane, want %d: it opens at a backlog of 64", got, n, n-64)
	}
	return hs
}

// TestLaneKeepsFIFO: tasks that join the lane run after those queued
// before them and before those admitted after them, whichever way those
// came in (Submit with a context that can be cancelled, Go, Do).
func TestLaneKeepsFIFO(t *testing.T) {
	ex := laneExec(t)
	release, hold := holdGroup(t, ex, "g")
	var o runOrder
	hs := backlog(t, ex, "g", &o, 100)
	want := numbered(100)
	add := func(name string) {
		hs = append(hs, submit(t, ex, executor.Task[string]{Group: "g", Fn: o.fn(name)}))
		want = append(want, name)
	}
	// A task the lane does not take comes after the lane's tasks.
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	h, err := executor.Submit(ex, ctx, executor.Task[string]{Group: "g", Fn: o.fn("cancellable")})
	if err != nil {
		t.Fatal(err)
	}
	hs, want = append(hs, h), append(want, "cancellable")
	add("100")
	if err := ex.Go(bg, "g", func(ctx context.Context) error { _, err := o.fn("go")(ctx); return err }); err != nil {
		t.Fatal(err)
	}
	want = append(want, "go")
	add("101")
	doErr := make(chan error, 1)
	go func() {
		doErr <- ex.Do(bg, "g", func(ctx context.Context) error { _, err := o.fn("do")(ctx); return err })
	}()
	await(t, "the Do call joined the queue", func() bool { return groupStats(t, ex, "g").Waiting >= len(want)+1 })
	want = append(want, "do")
	add("102")
	release()
	wait(t, hold)
	for _, h := range hs {
		if r := wait(t, h); r.Status != executor.Success {
			t.Fatalf("%s: %v %v", h.ID(), r.Status, r.Err)
		}
	}
	if err := recv(t, doErr, "the Do call ran in its turn"); err != nil {
		t.Fatal(err)
	}
	drain(t, ex)
	o.expect(t, want)
}

// goBacklog calls Go n times for group, which must be held, with tasks
// named "0" to "n-1", and checks that the ones past the lane's opening
// depth joined the lane.
func goBacklog(t *testing.T, ex *executor.Executor, group string, o *runOrder, n int) {
	t.Helper()
	pushed := executor.LanePushes()
	for i := range n {
		fn := o.fn(fmt.Sprint(i))
		if err := ex.Go(bg, group, func(ctx context.Context) error { _, err := fn(ctx); return err }); err != nil {
			t.Fatal(err)
		}
	}
	if got := executor.LanePushes() - pushed; got != int64(n-64) {
		t.Fatalf("%d of %d Go tasks joined the lane, want %d", got, n, n-64)
	}
}

// TestLaneTakesGo: light Go tasks join a backlogged group's lane too, and
// run in order; counted as waiting and submitted meanwhile.
func TestLaneTakesGo(t *testing.T) {
	ex := laneExec(t)
	release, hold := holdGroup(t, ex, "g")
	var o runOrder
	goBacklog(t, ex, "g", &o, 200)
	if s := groupStats(t, ex, "g"); s.Waiting != 200 || s.InFlight != 201 || s.Submitted != 201 {
		t.Errorf("group stats: waiting %d, in flight %d, submitted %d; want 200, 201, 201", s.Waiting, s.InFlight, s.Submitted)
	}
	release()
	wait(t, hold)
	drain(t, ex)
	o.expect(t, numbered(200))
}

// TestLaneGoClose: Close cancels the Go tasks in a lane, and none runs.
func TestLaneGoClose(t *testing.T) {
	ex := laneExec(t)
	release, _ := holdGroup(t, ex, "g")
	var o runOrder
	goBacklog(t, ex, "g", &o, 100)
	closed := make(chan error, 1)
	go func() { closed <- ex.Close() }()
	for deadline := time.Now().Add(10 * time.Second); ex.Stats().Cancelled < 100; runtime.Gosched() { // a hang guard
		if time.Now().After(deadline) {
			t.Fatalf("Close cancelled %d of the 100 waiting Go tasks", ex.Stats().Cancelled)
		}
	}
	release()
	if err := recv(t, closed, "Close returned once the holder ended"); err != nil {
		t.Fatal(err)
	}
	if got := o.names(); len(got) != 0 {
		t.Errorf("Go tasks ran after Close: %v", got)
	}
	if s := ex.Stats(); s.Cancelled != 100 || s.Waiting != 0 {
		t.Errorf("after Close: cancelled %d, waiting %d; want 100, 0", s.Cancelled, s.Waiting)
	}
}

// TestLaneCounts: a task in the lane is waiting, in flight and submitted in
// the stats.
func TestLaneCounts(t *testing.T) {
	ex := laneExec(t)
	release, hold := holdGroup(t, ex, "g")
	var o runOrder
	hs := backlog(t, ex, "g", &o, 80)
	s := groupStats(t, ex, "g")
	if s.Waiting != 80 || s.InFlight != 81 || s.Submitted != 81 || s.RunningTasks != 1 {
		t.Errorf("group stats: waiting %d, in flight %d, submitted %d, running %d; want 80, 81, 81, 1",
			s.Waiting, s.InFlight, s.Submitted, s.RunningTasks)
	}
	if all := ex.Stats(); all.Waiting != 80 || all.Submitted != 81 {
		t.Errorf("executor stats: waiting %d, submitted %d; want 80, 81", all.Waiting, all.Submitted)
	}
	release()
	wait(t, hold)
	for _, h := range hs {
		wait(t, h)
	}
	drain(t, ex)
	if s := ex.Stats(); s.Waiting != 0 || s.Submitted != 81 || s.Succeeded != 81 {
		t.Errorf("drained: waiting %d, submitted %d, succeeded %d; want 0, 81, 81", s.Waiting, s.Submitted, s.Succeeded)
	}
}

// TestLaneCancel: a task cancelled while in the lane leaves the queue and
// never runs; the others run in order.
func TestLaneCancel(t *testing.T) {
	ex := laneExec(t)
	release, hold := holdGroup(t, ex, "g")
	var o runOrder
	hs := backlog(t, ex, "g", &o, 100)
	if !hs[90].Cancel() {
		t.Fatal("Cancel of a task in the lane reported false")
	}
	if r := wait(t, hs[90]); r.Status != executor.Cancelled {
		t.Fatalf("cancelled task: %v", r.Status)
	}
	release()
	wait(t, hold)
	for i, h := range hs {
		if i != 90 {
			wait(t, h)
		}
	}
	drain(t, ex)
	o.expect(t, slices.Delete(numbered(100), 90, 91))
}

// TestLaneLeavesNoTask: a group whose waiting tasks are all cancelled
// while none of its tasks runs (they wait for global room) has no finish
// to come: a task submitted after that still runs.
func TestLaneLeavesNoTask(t *testing.T) {
	ex := newExec(t, []policy.Option{
		policy.WithGlobalMaxInFlight(1),
		policy.WithDefaultMaxConcurrency(1),
		policy.WithDefaultMaxInFlight(policy.Unlimited),
	})
	release, hold := holdGroup(t, ex, "other") // the one global permit
	var o runOrder
	hs := backlog(t, ex, "g", &o, 100)
	for _, h := range hs {
		if !h.Cancel() {
			t.Fatal("Cancel of a waiting task reported false")
		}
	}
	late := submit(t, ex, executor.Task[string]{Group: "g", Fn: o.fn("late")})
	release()
	wait(t, hold)
	if r := wait(t, late); r.Status != executor.Success {
		t.Fatalf("the task submitted after the cancels: %v", r.Status)
	}
	if got := o.names(); !slices.Equal(got, []string{"late"}) {
		t.Errorf("ran %v, want only the late task", got)
	}
}

// TestLaneClosesWithItsBacklog: once a group's backlog has left its queue,
// however it left, a task submitted to it starts at once if there is room:
// it does not wait in the lane for a finish of the group's (which, if the
// running tasks waited for it, would never come).
func TestLaneClosesWithItsBacklog(t *testing.T) {
	started := func(t *testing.T, ex *executor.Executor) {
		t.Helper()
		g := newGate()
		defer g.open()
		pushed := executor.LanePushes()
		submit(t, ex, executor.Task[string]{Group: "g", ID: "x", Fn: g.fn("x")})
		if executor.LanePushes() != pushed {
			t.Error("the task joined a lane although its group's queue was empty")
		}
		g.waitStarted(t, 1) // a hang guard: it starts at once, or never
	}
	unlimited := []policy.Option{
		policy.WithDefaultMaxInFlight(policy.Unlimited),
		policy.WithDefaultMaxConcurrency(policy.Unlimited),
	}
	t.Run("dispatched after a global limit change", func(t *testing.T) {
		ex := newExec(t, append([]policy.Option{policy.WithGlobalMaxInFlight(1)}, unlimited...))
		g := newGate()
		defer g.open()
		pushed := executor.LanePushes()
		for i := range 70 { // one runs, 64 wait for global room, 5 join the lane
			submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn(fmt.Sprint(i))})
		}
		if n := executor.LanePushes() - pushed; n != 5 {
			t.Fatalf("%d tasks joined the lane, want 5", n)
		}
		if err := ex.SetGlobalMaxInFlight(policy.Unlimited); err != nil {
			t.Fatal(err)
		}
		g.waitStarted(t, 70) // the dispatcher started the backlog, the lane's too
		started(t, ex)
	})
	t.Run("dispatched as another group finishes", func(t *testing.T) {
		ex := newExec(t, append([]policy.Option{policy.WithGlobalMaxInFlight(100)}, unlimited...))
		other, g := newGate(), newGate()
		defer g.open()
		for i := range 100 {
			submit(t, ex, executor.Task[string]{Group: "other", Fn: other.fn(fmt.Sprint(i))})
		}
		other.waitStarted(t, 100)
		pushed := executor.LanePushes()
		for i := range 70 { // all wait for global room; 6 join the lane
			submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn(fmt.Sprint(i))})
		}
		if n := executor.LanePushes() - pushed; n != 6 {
			t.Fatalf("%d tasks joined the lane, want 6", n)
		}
		other.open()
		g.waitStarted(t, 70)
		started(t, ex)
	})
	t.Run("cancelled while a task runs", func(t *testing.T) {
		ex := laneExec(t)
		release, hold := holdGroup(t, ex, "g")
		var o runOrder
		for _, h := range backlog(t, ex, "g", &o, 100) {
			h.Cancel()
		}
		pushed := executor.LanePushes()
		x := submit(t, ex, executor.Task[string]{Group: "g", Fn: o.fn("x")})
		if executor.LanePushes() != pushed {
			t.Error("the task joined a lane although its group's queue was empty")
		}
		release()
		wait(t, hold)
		if r := wait(t, x); r.Status != executor.Success {
			t.Fatalf("x: %v", r.Status)
		}
	})
}

// TestLaneClose: Close completes the lane's tasks Cancelled, and none runs.
func TestLaneClose(t *testing.T) {
	ex := laneExec(t)
	release, _ := holdGroup(t, ex, "g")
	defer release()
	var o runOrder
	hs := backlog(t, ex, "g", &o, 100)
	closed := make(chan error, 1)
	go func() { closed <- ex.Close() }()
	for _, h := range hs {
		if r := wait(t, h); r.Status != executor.Cancelled {
			t.Fatalf("task %s after Close: %v, want Cancelled", h.ID(), r.Status)
		}
	}
	release()
	if err := recv(t, closed, "Close returned once the holder ended"); err != nil {
		t.Fatal(err)
	}
	if got := o.names(); len(got) != 0 {
		t.Errorf("tasks ran after Close: %v", got)
	}
	if _, err := executor.Submit(ex, bg, executor.Task[string]{Group: "g", Fn: o.fn("late")}); !errors.Is(err, executor.ErrShutdown) {
		t.Errorf("Submit after Close: %v, want ErrShutdown", err)
	}
}

// TestLaneShutdown: Shutdown runs the lane's tasks, and no task joins the
// lane once it has begun.
func TestLaneShutdown(t *testing.T) {
	ex := laneExec(t)
	release, hold := holdGroup(t, ex, "g")
	var o runOrder
	var hs []*executor.Handle[string]
	for i := range 100 {
		hs = append(hs, submit(t, ex, executor.Task[string]{Group: "g", Fn: o.fn(fmt.Sprint(i))}))
	}
	done := make(chan error, 1)
	go func() { done <- ex.Shutdown(bg) }()
	// Submit until refused: the ones accepted before Shutdown began run too.
	i := 100
	await(t, "Shutdown refused new tasks", func() bool {
		h, err := executor.Submit(ex, bg, executor.Task[string]{Group: "g", Fn: o.fn(fmt.Sprint(i))})
		if errors.Is(err, executor.ErrShutdown) {
			return true
		}
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
		i++
		return false
	})
	release()
	if err := recv(t, done, "Shutdown returned once the lane's tasks ran"); err != nil {
		t.Fatal(err)
	}
	wait(t, hold)
	for i, h := range hs {
		if r := wait(t, h); r.Status != executor.Success {
			t.Fatalf("task %d: %v", i, r.Status)
		}
	}
	o.expect(t, numbered(len(hs)))
}

// TestLaneShutdownGroup: ShutdownGroup runs the lane's tasks, and refuses
// later ones.
func TestLaneShutdownGroup(t *testing.T) {
	ex := laneExec(t)
	release, hold := holdGroup(t, ex, "g")
	var o runOrder
	hs := backlog(t, ex, "g", &o, 100)
	done := make(chan error, 1)
	go func() { done <- ex.ShutdownGroup(bg, "g") }()
	await(t, "ShutdownGroup marked the group shut down", func() bool { return groupStats(t, ex, "g").Shutdown })
	if _, err := executor.Submit(ex, bg, executor.Task[string]{Group: "g", Fn: o.fn("late")}); !errors.Is(err, executor.ErrGroupShutdown) {
		t.Errorf("Submit after ShutdownGroup: %v, want ErrGroupShutdown", err)
	}
	release()
	if err := recv(t, done, "ShutdownGroup returned once the lane's tasks ran"); err != nil {
		t.Fatal(err)
	}
	wait(t, hold)
	for _, h := range hs {
		if r := wait(t, h); r.Status != executor.Success {
			t.Fatalf("task %s: %v", h.ID(), r.Status)
		}
	}
	if got := len(o.names()); got != 100 {
		t.Errorf("%d tasks ran, want 100", got)
	}
}

// TestLaneClosesWhenLimitsChange: a group given a queue threshold moves
// its lane's tasks into its queue, and the threshold then holds for new
// tasks.
func TestLaneClosesWhenLimitsChange(t *testing.T) {
	ex := laneExec(t)
	release, hold := holdGroup(t, ex, "g")
	var o runOrder
	hs := backlog(t, ex, "g", &o, 100)
	l := policy.GroupLimits{MaxInFlight: policy.Unlimited, MaxConcurrency: 1, QueueThreshold: 100, Share: 1}
	if err := ex.SetGroupLimits("g", l); err != nil {
		t.Fatal(err)
	}
	pushed := executor.LanePushes()
	if _, err := executor.Submit(ex, bg, executor.Task[string]{Group: "g", Fn: o.fn("over")}); !errors.Is(err, executor.ErrRejected) {
		t.Errorf("Submit over the new queue threshold: %v, want a refusal", err)
	}
	if executor.LanePushes() != pushed {
		t.Error("a task joined the lane of a group with a queue threshold")
	}
	release()
	wait(t, hold)
	for _, h := range hs {
		wait(t, h)
	}
	if got := len(o.names()); got != 100 {
		t.Errorf("%d tasks ran, want 100", got)
	}
}

// TestLaneOnlyWhereNothingElseDecides: no task joins a lane where
// something may refuse it or remove it from the queue, nor a task that
// weighs more than one permit or whose context can be cancelled.
func TestLaneOnlyWhereNothingElseDecides(t *testing.T) {
	limits := []policy.Option{
		policy.WithGlobalMaxInFlight(4),
		policy.WithDefaultMaxConcurrency(2),
		policy.WithDefaultMaxInFlight(policy.Unlimited),
	}
	cases := []struct {
		name   string
		popts  []policy.Option
		eopts  []executor.Option
		weight int
		ctx    func() context.Context
	}{
		{name: "in-flight limit", popts: []policy.Option{policy.WithDefaultMaxInFlight(1000)}},
		{name: "queue threshold", popts: []policy.Option{policy.WithDefaultQueueThreshold(1000)}},
		{name: "global queue threshold", popts: []policy.Option{policy.WithGlobalQueueThreshold(1000)}},
		{name: "queue timeout", popts: []policy.Option{policy.WithQueueTimeout(time.Hour)}},
		{name: "listener", eopts: []executor.Option{executor.WithListener(executor.ListenerFuncs{})}},
		{name: "weight 2", weight: 2},
		{name: "context with Done", ctx: func() context.Context {
			ctx, cancel := context.WithCancel(bg)
			t.Cleanup(cancel)
			return ctx
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ex := newExec(t, append(slices.Clone(limits), c.popts...), c.eopts...)
			g := newGate()
			var hs []*executor.Handle[string]
			for i := range 2 { // the group's concurrency, held
				hs = append(hs, submit(t, ex, executor.Task[string]{Group: "g", Weight: 1, Fn: g.fn(fmt.Sprint("hold", i))}))
			}
			g.waitStarted(t, 2)
			ctx := bg
			if c.ctx != nil {
				ctx = c.ctx()
			}
			pushed := executor.LanePushes()
			var o runOrder
			for i := range 200 {
				h, err := executor.Submit(ex, ctx, executor.Task[string]{Group: "g", Weight: c.weight, Fn: o.fn(fmt.Sprint(i))})
				if err != nil {
					t.Fatal(err)
				}
				hs = append(hs, h)
			}
			if n := executor.LanePushes() - pushed; n != 0 {
				t.Errorf("%d tasks joined a lane", n)
			}
			g.open()
			for _, h := range hs {
				wait(t, h)
			}
			if got := len(o.names()); got != 200 {
				t.Errorf("%d tasks ran, want 200", got)
			}
		})
	}
}

// TestLaneStress submits batches from many goroutines into a few groups
// whose lanes open and close, at GOMAXPROCS 1, 2 and 8, while tasks are
// cancelled, Go and Do calls join the same groups, and background loops
// change limits (a queue threshold closes a lane) and evict groups. It
// checks, inside the tasks, the limits and that no task runs twice; at the
// end, that every task ran exactly once unless cancelled, in each
// submitter's order within a group; and the books throughout.
func TestLaneStress(t *testing.T) {
	atProcs(t, testLaneStress)
}

func testLaneStress(t *testing.T) {
	const (
		submitters = 8
		perTask    = 1500
		groups     = 3
		maxGlobal  = 4
		maxConc    = 1 // so that the run order is the start order, checked
	)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	ex := newExec(t, []policy.Option{
		policy.WithGlobalMaxInFlight(maxGlobal),
		policy.WithDefaultMaxConcurrency(maxConc),
		policy.WithDefaultMaxInFlight(policy.Unlimited),
	}, executor.WithMaxIdleGroups(1))
	var (
		globalRunning atomic.Int64
		groupRunning  [groups]atomic.Int64
		broken        violations
	)
	violate := broken.add
	chaos := newBackground()
	rnd := sharedRand(seed)
	chaos.checkInvariants(ex, violate)
	chaos.loop(sometimes(rnd, 500, func() { ex.EvictGroup(fmt.Sprint("g", rnd(groups))) }))
	chaos.loop(sometimes(rnd, 2000, func() {
		// A queue threshold closes the group's lane; Unlimited lets it
		// open again. The concurrency limit stays maxConc.
		l := policy.GroupLimits{MaxInFlight: policy.Unlimited, MaxConcurrency: maxConc, QueueThreshold: policy.Unlimited, Share: 1}
		if rnd(4) == 0 {
			l.QueueThreshold = 1_000_000
		}
		if err := ex.SetGroupLimits(fmt.Sprint("g", rnd(groups)), l); err != nil && !errors.Is(err, executor.ErrShutdown) {
			violate("SetGroupLimits: " + err.Error())
		}
	}))
	pushed := executor.LanePushes()
	// Each group's one running place is held until the submitters have
	// made their first tasks, so that every group has a backlog and its
	// lane opens.
	phase := make(chan struct{})
	var submitted atomic.Int64
	var blockers []*executor.Handle[int]
	for gi := range groups {
		blockers = append(blockers, submit(t, ex, executor.Task[int]{Group: fmt.Sprint("g", gi), Fn: func(context.Context) (int, error) {
			<-phase
			return 0, nil
		}}))
	}

	type task struct {
		h         *executor.Handle[int]
		runs      *atomic.Int32
		group, at int // at: the submitter's sequence number in its group
		cancelled bool
	}
	// ran[s][g] lists, in run order, the sequence numbers of submitter s's
	// tasks in group g.
	var ranMu sync.Mutex
	ran := make([][groups][]int, submitters)
	tasks := make([][]task, submitters)
	var wg sync.WaitGroup
	for s := range submitters {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seed, uint64(s)+2))
			var seq [groups]int
			for range perTask {
				gi := r.IntN(groups)
				grp := fmt.Sprint("g", gi)
				tk := task{runs: new(atomic.Int32), group: gi, at: seq[gi]}
				seq[gi]++
				running := stressRunning{&globalRunning, &groupRunning[gi], maxGlobal, maxConc, grp}
				// Tasks that yield a few times, so that backlogs build up
				// and lanes open.
				body := stressBody(tk.runs, 1, running, violate, stressHolds, func() {
					for range 4 {
						runtime.Gosched()
					}
				}, tk.at)
				fn := func(ctx context.Context) (int, error) {
					v, err := body(ctx)
					ranMu.Lock()
					ran[s][gi] = append(ran[s][gi], tk.at)
					ranMu.Unlock()
					return v, err
				}
				switch r.IntN(20) {
				case 0: // Go joins the same queue
					if err := ex.Go(bg, grp, func(ctx context.Context) error { _, err := fn(ctx); return err }); err != nil {
						violate("Go: " + err.Error())
					}
				case 1: // so does Do, from a goroutine of its own, so at a later place
					wg.Go(func() {
						if err := ex.Do(bg, grp, func(ctx context.Context) error { _, err := body(ctx); return err }); err != nil {
							violate("Do: " + err.Error())
						}
					})
				default:
					h, err := executor.Submit(ex, bg, executor.Task[int]{Group: grp, Fn: fn})
					if err != nil {
						violate("Submit: " + err.Error())
						continue
					}
					tk.h = h
					if r.IntN(10) == 0 && len(tasks[s]) > 0 {
						// Cancel an earlier task: it may wait in the lane,
						// in the queue, or run already.
						prev := &tasks[s][r.IntN(len(tasks[s]))]
						if prev.h != nil && prev.h.Cancel() {
							prev.cancelled = true
						}
					}
				}
				tasks[s] = append(tasks[s], tk)
				if submitted.Add(1) == submitters*perTask/4 {
					close(phase)
				}
				if r.IntN(8) == 0 {
					runtime.Gosched()
				}
			}
		})
	}
	wg.Wait()
	drain(t, ex)
	chaos.halt()
	broken.check(t)

	n := executor.LanePushes() - pushed
	t.Logf("%d tasks joined a lane", n)
	if n == 0 {
		t.Error("no task joined a lane: the test did not exercise them")
	}
	for _, h := range blockers {
		if r, _ := h.Result(); r.Status != executor.Success {
			t.Errorf("a group's first task: %v", r.Status)
		}
	}
	for s, ts := range tasks {
		for _, tk := range ts {
			runs := tk.runs.Load()
			if tk.h == nil { // Go or Do: ran once, or the check above failed
				if runs != 1 {
					t.Errorf("a Go or Do task ran %d times", runs)
				}
				continue
			}
			r, ok := tk.h.Result()
			if !ok {
				t.Fatal("a handle is not complete after the executor drained")
			}
			checkRuns(t, fmt.Sprint(s, "/", tk.at), r, runs)
			if r.Status == executor.Cancelled && !tk.cancelled {
				t.Errorf("task %d/%d cancelled, but Cancel did not report it", s, tk.at)
			}
		}
		// FIFO: a submitter's Submit and Go tasks of one group run in its
		// order, one at a time.
		for gi := range groups {
			seq := ran[s][gi]
			for i := 1; i < len(seq); i++ {
				if seq[i] < seq[i-1] {
					t.Errorf("submitter %d, group g%d: task %d ran after %d", s, gi, seq[i], seq[i-1])
					break
				}
			}
		}
	}
}

// TestLaneDrainKeepsTurnOrder: two groups of equal share, each with a
// backlog of 64 queued tasks and 6 more in its lane, wait for global room,
// which frees one permit at a time: deficit round robin alternates them.
// When the dispatcher starts the last task of a group's queue, the lane's
// tasks become its queue: its backlog goes on, and so does its turn order
// (were it counted as a new backlog, the group, still at the front of the
// ready list, would begin a new turn at once and start twice in a row).
func TestLaneDrainKeepsTurnOrder(t *testing.T) {
	const (
		global = 200
		perGrp = 70 // 64 queued, 6 in the lane
	)
	ex := newExec(t, []policy.Option{
		policy.WithGlobalMaxInFlight(global),
		policy.WithDefaultMaxConcurrency(policy.Unlimited),
		policy.WithDefaultMaxInFlight(policy.Unlimited),
	})
	hold := newGate()
	var holders []*gate
	defer func() {
		for _, g := range holders {
			g.open()
		}
		hold.open()
	}()
	for i := range global {
		g := newGate()
		holders = append(holders, g)
		submit(t, ex, executor.Task[string]{Group: "h", Fn: g.fn(fmt.Sprint("h", i))})
	}
	for _, g := range holders {
		g.waitStarted(t, 1)
	}
	pushed := executor.LanePushes()
	for range perGrp {
		submit(t, ex, executor.Task[string]{Group: "A", Fn: hold.fn("A")})
		submit(t, ex, executor.Task[string]{Group: "B", Fn: hold.fn("B")})
	}
	if sa, sb := groupStats(t, ex, "A"), groupStats(t, ex, "B"); sa.Waiting != perGrp || sb.Waiting != perGrp {
		t.Fatalf("waiting: A %d, B %d; want %d each", sa.Waiting, sb.Waiting, perGrp)
	}
	if n := executor.LanePushes() - pushed; n != 2*(perGrp-64) {
		t.Fatalf("%d tasks joined a lane, want %d", n, 2*(perGrp-64))
	}
	var order []string
	for i := range 2 * perGrp {
		holders[i].open()
		order = append(order, hold.waitStarted(t, 1)...)
	}
	for i := 1; i < len(order); i++ {
		if order[i] == order[i-1] {
			t.Errorf("starts %d and %d are both group %s's (share 1 each, both waiting): %v", i-1, i, order[i], order[max(0, i-4):min(len(order), i+4)])
		}
	}
}

// TestLaneChurnStress: lanes open and close while the global limit and
// the groups' concurrency limits change (the groups' in-flight limit and
// queue threshold unlimited most of the time, so that lanes reopen),
// groups are evicted, light Go tasks panic and tasks are cancelled. g0
// keeps concurrency 1, for a FIFO check. At the end every handle has
// completed, every task ran at most once (once unless cancelled), the
// counts add up and nothing waits.
func TestLaneChurnStress(t *testing.T) {
	atProcs(t, testLaneChurnStress)
}

func testLaneChurnStress(t *testing.T) {
	const (
		submitters = 6
		perSub     = 1500
		groups     = 4
		global     = 6
		conc       = 3
	)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	ex := newExec(t, []policy.Option{
		policy.WithGlobalMaxInFlight(global),
		policy.WithDefaultMaxConcurrency(conc),
		policy.WithDefaultMaxInFlight(policy.Unlimited),
	}, executor.WithMaxIdleGroups(1))
	use := newCeilings(ex, global, conc, groups)
	g0 := limits(policy.Unlimited, 1, policy.Unlimited, 1)
	if err := use.setGroup(0, &g0); err != nil {
		t.Fatal(err)
	}
	var broken violations
	violate := broken.add
	chaos := newBackground()
	rnd := sharedRand(seed)
	chaos.checkInvariants(ex, violate)
	chaos.loop(sometimes(rnd, 300, func() {
		if err := use.setGlobal(2 + rnd(global)); err != nil && !errors.Is(err, executor.ErrShutdown) {
			violate(err.Error())
		}
	}))
	chaos.loop(sometimes(rnd, 300, func() {
		gi := 1 + rnd(groups-1)
		l := limits(policy.Unlimited, 2+rnd(conc), policy.Unlimited, 1+rnd(3))
		if rnd(6) == 0 {
			l.QueueThreshold = 100000
		}
		if err := use.setGroup(gi, &l); err != nil && !errors.Is(err, executor.ErrShutdown) {
			violate(err.Error())
		}
	}))
	chaos.loop(sometimes(rnd, 500, func() { use.evict(rnd(groups)) }))
	chaos.loop(sometimes(rnd, 200, func() {
		s := ex.Stats()
		if s.Waiting < 0 || s.Running < 0 {
			violate(fmt.Sprintf("stats %+v", s))
		}
	}))

	var (
		ran, panicked atomic.Int64
		fifoLast      [submitters]atomic.Int64
	)
	type task struct {
		h    *executor.Handle[int]
		runs *atomic.Int32
	}
	tasks := make([][]task, submitters)
	var goRuns [submitters][]*atomic.Int32
	var wg sync.WaitGroup
	pushed := executor.LanePushes()
	for s := range submitters {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seed, uint64(s)+7))
			for i := range perSub {
				gi := r.IntN(groups)
				if r.IntN(3) == 0 {
					gi = 0
				}
				grp := fmt.Sprint("g", gi)
				runs := new(atomic.Int32)
				seq := int64(i + 1)
				weight := 1
				body := func(ctx context.Context) error {
					if runs.Add(1) > 1 {
						violate("a task ran twice")
					}
					ran.Add(1)
					if gi == 0 {
						if last := fifoLast[s].Load(); last >= seq {
							violate(fmt.Sprintf("g0 FIFO: submitter %d task %d after %d", s, seq, last))
						}
						fifoLast[s].Store(seq)
					}
					use.enter(gi, weight, violate)
					defer use.leave(gi, weight)
					for range i % 5 {
						runtime.Gosched()
					}
					return nil
				}
				switch k := r.IntN(20); {
				case k < 8:
					if err := ex.Go(bg, grp, body); err != nil {
						violate("Go: " + err.Error())
					}
					goRuns[s] = append(goRuns[s], runs)
				case k < 9: // a light task that panics
					if err := ex.Go(bg, grp, func(ctx context.Context) error {
						body(ctx)
						panicked.Add(1)
						panic("light panic")
					}); err != nil {
						violate("Go: " + err.Error())
					}
					goRuns[s] = append(goRuns[s], runs)
				case k < 17:
					h, err := executor.Submit(ex, bg, executor.Task[int]{Group: grp, Fn: func(ctx context.Context) (int, error) { return 0, body(ctx) }})
					if err != nil {
						violate("Submit: " + err.Error())
						continue
					}
					tasks[s] = append(tasks[s], task{h, runs})
					if r.IntN(12) == 0 && len(tasks[s]) > 0 {
						tasks[s][r.IntN(len(tasks[s]))].h.Cancel()
					}
				case k < 18:
					if gi != 0 {
						weight = 2
					}
					h, err := executor.Submit(ex, bg, executor.Task[int]{Group: grp, Weight: weight, Fn: func(ctx context.Context) (int, error) { return 0, body(ctx) }})
					if err != nil {
						violate("Submit w: " + err.Error())
						continue
					}
					tasks[s] = append(tasks[s], task{h, runs})
				default:
					ctx, cancel := context.WithCancel(bg)
					h, err := executor.Submit(ex, ctx, executor.Task[int]{Group: grp, Fn: func(ctx context.Context) (int, error) { return 0, body(ctx) }})
					if err != nil {
						violate("Submit ctx: " + err.Error())
						cancel()
						continue
					}
					tasks[s] = append(tasks[s], task{h, runs})
					if r.IntN(3) == 0 {
						cancel()
					} else {
						defer cancel()
					}
				}
				if r.IntN(16) == 0 {
					runtime.Gosched()
				}
			}
		})
	}
	wg.Wait()
	chaos.halt()
	if err := use.fitAll(1, groups); err != nil {
		t.Fatal(err)
	}
	// Without Shutdown first: every handle must complete on its own.
	deadline := time.Now().Add(30 * time.Second)
	for s := range tasks {
		for _, tk := range tasks[s] {
			select {
			case <-tk.h.Done():
			case <-time.After(time.Until(deadline)):
				gs, _ := ex.GroupStats(tk.h.Group())
				t.Fatalf("a handle of %s did not complete; group %+v; stats %+v; invariants %q", tk.h.Group(), gs, ex.Stats(), ex.CheckInvariants())
			}
		}
	}
	for time.Now().Before(deadline) {
		if s := ex.Stats(); s.Waiting == 0 && s.RunningTasks == 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	s := ex.Stats()
	if s.Waiting != 0 || s.RunningTasks != 0 || s.Running != 0 {
		t.Fatalf("not quiescent: %+v; invariants %q", s, ex.CheckInvariants())
	}
	broken.check(t)
	if got := s.Succeeded + s.Failed + s.Cancelled + s.Rejected; got != s.Submitted {
		t.Errorf("outcomes %d, submitted %d (%+v)", got, s.Submitted, s.TaskCounts)
	}
	if s.Started != s.Succeeded+s.Failed {
		t.Errorf("started %d, succeeded+failed %d (%+v)", s.Started, s.Succeeded+s.Failed, s.TaskCounts)
	}
	if uint64(ran.Load()) != s.Started {
		t.Errorf("ran %d, started %d", ran.Load(), s.Started)
	}
	if uint64(panicked.Load()) != s.Failed {
		t.Errorf("panicked %d, failed %d", panicked.Load(), s.Failed)
	}
	for s := range tasks {
		for _, tk := range tasks[s] {
			r, _ := tk.h.Result()
			checkRuns(t, "x", r, tk.runs.Load())
		}
		for _, runs := range goRuns[s] {
			if runs.Load() != 1 {
				t.Errorf("a Go task ran %d times", runs.Load())
			}
		}
	}
	t.Logf("%d lane pushes, ran %d; %+v", executor.LanePushes()-pushed, ran.Load(), s.TaskCounts)
	drain(t, ex)
}

// TestLaneShutdownGroupWhileAppending: submitters keep a group's lane open
// (Submit with context.Background, light Go) while ShutdownGroup runs;
// once it returns, the group holds nothing, every accepted task ran
// exactly once, and later ones are refused.
func TestLaneShutdownGroupWhileAppending(t *testing.T) {
	atProcs(t, func(t *testing.T) {
		for round := range 20 {
			ex := newExec(t, []policy.Option{
				policy.WithGlobalMaxInFlight(3),
				policy.WithDefaultMaxConcurrency(2),
				policy.WithDefaultMaxInFlight(policy.Unlimited),
			})
			var accepted, ran atomic.Int64
			var after atomic.Bool
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for s := range 4 {
				wg.Go(func() {
					for i := 0; i < 3000; i++ {
						select {
						case <-stop:
							return
						default:
						}
						fn := func(context.Context) error {
							ran.Add(1)
							runtime.Gosched()
							return nil
						}
						// Read before the call: a call that returns after
						// ShutdownGroup may have been admitted before it.
						late := after.Load()
						var err error
						if (i+s)%2 == 0 {
							err = ex.Go(bg, "s", fn)
						} else {
							_, err = executor.Submit(ex, bg, executor.Task[int]{Group: "s", Fn: func(ctx context.Context) (int, error) { return 0, fn(ctx) }})
						}
						if err == nil {
							accepted.Add(1)
							if late {
								t.Errorf("a task submitted after ShutdownGroup returned was accepted")
							}
						} else if !errors.Is(err, executor.ErrGroupShutdown) {
							t.Errorf("submit: %v", err)
						}
					}
				})
			}
			for gs, _ := ex.GroupStats("s"); gs.Waiting < 100 && accepted.Load() < 4*3000-200; gs, _ = ex.GroupStats("s") {
				runtime.Gosched()
			}
			time.Sleep(time.Duration(round%5) * 100 * time.Microsecond)
			if err := ex.ShutdownGroup(bg, "s"); err != nil {
				t.Fatal(err)
			}
			s := groupStats(t, ex, "s")
			after.Store(true)
			if s.Waiting != 0 || s.RunningTasks != 0 || s.InFlight != 0 {
				t.Errorf("after ShutdownGroup: %+v", s)
			}
			close(stop)
			wg.Wait()
			if a, r := accepted.Load(), ran.Load(); a != r {
				t.Errorf("accepted %d, ran %d", a, r)
			}
			if t.Failed() {
				return
			}
		}
	})
}
