package executor_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// The tests of this file hold the executor to what its doc comments say
// that callers can observe beside admission itself: the counts and gauges
// of Stats and GroupStats, the listener's events, idle reclamation and
// EvictGroup, ShutdownGroup, Shutdown and Close, and handles once
// complete.

// taskEvents is a Listener that records each task's events, by task ID, in
// order: kinds as "submitted", "started", "completed/<Status>" or
// "rejected", and the events themselves.
type taskEvents struct {
	mu     sync.Mutex
	kinds  map[string][]string
	events map[string][]executor.Event
}

func newTaskEvents() *taskEvents {
	return &taskEvents{kinds: map[string][]string{}, events: map[string][]executor.Event{}}
}

func (l *taskEvents) add(kind string, e executor.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if kind == "completed" {
		kind += "/" + e.Status.String()
	}
	l.kinds[e.ID] = append(l.kinds[e.ID], kind)
	l.events[e.ID] = append(l.events[e.ID], e)
}

func (l *taskEvents) OnSubmitted(e executor.Event) { l.add("submitted", e) }
func (l *taskEvents) OnStarted(e executor.Event)   { l.add("started", e) }
func (l *taskEvents) OnCompleted(e executor.Event) { l.add("completed", e) }
func (l *taskEvents) OnRejected(e executor.Event)  { l.add("rejected", e) }

// of returns the kinds of the events of the tasks with ID id.
func (l *taskEvents) of(id string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.kinds[id])
}

// eventsOf returns the events of the tasks with ID id.
func (l *taskEvents) eventsOf(id string) []executor.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events[id])
}

// wantEvents fails t unless the tasks with ID id saw the events want.
func (l *taskEvents) wantEvents(t *testing.T, id string, want ...string) {
	t.Helper()
	if got := l.of(id); !slices.Equal(got, want) {
		t.Errorf("task %q: events %v, want %v", id, got, want)
	}
}

// lastStarted reports the Started field of the last event of task id.
func (l *taskEvents) lastStarted(t *testing.T, id string) bool {
	t.Helper()
	evs := l.eventsOf(id)
	if len(evs) == 0 {
		t.Fatalf("task %q: no event", id)
	}
	return evs[len(evs)-1].Started
}

func succeed(context.Context) (int, error) { return 0, nil }

func nop(context.Context) error { return nil }

// TestInvalidInputIsRejectedNotSubmitted: invalid input, by any way in,
// counts as Rejected but not as Submitted (TaskCounts).
func TestInvalidInputIsRejectedNotSubmitted(t *testing.T) {
	ex := newExec(t, nil)
	var nilCtx context.Context
	calls := []error{
		ex.Go(bg, "", nop),
		ex.Go(bg, "g", nil),
		ex.Go(nilCtx, "g", nop),
		ex.Do(bg, "", nop),
		ex.Do(bg, "g", nil),
		ex.Do(nilCtx, "g", nop),
		ex.DoWeighted(bg, "g", -2, nop),
	}
	for i, err := range calls {
		if !errors.Is(err, executor.ErrInvalidTask) || !errors.Is(err, executor.ErrRejected) {
			t.Errorf("call %d: %v, want ErrInvalidTask", i, err)
		}
	}
	if s := ex.Stats(); s.Submitted != 0 || s.Rejected != uint64(len(calls)) || s.Groups != 0 {
		t.Errorf("stats %+v, want %d rejected, none submitted, no group", s, len(calls))
	}
}

// TestEndedContextAtSubmissionIsSubmittedAndCancelled: a task submitted
// with a context already done, by any way in, counts as Submitted and
// Cancelled, never Started, and its listener sees OnSubmitted then
// OnCompleted alone, with Started false.
func TestEndedContextAtSubmissionIsSubmittedAndCancelled(t *testing.T) {
	rec := newTaskEvents()
	ex := newExec(t, nil, executor.WithListener(rec))
	ctx, cancel := context.WithCancel(bg)
	cancel()
	ran := false
	h, err := executor.Submit(ex, ctx, executor.Task[int]{Group: "g", ID: "s", Fn: func(context.Context) (int, error) { ran = true; return 0, nil }})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Submit: %v, want context.Canceled", err)
	}
	if r := wait(t, h); r.Status != executor.Cancelled || !errors.Is(r.Err, context.Canceled) {
		t.Errorf("result %+v", r)
	}
	if err := ex.Go(ctx, "g", func(context.Context) error { ran = true; return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("Go: %v", err)
	}
	if err := ex.Do(ctx, "g", func(context.Context) error { ran = true; return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("Do: %v", err)
	}
	if ran {
		t.Error("a task submitted with its context done ran")
	}
	if s := ex.Stats(); s.Submitted != 3 || s.Cancelled != 3 || s.Started != 0 || s.Running != 0 || s.Waiting != 0 {
		t.Errorf("counts %+v, want 3 submitted and cancelled", s)
	}
	rec.wantEvents(t, "s", "submitted", "completed/Cancelled")
	rec.wantEvents(t, "", "submitted", "completed/Cancelled", "submitted", "completed/Cancelled") // Go and Do
	for _, id := range []string{"s", ""} {
		if rec.lastStarted(t, id) {
			t.Errorf("task %q: OnCompleted with Started set", id)
		}
	}
}

// TestGroupStatsGaugesCountPermits: a group's gauges count permits (a
// task's weight), RunningTasks counts tasks, InFlight is waiting plus
// running, ServedPermits sums the weights of the tasks started, and every
// gauge is back to zero once the tasks are done.
func TestGroupStatsGaugesCountPermits(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(3), policy.WithGlobalMaxInFlight(10)})
	g := newGate()
	defer g.open()
	a := submit(t, ex, executor.Task[string]{Group: "g", ID: "a", Weight: 2, Fn: g.fn("a")})
	g.waitStarted(t, 1)
	b := submit(t, ex, executor.Task[string]{Group: "g", ID: "b", Weight: 2, Fn: g.fn("b")}) // 2+2 > 3: waits
	c := submit(t, ex, executor.Task[string]{Group: "g", ID: "c", Fn: g.fn("c")})            // behind b
	gs := groupStats(t, ex, "g")
	if gs.Running != 2 || gs.RunningTasks != 1 || gs.Waiting != 2 || gs.InFlight != 5 || gs.ServedPermits != 2 || gs.Started != 1 || gs.Submitted != 3 {
		t.Errorf("group stats %+v", gs)
	}
	if s := ex.Stats(); s.Running != 2 || s.RunningTasks != 1 || s.Waiting != 2 || s.Groups != 1 || s.IdleGroups != 0 || s.ServedPermits != 2 {
		t.Errorf("stats %+v", s)
	}
	g.open()
	for _, h := range []*executor.Handle[string]{a, b, c} {
		wait(t, h)
	}
	gs = groupStats(t, ex, "g")
	if gs.Running != 0 || gs.RunningTasks != 0 || gs.Waiting != 0 || gs.InFlight != 0 || gs.ServedPermits != 5 || gs.Started != 3 || gs.Succeeded != 3 {
		t.Errorf("group stats once done %+v", gs)
	}
	if s := ex.Stats(); s.Running != 0 || s.RunningTasks != 0 || s.Waiting != 0 || s.Groups != 1 || s.IdleGroups != 1 || s.ServedPermits != 5 {
		t.Errorf("stats once done %+v", s)
	}
}

// TestDroppedGroupsKeepTheirCounts: the counts of groups reclaimed while
// idle and of evicted ones stay in Stats, exactly, while GroupStats no
// longer knows the groups.
func TestDroppedGroupsKeepTheirCounts(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(2)}, executor.WithMaxIdleGroups(1))
	boom := errors.New("boom")
	for _, grp := range []string{"a", "b", "c"} {
		wait(t, submit(t, ex, executor.Task[int]{Group: grp, Weight: 2, Fn: succeed}))
		wait(t, submit(t, ex, executor.Task[int]{Group: grp, Fn: func(context.Context) (int, error) { return 0, boom }}))
	}
	s := ex.Stats()
	if s.Submitted != 6 || s.Started != 6 || s.Succeeded != 3 || s.Failed != 3 || s.ServedPermits != 9 || s.Groups != 1 {
		t.Errorf("stats with a and b reclaimed: %+v", s)
	}
	for _, grp := range []string{"a", "b"} {
		if _, ok := ex.GroupStats(grp); ok {
			t.Errorf("group %s kept past WithMaxIdleGroups(1)", grp)
		}
	}
	if !ex.EvictGroup("c") {
		t.Fatal("EvictGroup of an idle group did not drop it at once")
	}
	if _, ok := ex.GroupStats("c"); ok {
		t.Error("GroupStats knows an evicted group")
	}
	after := ex.Stats()
	if after.TaskCounts != s.TaskCounts || after.ServedPermits != s.ServedPermits || after.Groups != 0 || after.IdleGroups != 0 {
		t.Errorf("stats after the eviction %+v, want the counts of %+v and no group", after, s)
	}
}

// TestEvictedBusyGroupAdmitsUntilIdle: a busy group evicted keeps
// admitting and running its tasks, each told to the listener once and
// counted once, under limits that SetGroupLimits may still change; it is
// dropped once idle, and comes back with the limits SetGroupLimits gave.
func TestEvictedBusyGroupAdmitsUntilIdle(t *testing.T) {
	rec := newTaskEvents()
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1), policy.WithDefaultMaxInFlight(3)}, executor.WithListener(rec))
	g := newGate()
	defer g.open()
	a := submit(t, ex, executor.Task[string]{Group: "g", ID: "a", Fn: g.fn("a")})
	g.waitStarted(t, 1)
	b := submit(t, ex, executor.Task[string]{Group: "g", ID: "b", Fn: g.fn("b")})
	if ex.EvictGroup("g") {
		t.Fatal("EvictGroup dropped a busy group at once")
	}
	set := policy.GroupLimits{MaxInFlight: 5, MaxConcurrency: 1, QueueThreshold: policy.Unlimited, Share: 1}
	if err := ex.SetGroupLimits("g", set); err != nil {
		t.Fatal(err)
	}
	c := submit(t, ex, executor.Task[string]{Group: "g", ID: "c", Fn: g.fn("c")})
	if gs := groupStats(t, ex, "g"); gs.MaxInFlight != 5 || gs.Waiting != 2 || gs.InFlight != 3 || gs.Submitted != 3 {
		t.Errorf("evicted busy group: %+v", gs)
	}
	g.open()
	for _, h := range []*executor.Handle[string]{a, b, c} {
		if r := wait(t, h); r.Status != executor.Success {
			t.Errorf("result %+v", r)
		}
	}
	await(t, "the evicted group dropped once idle", func() bool { _, ok := ex.GroupStats("g"); return !ok })
	if s := ex.Stats(); s.Submitted != 3 || s.Started != 3 || s.Succeeded != 3 || s.Groups != 0 {
		t.Errorf("stats %+v", s)
	}
	d := submit(t, ex, executor.Task[string]{Group: "g", ID: "d", Fn: g.fn("d")})
	if gs := groupStats(t, ex, "g"); gs.MaxInFlight != set.MaxInFlight || gs.MaxConcurrency != set.MaxConcurrency || gs.Submitted != 1 {
		t.Errorf("group back after its eviction: %+v, want the limits %+v and fresh counts", gs, set)
	}
	wait(t, d)
	for _, id := range []string{"a", "b", "c", "d"} {
		rec.wantEvents(t, id, "submitted", "started", "completed/Success")
	}
}

// TestEvictGroupWithWaitingTasks: the waiting tasks of an evicted group
// still run in order, or complete Cancelled if cancelled meanwhile, and the
// group is dropped with every task counted once.
func TestEvictGroupWithWaitingTasks(t *testing.T) {
	rec := newTaskEvents()
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)}, executor.WithListener(rec))
	g := newGate()
	defer g.open()
	var hs []*executor.Handle[string]
	for _, id := range []string{"a", "b", "c"} {
		hs = append(hs, submit(t, ex, executor.Task[string]{Group: "g", ID: id, Fn: g.fn(id)}))
	}
	g.waitStarted(t, 1)
	if ex.EvictGroup("g") {
		t.Fatal("EvictGroup dropped a busy group at once")
	}
	if !hs[1].Cancel() {
		t.Fatal("Cancel of a waiting task reported false")
	}
	g.open()
	if got := g.waitStarted(t, 1); got[0] != "c" {
		t.Errorf("started %v, want c", got)
	}
	for _, h := range hs {
		wait(t, h)
	}
	await(t, "the evicted group dropped once idle", func() bool { _, ok := ex.GroupStats("g"); return !ok })
	if s := ex.Stats(); s.Submitted != 3 || s.Started != 2 || s.Succeeded != 2 || s.Cancelled != 1 || s.Groups != 0 {
		t.Errorf("stats %+v", s)
	}
	rec.wantEvents(t, "b", "submitted", "completed/Cancelled")
	if rec.lastStarted(t, "b") {
		t.Error("a task cancelled while waiting completed with Started set")
	}
}

// TestResetGroupLimitsDuringEviction: ResetGroupLimits while a busy
// group's eviction is pending drops the limits SetGroupLimits gave: the
// group comes back under the policy's.
func TestResetGroupLimitsDuringEviction(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)})
	if err := ex.SetGroupLimits("g", policy.GroupLimits{MaxInFlight: 3, MaxConcurrency: 2, QueueThreshold: 5, Share: 1}); err != nil {
		t.Fatal(err)
	}
	g := newGate()
	defer g.open()
	a := submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("a")})
	g.waitStarted(t, 1)
	ex.EvictGroup("g")
	if err := ex.ResetGroupLimits("g"); err != nil {
		t.Fatal(err)
	}
	g.open()
	wait(t, a)
	await(t, "the evicted group dropped once idle", func() bool { _, ok := ex.GroupStats("g"); return !ok })
	h := submit(t, ex, executor.Task[int]{Group: "g", Fn: succeed})
	gs := groupStats(t, ex, "g")
	wait(t, h)
	if gs.MaxConcurrency != 1 || gs.MaxInFlight != policy.DefaultMaxInFlight || gs.QueueThreshold != policy.Unlimited {
		t.Errorf("limits after a reset and the eviction: %+v, want the policy's", gs)
	}
}

// TestEvictGroupLiftsShutdownGroup: a group shut down refuses every task,
// counting each as submitted and rejected, until evicted; it then comes back
// open, with fresh counts and the limits SetGroupLimits gave, and the
// executor's totals keep the counts of before.
func TestEvictGroupLiftsShutdownGroup(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(2)})
	set := policy.GroupLimits{MaxInFlight: 9, MaxConcurrency: 3, QueueThreshold: 4, Share: 2}
	if err := ex.SetGroupLimits("g", set); err != nil {
		t.Fatal(err)
	}
	wait(t, submit(t, ex, executor.Task[int]{Group: "g", Fn: succeed}))
	if err := ex.ShutdownGroup(bg, "g"); err != nil {
		t.Fatal(err)
	}
	if _, err := executor.Submit(ex, bg, executor.Task[int]{Group: "g", Fn: succeed}); !errors.Is(err, executor.ErrGroupShutdown) || !errors.Is(err, executor.ErrRejected) {
		t.Fatalf("Submit to a group shut down: %v", err)
	}
	if gs := groupStats(t, ex, "g"); !gs.Shutdown || gs.Submitted != 2 || gs.Succeeded != 1 || gs.Rejected != 1 {
		t.Errorf("group shut down: %+v", gs)
	}
	before := ex.Stats()
	if !ex.EvictGroup("g") {
		t.Fatal("EvictGroup of an idle group shut down did not drop it at once")
	}
	wait(t, submit(t, ex, executor.Task[int]{Group: "g", Fn: succeed}))
	gs := groupStats(t, ex, "g")
	if gs.Shutdown || gs.Submitted != 1 || gs.Succeeded != 1 || gs.Rejected != 0 {
		t.Errorf("group after its eviction: %+v", gs)
	}
	if l := (policy.GroupLimits{MaxInFlight: gs.MaxInFlight, MaxConcurrency: gs.MaxConcurrency, QueueThreshold: gs.QueueThreshold, Share: gs.Share}); l != set {
		t.Errorf("limits after the eviction %+v, want %+v", l, set)
	}
	after := ex.Stats()
	if after.Submitted != before.Submitted+1 || after.Succeeded != before.Succeeded+1 || after.Rejected != before.Rejected {
		t.Errorf("counts %+v, want those of %+v and one more success", after.TaskCounts, before.TaskCounts)
	}
}

// TestShutdownGroupOfUnknownGroupRefusesEveryWayIn: the marker that
// ShutdownGroup leaves for a group never used refuses Submit, Go and Do,
// counting them, is kept as a group, and goes with EvictGroup.
func TestShutdownGroupOfUnknownGroupRefusesEveryWayIn(t *testing.T) {
	ex := newExec(t, nil)
	if err := ex.ShutdownGroup(bg, "m"); err != nil {
		t.Fatal(err)
	}
	if gs := groupStats(t, ex, "m"); !gs.Shutdown {
		t.Errorf("marker %+v, want Shutdown", gs)
	}
	_, err := executor.Submit(ex, bg, executor.Task[int]{Group: "m", Fn: succeed})
	for i, err := range []error{err, ex.Go(bg, "m", nop), ex.Do(bg, "m", nop)} {
		if !errors.Is(err, executor.ErrGroupShutdown) || !errors.Is(err, executor.ErrRejected) {
			t.Errorf("call %d: %v, want ErrGroupShutdown", i, err)
		}
	}
	if s := ex.Stats(); s.Submitted != 3 || s.Rejected != 3 || s.Groups != 1 || s.IdleGroups != 1 {
		t.Errorf("stats %+v", s)
	}
	if !ex.EvictGroup("m") {
		t.Fatal("EvictGroup did not drop the marker at once")
	}
	if err := ex.Do(bg, "m", nop); err != nil {
		t.Errorf("Do after the eviction: %v", err)
	}
}

// TestShutdownGroupDeadlineEvents: once ShutdownGroup's context ends, its
// waiting task completes Cancelled without a start (OnCompleted, Started
// false), its running task's context ends with a cause matching
// ErrGroupShutdown and its Fn's outcome is told after OnStarted, and the
// group's counts and gauges say so.
func TestShutdownGroupDeadlineEvents(t *testing.T) {
	rec := newTaskEvents()
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)}, executor.WithListener(rec))
	started := make(chan struct{})
	causes := make(chan error, 1)
	running := submit(t, ex, executor.Task[int]{Group: "g", ID: "r", Fn: func(ctx context.Context) (int, error) {
		close(started)
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return 0, ctx.Err()
	}})
	recv(t, started, "the first task started")
	waiting := submit(t, ex, executor.Task[int]{Group: "g", ID: "w", Fn: succeed})
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if err := ex.ShutdownGroup(ctx, "g"); !errors.Is(err, context.Canceled) {
		t.Fatalf("ShutdownGroup: %v, want its context's error", err)
	}
	if cause := recv(t, causes, "the running task's context ended"); !errors.Is(cause, executor.ErrGroupShutdown) || !errors.Is(cause, context.Canceled) {
		t.Errorf("running task's cause %v", cause)
	}
	if r := wait(t, running); r.Status != executor.Cancelled {
		t.Errorf("running task %+v", r)
	}
	if r := wait(t, waiting); r.Status != executor.Cancelled || !errors.Is(r.Err, executor.ErrGroupShutdown) || !errors.Is(r.Err, context.Canceled) {
		t.Errorf("waiting task %+v", r)
	}
	rec.wantEvents(t, "w", "submitted", "completed/Cancelled")
	rec.wantEvents(t, "r", "submitted", "started", "completed/Cancelled")
	if rec.lastStarted(t, "w") || !rec.lastStarted(t, "r") {
		t.Error("OnCompleted's Started says otherwise than OnStarted")
	}
	if gs := groupStats(t, ex, "g"); gs.Cancelled != 2 || gs.Started != 1 || gs.InFlight != 0 || gs.Running != 0 || gs.Waiting != 0 || !gs.Shutdown {
		t.Errorf("group stats %+v", gs)
	}
}

// TestShutdownGroupAwaitedByAQueuedDo: ShutdownGroup's end cancels a Do
// waiting in the group, whose error says so, and a queued Go, while a
// running task that ignores its context finishes as it returns.
func TestShutdownGroupAwaitedByAQueuedDo(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)})
	g := newGate()
	defer g.open()
	a := submit(t, ex, executor.Task[string]{Group: "g", ID: "a", Fn: g.fn("a")})
	g.waitStarted(t, 1)
	doErr := make(chan error)
	go func() { doErr <- ex.Do(bg, "g", nop) }()
	await(t, "the Do queued", func() bool { return groupStats(t, ex, "g").Waiting == 1 })
	var goRan atomic.Bool
	if err := ex.Go(bg, "g", func(context.Context) error { goRan.Store(true); return nil }); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if err := ex.ShutdownGroup(ctx, "g"); !errors.Is(err, context.Canceled) {
		t.Fatalf("ShutdownGroup: %v", err)
	}
	if err := recv(t, doErr, "the queued Do returned"); !errors.Is(err, executor.ErrGroupShutdown) || !errors.Is(err, context.Canceled) {
		t.Errorf("Do: %v, want ErrGroupShutdown and context.Canceled", err)
	}
	g.open()
	if r := wait(t, a); r.Status != executor.Success {
		t.Errorf("running task that ignores its context: %+v", r)
	}
	if goRan.Load() {
		t.Error("the queued Go ran")
	}
	if gs := groupStats(t, ex, "g"); gs.Submitted != 3 || gs.Started != 1 || gs.Succeeded != 1 || gs.Cancelled != 2 || gs.InFlight != 0 {
		t.Errorf("group stats %+v", gs)
	}
}

// TestEvictGroupWhileShutdownGroupWaits: a group evicted while a
// ShutdownGroup waits for it is dropped once drained, which ends the
// wait, and the key serves again.
func TestEvictGroupWhileShutdownGroupWaits(t *testing.T) {
	ex := newExec(t, nil)
	g := newGate()
	defer g.open()
	h := submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("a")})
	g.waitStarted(t, 1)
	done := make(chan error)
	go func() { done <- ex.ShutdownGroup(guardCtx(t), "g") }()
	await(t, "ShutdownGroup marked the group", func() bool { return groupStats(t, ex, "g").Shutdown })
	if ex.EvictGroup("g") {
		t.Fatal("EvictGroup dropped a busy group at once")
	}
	g.open()
	wait(t, h)
	if err := recv(t, done, "ShutdownGroup returned once the group drained"); err != nil {
		t.Fatal(err)
	}
	await(t, "the evicted group dropped", func() bool { _, ok := ex.GroupStats("g"); return !ok })
	wantServes(t, ex, "g", "after its eviction lifted its shutdown")
}

// TestShutdownGroupFromInside: ShutdownGroup called from one of the
// group's tasks, or from a listener called for one, returns once its
// context ends; from the task, the task's own context is cancelled then.
func TestShutdownGroupFromInside(t *testing.T) {
	t.Run("task", func(t *testing.T) {
		ex := newExec(t, nil)
		var err, cause error
		h := submit(t, ex, executor.Task[int]{Group: "g", Fn: func(ctx context.Context) (int, error) {
			sctx, cancel := context.WithTimeout(bg, 10*time.Millisecond)
			defer cancel()
			err = ex.ShutdownGroup(sctx, "g")
			cause = context.Cause(ctx)
			return 0, nil
		}})
		wait(t, h)
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(cause, executor.ErrGroupShutdown) {
			t.Errorf("ShutdownGroup: %v, task's cause %v", err, cause)
		}
	})
	t.Run("listener", func(t *testing.T) {
		res := make(chan error, 1)
		var once sync.Once
		var ex *executor.Executor
		ex = newExec(t, nil, executor.WithListener(executor.ListenerFuncs{Completed: func(executor.Event) {
			once.Do(func() {
				ctx, cancel := context.WithTimeout(bg, 10*time.Millisecond)
				defer cancel()
				res <- ex.ShutdownGroup(ctx, "g")
			})
		}}))
		h := submit(t, ex, executor.Task[int]{Group: "g", Fn: succeed})
		if err := recv(t, res, "ShutdownGroup from the listener returned"); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("ShutdownGroup: %v", err)
		}
		wait(t, h)
	})
}

// TestShutdownDeadlineThenClose: Shutdown whose context ends cancels what
// is left with a cause matching ErrShutdown and returns without waiting;
// Close then waits for the running task and the running Do that ignore
// their contexts; a second Shutdown or Close returns nil; later tasks are
// refused, and every count and gauge adds up.
func TestShutdownDeadlineThenClose(t *testing.T) {
	p, err := policy.New(policy.WithDefaultMaxConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	ex, err := executor.New(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ex.Close() }) // after release is closed, if the test ends early
	release := make(chan struct{})
	closeAtEnd(t, release)
	var finished atomic.Int32
	causes := make(chan error, 2)
	body := func(ctx context.Context) {
		<-ctx.Done()
		causes <- context.Cause(ctx)
		<-release
		finished.Add(1)
	}
	started := make(chan struct{}, 2)
	running := submit(t, ex, executor.Task[int]{Group: "g", ID: "r", Fn: func(ctx context.Context) (int, error) {
		started <- struct{}{}
		body(ctx)
		return 1, nil
	}})
	doErr := make(chan error, 1)
	go func() {
		doErr <- ex.Do(bg, "d", func(ctx context.Context) error { started <- struct{}{}; body(ctx); return nil })
	}()
	recv(t, started, "the task started")
	recv(t, started, "the Do started")
	waiting := submit(t, ex, executor.Task[int]{Group: "g", ID: "w", Fn: succeed})
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if err := ex.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Shutdown: %v, want its context's error", err)
	}
	for range 2 {
		if cause := recv(t, causes, "a running context ended"); !errors.Is(cause, executor.ErrShutdown) || !errors.Is(cause, context.Canceled) {
			t.Errorf("cause %v", cause)
		}
	}
	if r := wait(t, waiting); r.Status != executor.Cancelled || !errors.Is(r.Err, executor.ErrShutdown) {
		t.Errorf("waiting task %+v", r)
	}
	if isDone(running) {
		t.Fatal("the running task completed before it returned")
	}
	closed := make(chan error, 1)
	go func() { closed <- ex.Close() }()
	for range 10 {
		runtime.Gosched() // let Close begin its wait: it must wait all the same
	}
	close(release)
	if err := recv(t, closed, "Close returned"); err != nil {
		t.Fatal(err)
	}
	if n := finished.Load(); n != 2 || !isDone(running) {
		t.Fatalf("Close returned with %d of 2 bodies returned", n)
	}
	if err := recv(t, doErr, "Do returned"); err != nil {
		t.Errorf("Do whose fn ignored its context: %v", err)
	}
	if err := ex.Shutdown(bg); err != nil {
		t.Errorf("Shutdown after Close: %v", err)
	}
	if err := ex.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := executor.Submit(ex, bg, executor.Task[int]{Group: "g", Fn: succeed}); !errors.Is(err, executor.ErrShutdown) || !errors.Is(err, executor.ErrRejected) {
		t.Errorf("Submit after Close: %v", err)
	}
	s := ex.Stats()
	if s.Submitted != 4 || s.Started != 2 || s.Succeeded != 2 || s.Cancelled != 1 || s.Rejected != 1 || s.Running != 0 || s.RunningTasks != 0 || s.Waiting != 0 {
		t.Errorf("stats %+v", s)
	}
	if msg := ex.CheckInvariants(); msg != "" {
		t.Error(msg)
	}
}

// TestShutdownWaitsForTheListener: a handle whose OnCompleted has not
// returned has not completed, and Shutdown waits for it.
func TestShutdownWaitsForTheListener(t *testing.T) {
	block, in := make(chan struct{}), make(chan struct{})
	var once sync.Once
	ex := newExec(t, nil, executor.WithListener(executor.ListenerFuncs{Completed: func(executor.Event) {
		once.Do(func() { close(in); <-block })
	}}))
	closeAtEnd(t, block)
	h := submit(t, ex, executor.Task[int]{Group: "g", Fn: succeed})
	recv(t, in, "OnCompleted called")
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if err := ex.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Shutdown with a handle not complete: %v, want its context's error", err)
	}
	if isDone(h) {
		t.Error("the handle completed before OnCompleted returned")
	}
	close(block)
	if err := ex.Shutdown(guardCtx(t)); err != nil {
		t.Fatal(err)
	}
	if !isDone(h) {
		t.Error("Shutdown returned before the handle completed")
	}
}

// TestCompletedHandle: once complete, a handle's Result, Wait (with a nil
// context or one that has ended) and Done agree and stay; Cancel reports
// false and changes nothing. Cancel reports true once only, for a waiting
// task and for a running one, whose Fn's outcome is its result.
func TestCompletedHandle(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)}, executor.WithClock(fakeClock()))
	h := submit(t, ex, executor.Task[int]{Group: "g", ID: "x", Fn: func(context.Context) (int, error) { return 7, nil }})
	r := wait(t, h)
	if r.Status != executor.Success || r.Value != 7 || r.Group != "g" || r.ID != "x" || h.Group() != "g" || h.ID() != "x" {
		t.Errorf("result %+v", r)
	}
	var nilCtx context.Context
	if got, err := h.Wait(nilCtx); err != nil || got != r {
		t.Errorf("Wait(nil) = %+v, %v", got, err)
	}
	ended, cancel := context.WithCancel(bg)
	cancel()
	if got, err := h.Wait(ended); err != nil || got != r {
		t.Errorf("Wait with an ended context = %+v, %v; want the result", got, err)
	}
	if h.Cancel() {
		t.Error("Cancel of a completed task reported true")
	}
	if got, ok := h.Result(); !ok || got != r || !isDone(h) {
		t.Errorf("Result after Cancel = %+v, %v", got, ok)
	}

	g := newGate()
	defer g.open()
	running := submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("running")})
	g.waitStarted(t, 1)
	waiting := submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("waiting")})
	if _, ok := waiting.Result(); ok {
		t.Error("Result of a waiting task reported ok")
	}
	if !waiting.Cancel() || waiting.Cancel() {
		t.Error("Cancel of a waiting task: want true, then false")
	}
	if r := wait(t, waiting); r.Status != executor.Cancelled || !errors.Is(r.Err, context.Canceled) {
		t.Errorf("cancelled waiting task %+v", r)
	}
	if !running.Cancel() || running.Cancel() {
		t.Error("Cancel of a running task: want true, then false")
	}
	g.open()
	if r := wait(t, running); r.Status != executor.Success || r.Value != "running" {
		t.Errorf("cancelled running task whose Fn ignores its context: %+v", r)
	}
}

// TestExecuteAllRefusals: ExecuteAll returns a refusal as a Rejected result
// under Discard as under Abort, an invalid task as Rejected, tasks
// submitted with an ended context as Cancelled, and cancels those not done
// when its context ends.
func TestExecuteAllRefusals(t *testing.T) {
	for _, rp := range []policy.RejectionPolicy{policy.Abort, policy.Discard} {
		t.Run(fmt.Sprint(rp), func(t *testing.T) {
			// a holds the group's one place until the last task, c, has
			// been refused: b is refused for lack of room.
			release := make(chan struct{})
			ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1), policy.WithRejectionPolicy(rp)},
				executor.WithListener(executor.ListenerFuncs{Rejected: func(e executor.Event) {
					if e.ID == "c" {
						close(release)
					}
				}}))
			tasks := []executor.Task[int]{
				{Group: "g", ID: "a", Fn: func(context.Context) (int, error) { <-release; return 1, nil }},
				{Group: "g", ID: "b", Fn: succeed},
				{Group: "", ID: "c", Fn: succeed},
			}
			rs := executor.ExecuteAll(ex, bg, tasks)
			if rs[0].Status != executor.Success || rs[0].Value != 1 {
				t.Errorf("a: %+v", rs[0])
			}
			if rs[1].Status != executor.Rejected || !errors.Is(rs[1].Err, executor.ErrRejected) || rs[1].ID != "b" {
				t.Errorf("b: %+v, want Rejected", rs[1])
			}
			if rs[2].Status != executor.Rejected || !errors.Is(rs[2].Err, executor.ErrInvalidTask) || rs[2].ID != "c" {
				t.Errorf("c: %+v, want Rejected as invalid", rs[2])
			}
		})
	}
	t.Run("context", func(t *testing.T) {
		ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)})
		ended, cancel := context.WithCancel(bg)
		cancel()
		rs := executor.ExecuteAll(ex, ended, []executor.Task[int]{{Group: "g", ID: "a", Fn: succeed}})
		if rs[0].Status != executor.Cancelled || rs[0].ID != "a" || rs[0].Group != "g" {
			t.Errorf("task submitted with an ended context: %+v", rs[0])
		}
		ctx, cancel := context.WithCancel(bg)
		started := make(chan struct{})
		go func() { <-started; cancel() }()
		var ran atomic.Bool
		rs = executor.ExecuteAll(ex, ctx, []executor.Task[int]{
			{Group: "g", ID: "running", Fn: func(ctx context.Context) (int, error) { close(started); <-ctx.Done(); return 0, ctx.Err() }},
			{Group: "g", ID: "waiting", Fn: func(context.Context) (int, error) { ran.Store(true); return 0, nil }},
		})
		if rs[0].Status != executor.Cancelled || rs[1].Status != executor.Cancelled || ran.Load() {
			t.Errorf("results %+v (the waiting task ran: %v), want both Cancelled", rs, ran.Load())
		}
	})
}

// TestEventFields: with an injected clock, OnStarted carries the time
// queued, OnCompleted the same with the time run, the status, the error
// and Started, and OnSubmitted the group and weight, with no status.
func TestEventFields(t *testing.T) {
	clk := fakeClock()
	rec := newTaskEvents()
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(2)}, executor.WithListener(rec), executor.WithClock(clk))
	g := newGate()
	defer g.open()
	a := submit(t, ex, executor.Task[string]{Group: "g", ID: "a", Weight: 2, Fn: g.fn("a")})
	g.waitStarted(t, 1)
	boom := errors.New("boom")
	b := submit(t, ex, executor.Task[string]{Group: "g", ID: "b", Weight: 2, Fn: func(context.Context) (string, error) {
		clk.Advance(5 * time.Second)
		return "", boom
	}})
	clk.Advance(3 * time.Second)
	g.open()
	wait(t, a)
	if r := wait(t, b); r.Queued != 3*time.Second || r.Duration != 5*time.Second {
		t.Errorf("result %+v", r)
	}
	rec.wantEvents(t, "b", "submitted", "started", "completed/Failed")
	evs := rec.eventsOf("b")
	if len(evs) != 3 {
		t.Fatalf("events %+v", evs)
	}
	sub, st, done := evs[0], evs[1], evs[2]
	if sub.Group != "g" || sub.Weight != 2 || sub.Status != 0 || sub.Err != nil || sub.Started {
		t.Errorf("OnSubmitted %+v", sub)
	}
	if st.Queued != 3*time.Second || st.Weight != 2 {
		t.Errorf("OnStarted %+v", st)
	}
	if done.Queued != 3*time.Second || done.Duration != 5*time.Second || done.Status != executor.Failed || !errors.Is(done.Err, boom) || !done.Started {
		t.Errorf("OnCompleted %+v", done)
	}
}

// TestRefusedAfterWaitingEvents: a task that times out in the queue, or is
// displaced under DiscardOldest, sees OnSubmitted then OnRejected, and
// counts as Rejected once.
func TestRefusedAfterWaitingEvents(t *testing.T) {
	t.Run("queue timeout", func(t *testing.T) {
		clk := fakeClock()
		rec := newTaskEvents()
		ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1), policy.WithQueueTimeout(time.Second)}, executor.WithListener(rec), executor.WithClock(clk))
		g := newGate()
		defer g.open()
		a := submit(t, ex, executor.Task[string]{Group: "g", ID: "a", Fn: g.fn("a")})
		g.waitStarted(t, 1)
		w := submit(t, ex, executor.Task[string]{Group: "g", ID: "w", Fn: g.fn("w")})
		clk.Advance(2 * time.Second)
		if r := wait(t, w); r.Status != executor.Rejected || !errors.Is(r.Err, executor.ErrQueueTimeout) || r.Queued != 2*time.Second {
			t.Errorf("result %+v", r)
		}
		g.open()
		wait(t, a)
		rec.wantEvents(t, "w", "submitted", "rejected")
		if gs := groupStats(t, ex, "g"); gs.Submitted != 2 || gs.Succeeded != 1 || gs.Rejected != 1 || gs.Started != 1 || gs.InFlight != 0 {
			t.Errorf("group stats %+v", gs)
		}
	})
	t.Run("displaced", func(t *testing.T) {
		rec := newTaskEvents()
		ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1), policy.WithDefaultQueueThreshold(1), policy.WithRejectionPolicy(policy.DiscardOldest)}, executor.WithListener(rec))
		g := newGate()
		defer g.open()
		a := submit(t, ex, executor.Task[string]{Group: "g", ID: "a", Fn: g.fn("a")})
		g.waitStarted(t, 1)
		old := submit(t, ex, executor.Task[string]{Group: "g", ID: "old", Fn: g.fn("old")})
		newer := submit(t, ex, executor.Task[string]{Group: "g", ID: "new", Fn: g.fn("new")})
		if r := wait(t, old); r.Status != executor.Rejected || !errors.Is(r.Err, executor.ErrDisplaced) {
			t.Errorf("displaced task %+v", r)
		}
		g.open()
		wait(t, a)
		wait(t, newer)
		rec.wantEvents(t, "old", "submitted", "rejected")
		rec.wantEvents(t, "new", "submitted", "started", "completed/Success")
		if gs := groupStats(t, ex, "g"); gs.Submitted != 3 || gs.Succeeded != 2 || gs.Rejected != 1 || gs.Started != 2 {
			t.Errorf("group stats %+v", gs)
		}
	})
}

// TestCallerRunsInAnEvictedGroup: a task run by CallerRuns whose group is
// dropped while it runs is counted once, as CallerRuns and by its
// outcome, in the executor's totals, and never as Started.
func TestCallerRunsInAnEvictedGroup(t *testing.T) {
	rec := newTaskEvents()
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1), policy.WithRejectionPolicy(policy.CallerRuns)}, executor.WithListener(rec))
	g := newGate()
	defer g.open()
	a := submit(t, ex, executor.Task[string]{Group: "g", ID: "a", Fn: g.fn("a")})
	g.waitStarted(t, 1)
	h, err := executor.Submit(ex, bg, executor.Task[int]{Group: "g", ID: "c", Fn: func(context.Context) (int, error) {
		ex.EvictGroup("g")
		g.open()
		wait(t, a)
		await(t, "the evicted group dropped", func() bool { _, ok := ex.GroupStats("g"); return !ok })
		return 0, errors.New("failed")
	}})
	if err != nil {
		t.Fatal(err)
	}
	if r := wait(t, h); r.Status != executor.Failed {
		t.Errorf("result %+v", r)
	}
	if s := ex.Stats(); s.Submitted != 2 || s.Started != 1 || s.Succeeded != 1 || s.Failed != 1 || s.CallerRuns != 1 || s.Rejected != 0 || s.Groups != 0 {
		t.Errorf("stats %+v", s.TaskCounts)
	}
	rec.wantEvents(t, "c", "submitted", "rejected", "started", "completed/Failed")
}

// TestListenerThatBlocks: a listener call that blocks holds no lock: while
// OnSubmitted blocks, the group's tasks finish and others are admitted;
// while OnCompleted blocks for one group, other groups run, and its task's
// handle waits for it.
func TestListenerThatBlocks(t *testing.T) {
	t.Run("OnSubmitted", func(t *testing.T) {
		in, block := make(chan struct{}), make(chan struct{})
		ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)}, executor.WithListener(executor.ListenerFuncs{Submitted: func(e executor.Event) {
			if e.ID == "blocked" {
				close(in)
				<-block
			}
		}}))
		closeAtEnd(t, block)
		g := newGate()
		defer g.open()
		r := submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("r")})
		g.waitStarted(t, 1)
		blocked := make(chan *executor.Handle[string], 1)
		go func() {
			h, _ := executor.Submit(ex, bg, executor.Task[string]{Group: "g", ID: "blocked", Fn: g.fn("b")})
			blocked <- h
		}()
		recv(t, in, "OnSubmitted called")
		groupStats(t, ex, "g")
		g.open()
		wait(t, r)
		wait(t, submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("o")}))
		close(block)
		wait(t, recv(t, blocked, "the blocked Submit returned"))
	})
	t.Run("OnCompleted", func(t *testing.T) {
		in, block := make(chan struct{}), make(chan struct{})
		var once sync.Once
		ex := newExec(t, nil, executor.WithListener(executor.ListenerFuncs{Completed: func(e executor.Event) {
			if e.Group == "slow" {
				once.Do(func() { close(in); <-block })
			}
		}}))
		closeAtEnd(t, block)
		h := submit(t, ex, executor.Task[int]{Group: "slow", Fn: succeed})
		recv(t, in, "OnCompleted called")
		for i := range 10 {
			if err := ex.Do(bg, fmt.Sprint("fast", i%2), nop); err != nil {
				t.Fatal(err)
			}
			wait(t, submit(t, ex, executor.Task[int]{Group: "fast", Fn: succeed}))
		}
		if gs := groupStats(t, ex, "slow"); gs.Running != 0 || gs.InFlight != 0 || gs.Succeeded != 1 {
			t.Errorf("the permits are back before the handle completes: %+v", gs)
		}
		if isDone(h) {
			t.Error("the handle completed before OnCompleted returned")
		}
		close(block)
		wait(t, h)
	})
}

// TestListenerThatPanicsChangesNothing: a listener that panics at every
// event, of every way in and every outcome, changes no outcome and no
// count.
func TestListenerThatPanicsChangesNothing(t *testing.T) {
	p := func(executor.Event) { panic("listener") }
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1), policy.WithDefaultQueueThreshold(1)},
		executor.WithListener(executor.ListenerFuncs{Submitted: p, Started: p, Completed: p, Rejected: p}))
	g := newGate()
	defer g.open()
	a := submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("a")})
	g.waitStarted(t, 1)
	b := submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("b")})
	if _, err := executor.Submit(ex, bg, executor.Task[string]{Group: "g", Fn: g.fn("c")}); !errors.Is(err, executor.ErrRejected) {
		t.Errorf("Submit to a full queue: %v", err)
	}
	if err := ex.Do(bg, "g", nop); !errors.Is(err, executor.ErrRejected) {
		t.Errorf("Do to a full queue: %v", err)
	}
	if !b.Cancel() {
		t.Error("Cancel of a waiting task reported false")
	}
	g.open()
	wait(t, a)
	if err := ex.Do(bg, "g", nop); err != nil {
		t.Errorf("Do: %v", err)
	}
	if err := ex.Go(bg, "g", func(context.Context) error { panic("fn") }); err != nil {
		t.Errorf("Go: %v", err)
	}
	if err := ex.Shutdown(guardCtx(t)); err != nil {
		t.Fatal(err)
	}
	if s := ex.Stats(); s.Submitted != 6 || s.Started != 3 || s.Succeeded != 2 || s.Failed != 1 || s.Cancelled != 1 || s.Rejected != 2 {
		t.Errorf("counts %+v", s.TaskCounts)
	}
}

// TestIdleGroupsReclaimedLeastRecentlyIdleFirst: a group that goes busy
// and idle again becomes the most recently idle, so the idle group
// reclaimed next is another; a busy group is never reclaimed, and a group
// reclaimed comes back with the limits SetGroupLimits gave.
func TestIdleGroupsReclaimedLeastRecentlyIdleFirst(t *testing.T) {
	ex := newExec(t, nil, executor.WithMaxIdleGroups(2))
	set := policy.GroupLimits{MaxInFlight: 3, MaxConcurrency: 2, QueueThreshold: 1, Share: 1}
	if err := ex.SetGroupLimits("a", set); err != nil {
		t.Fatal(err)
	}
	g := newGate()
	defer g.open()
	busy := submit(t, ex, executor.Task[string]{Group: "busy", Fn: g.fn("busy")})
	g.waitStarted(t, 1)
	use := func(group string) { t.Helper(); wait(t, submit(t, ex, executor.Task[int]{Group: group, Fn: succeed})) }
	kept := func(group string) bool { _, ok := ex.GroupStats(group); return ok }
	use("a")
	use("b")
	use("c")
	if kept("a") || !kept("b") || !kept("c") {
		t.Fatalf("kept a %v, b %v, c %v: want b and c", kept("a"), kept("b"), kept("c"))
	}
	use("b") // now the most recently idle
	use("d")
	if kept("c") || !kept("b") || !kept("d") {
		t.Errorf("kept b %v, c %v, d %v: want b and d", kept("b"), kept("c"), kept("d"))
	}
	if !kept("busy") {
		t.Error("a busy group was reclaimed")
	}
	if s := ex.Stats(); s.Submitted != 6 || s.Succeeded != 5 || s.Groups != 3 || s.IdleGroups != 2 {
		t.Errorf("stats %+v", s)
	}
	h := submit(t, ex, executor.Task[int]{Group: "a", Fn: succeed})
	gs := groupStats(t, ex, "a")
	wait(t, h)
	if l := (policy.GroupLimits{MaxInFlight: gs.MaxInFlight, MaxConcurrency: gs.MaxConcurrency, QueueThreshold: gs.QueueThreshold, Share: gs.Share}); l != set {
		t.Errorf("limits of a reclaimed group %+v, want %+v", l, set)
	}
	g.open()
	wait(t, busy)
}
