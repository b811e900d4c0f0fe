package executor_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/internal/clocktest"
	"github.com/groupexec/groupexec/policy"
)

// The model of TestRandomCallsAgreeWithTheModel: its tasks and groups.

type modelKind int

const (
	mSubmit modelKind = iota
	mGo
	mDo
)

func (k modelKind) String() string { return [...]string{"Submit", "Go", "Do"}[k] }

type modelState int

const (
	mWaiting modelState = iota
	mRunning
	mDone
)

// How a running task's Fn returns once released.
const (
	endSuccess = iota
	endFail
	endPanic
)

// modelIdleAll is a WithMaxIdleGroups that keeps every idle group of the
// model's four keys.
const modelIdleAll = 1024

type modelTask struct {
	id        string
	kind      modelKind
	group     string
	weight    int
	submitted time.Duration // fake time of submission
	state     modelState
	status    executor.Status // once done
	started   bool            // OnStarted expected
	refused   bool            // OnRejected expected

	h       *executor.Handle[int]
	cancel  context.CancelFunc // nil: submitted with context.Background
	end     int                // how Fn returns once released
	release chan struct{}
	doErr   chan error // Do's return
	entered chan struct{}
}

type modelGroup struct {
	limits          policy.GroupLimits
	running, admit  int // permits running; admitted (waiting + running)
	runningTasks    int
	queue           []*modelTask
	shutdown, evict bool
	counts          executor.TaskCounts
	served          uint64
}

func (g *modelGroup) idle() bool { return g.runningTasks == 0 && len(g.queue) == 0 }

type model struct {
	t         *testing.T
	rnd       *rand.Rand
	ex        *executor.Executor
	clk       *clocktest.Tracked
	epoch     time.Time
	timeout   time.Duration // 0: none
	listener  bool
	maxIdle   int                // WithMaxIdleGroups: 0 keeps no idle group but those shut down, modelIdleAll keeps every one
	pol       policy.GroupLimits // what the policy resolves for every group
	overrides map[string]policy.GroupLimits
	groups    map[string]*modelGroup
	totals    executor.TaskCounts // of groups dropped
	served    uint64
	tasks     []*modelTask
	log       []string
	// events seen, by task ID ("" for Go and Do: counted per group)
	evMu       sync.Mutex
	events     map[string][]string
	anonEvents map[string]map[string]int // group -> kind -> count
}

func (m *model) now() time.Duration { return m.clk.Now().Sub(m.epoch) }

func (m *model) logf(format string, args ...any) {
	m.log = append(m.log, fmt.Sprintf(format, args...))
}

func (m *model) event(kind string, e executor.Event) {
	m.evMu.Lock()
	defer m.evMu.Unlock()
	if kind == "completed" {
		kind = fmt.Sprintf("completed/%v/started=%v", e.Status, e.Started)
	}
	if e.ID == "" {
		if m.anonEvents[e.Group] == nil {
			m.anonEvents[e.Group] = map[string]int{}
		}
		m.anonEvents[e.Group][kind]++
		return
	}
	m.events[e.ID] = append(m.events[e.ID], kind)
}

func (m *model) group(key string) *modelGroup {
	if g := m.groups[key]; g != nil {
		return g
	}
	l, ok := m.overrides[key]
	if !ok {
		l = m.pol
	}
	g := &modelGroup{limits: l}
	m.groups[key] = g
	return g
}

func (m *model) drop(key string) {
	g := m.groups[key]
	addCounts(&m.totals, &g.counts)
	m.served += g.served
	delete(m.groups, key)
}

func addCounts(c, o *executor.TaskCounts) {
	c.Submitted += o.Submitted
	c.Started += o.Started
	c.Succeeded += o.Succeeded
	c.Failed += o.Failed
	c.Cancelled += o.Cancelled
	c.Rejected += o.Rejected
	c.CallerRuns += o.CallerRuns
}

func countStatus(c *executor.TaskCounts, st executor.Status) {
	switch st {
	case executor.Success:
		c.Succeeded++
	case executor.Failed:
		c.Failed++
	case executor.Cancelled:
		c.Cancelled++
	case executor.Rejected:
		c.Rejected++
	}
}

// fn is a task's body: it tells its start, then returns as its end says
// once released, or its context's error once that ends.
func (m *model) fn(mt *modelTask) func(ctx context.Context) (int, error) {
	return func(ctx context.Context) (int, error) {
		close(mt.entered)
		select {
		case <-mt.release:
			switch mt.end {
			case endFail:
				return 0, errors.New("failed")
			case endPanic:
				panic("model panic")
			}
			return 1, nil
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// settle updates the model after g's tasks may have changed: heads that fit
// start, and an evicted group that went idle is dropped.
func (m *model) settle(key string) {
	g := m.groups[key]
	if g == nil {
		return
	}
	for len(g.queue) > 0 {
		head := g.queue[0]
		if g.running+head.weight > g.limits.MaxConcurrency {
			break
		}
		g.queue = g.queue[1:]
		m.start(g, head)
	}
	if g.idle() && (g.evict || m.maxIdle == 0 && !g.shutdown) {
		m.drop(key)
	}
}

func (m *model) start(g *modelGroup, mt *modelTask) {
	g.running += mt.weight
	g.runningTasks++
	g.counts.Started++
	g.served += uint64(mt.weight)
	mt.state, mt.started = mRunning, true
}

// finish ends mt with st.
func (m *model) finish(mt *modelTask, st executor.Status) {
	m.end(mt, st)
	m.settle(mt.group)
}

// end ends mt with st, starting nothing.
func (m *model) end(mt *modelTask, st executor.Status) {
	g := m.groups[mt.group]
	if mt.state == mRunning {
		g.running -= mt.weight
		g.runningTasks--
	} else {
		i := slices.Index(g.queue, mt)
		g.queue = slices.Delete(g.queue, i, i+1)
	}
	g.admit -= mt.weight
	mt.state, mt.status = mDone, st
	countStatus(&g.counts, st)
}

func (m *model) newTask(kind modelKind, key string, weight int) *modelTask {
	mt := &modelTask{kind: kind, group: key, weight: weight, release: make(chan struct{}), entered: make(chan struct{}), submitted: m.now()}
	if kind == mSubmit {
		mt.id = fmt.Sprint("t", len(m.tasks))
	}
	mt.end = m.rnd.IntN(3)
	if kind == mDo && mt.end == endPanic {
		mt.end = endSuccess // a Do's panic goes on up its caller's stack
	}
	m.tasks = append(m.tasks, mt)
	return mt
}

// admit decides mt's admission in the model: "start", "queue" or "refuse".
func (m *model) admit(mt *modelTask) string {
	g := m.group(mt.group)
	g.counts.Submitted++
	w := mt.weight
	switch {
	case g.shutdown,
		w > g.limits.MaxConcurrency || w > g.limits.MaxInFlight,
		g.admit+w > g.limits.MaxInFlight:
	case len(g.queue) == 0 && g.running+w <= g.limits.MaxConcurrency:
		g.admit += w
		m.start(g, mt)
		return "start"
	case len(g.queue) < g.limits.QueueThreshold:
		g.admit += w
		g.queue = append(g.queue, mt)
		mt.state = mWaiting
		return "queue"
	}
	mt.state, mt.status, mt.refused = mDone, executor.Rejected, true
	g.counts.Rejected++
	m.settle(mt.group)
	return "refuse"
}

func (m *model) submit(kind modelKind, key string, weight int) {
	mt := m.newTask(kind, key, weight)
	ctx := bg
	if m.rnd.IntN(2) == 0 {
		ctx, mt.cancel = context.WithCancel(bg)
	}
	want := m.admit(mt)
	m.logf("%v %s/%s w%d end%d ctx=%v: %s", kind, key, mt.id, weight, mt.end, mt.cancel != nil, want)
	var err error
	switch kind {
	case mSubmit:
		mt.h, err = executor.Submit(m.ex, ctx, executor.Task[int]{Group: key, ID: mt.id, Weight: weight, Fn: m.fn(mt)})
	case mGo:
		f := m.fn(mt)
		err = m.ex.Go(ctx, key, func(ctx context.Context) error { _, err := f(ctx); return err })
	case mDo:
		f := m.fn(mt)
		mt.doErr = make(chan error, 1)
		go func() {
			mt.doErr <- m.ex.DoWeighted(ctx, key, weight, func(ctx context.Context) error { _, err := f(ctx); return err })
		}()
		if want == "refuse" {
			err = recv(m.t, mt.doErr, "a refused Do returns")
		}
	}
	if (err != nil) != (want == "refuse") || (err != nil && !errors.Is(err, executor.ErrRejected)) {
		m.fail("%v %s: err %v, model says %s", kind, key, err, want)
	}
}

func (m *model) fail(format string, args ...any) {
	m.t.Helper()
	m.t.Fatalf("%s\nafter:\n%s", fmt.Sprintf(format, args...), strings.Join(m.log, "\n"))
}

// pick returns a random task in state st, or nil.
func (m *model) pick(st modelState, ok func(*modelTask) bool) *modelTask {
	var c []*modelTask
	for _, mt := range m.tasks {
		if mt.state == st && (ok == nil || ok(mt)) {
			c = append(c, mt)
		}
	}
	if len(c) == 0 {
		return nil
	}
	return c[m.rnd.IntN(len(c))]
}

func (m *model) release() {
	mt := m.pick(mRunning, nil)
	if mt == nil {
		return
	}
	st := []executor.Status{endSuccess: executor.Success, endFail: executor.Failed, endPanic: executor.Failed}[mt.end]
	m.logf("release %s/%s (%v)", mt.group, mt.id, st)
	m.finish(mt, st)
	close(mt.release)
}

func (m *model) cancelTask() {
	mt := m.pick(mWaiting, func(mt *modelTask) bool { return mt.h != nil || mt.cancel != nil })
	if mt == nil || m.rnd.IntN(2) == 0 {
		mt = m.pick(mRunning, func(mt *modelTask) bool { return mt.h != nil || mt.cancel != nil })
	}
	if mt == nil {
		return
	}
	m.logf("cancel %v %s/%s (state %d)", mt.kind, mt.group, mt.id, mt.state)
	m.finish(mt, executor.Cancelled)
	if mt.h != nil && (mt.cancel == nil || m.rnd.IntN(2) == 0) {
		if !mt.h.Cancel() {
			m.fail("Cancel of %s reported false", mt.id)
		}
		return
	}
	mt.cancel()
}

// drained waits until key's group has no task admitted and none still
// completing, so that calls that ask whether it is idle are decided.
func (m *model) drained(key string) {
	if c := m.ex.Drained(key); c != nil {
		recv(m.t, c, "group "+key+" drained")
	}
}

func (m *model) evict(key string) {
	g := m.groups[key]
	want := g != nil && g.idle()
	if g != nil && g.idle() {
		m.drained(key)
	}
	m.logf("evict %s: %v", key, want)
	switch {
	case want:
		m.drop(key)
	case g != nil:
		g.evict = true
	}
	if got := m.ex.EvictGroup(key); got != want {
		m.fail("EvictGroup(%s) = %v, want %v", key, got, want)
	}
}

func (m *model) setLimits(key string) {
	l := policy.GroupLimits{MaxInFlight: 2 + m.rnd.IntN(7), MaxConcurrency: 2 + m.rnd.IntN(3), QueueThreshold: m.rnd.IntN(5), Share: 1}
	m.logf("limits %s %+v", key, l)
	m.overrides[key] = l
	if g := m.groups[key]; g != nil {
		g.limits = l
		m.settle(key)
	}
	if err := m.ex.SetGroupLimits(key, l); err != nil {
		m.fail("SetGroupLimits: %v", err)
	}
}

func (m *model) shutdownGroup(key string) {
	g := m.groups[key]
	if g == nil {
		// A marker: no room, unless SetGroupLimits gave the group limits.
		g = &modelGroup{limits: m.overrides[key]}
		m.groups[key] = g
	} else if g.idle() {
		m.drained(key)
	}
	wantErr := !g.idle()
	g.shutdown, g.evict = true, false
	m.logf("shutdown group %s (busy %v)", key, wantErr)
	var running []*modelTask
	for _, mt := range m.tasks {
		if mt.group == key && mt.state != mDone {
			if mt.state == mRunning {
				running = append(running, mt)
			}
		}
	}
	// Every waiting task is removed at once: none starts in the room
	// another leaves.
	for len(g.queue) > 0 {
		m.end(g.queue[0], executor.Cancelled)
	}
	for _, mt := range running {
		m.end(mt, executor.Cancelled)
	}
	m.settle(key)
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if err := m.ex.ShutdownGroup(ctx, key); (err != nil) != wantErr {
		m.fail("ShutdownGroup(%s) = %v, want an error: %v", key, err, wantErr)
	}
}

func (m *model) advance() {
	// A queue timeout's timer that fired reads the time under its group's
	// lock and arms the next for the new head relative to it. The model
	// takes the time between as nil: moved again before the function
	// returns, the fake clock would arm the next timer late by the step.
	recv(m.t, m.clk.Idle(), "the fired timers' functions returned")
	// Steps of 5 and 25 ms land on a deadline exactly (a task waits
	// exactly the timeout, and expires), and steps of 10 ms past one.
	d := []time.Duration{5, 10, 25}[m.rnd.IntN(3)] * time.Millisecond
	m.logf("advance %v", d)
	m.clk.Advance(d)
	if m.timeout == 0 {
		return
	}
	now := m.now()
	for key, g := range m.groups {
		// Every task past its time is refused, and only then do the
		// tasks behind them start: an expired task never runs.
		for len(g.queue) > 0 && now-g.queue[0].submitted >= m.timeout {
			mt := g.queue[0]
			m.logf("expire %s/%s", key, mt.id)
			mt.refused = true
			m.end(mt, executor.Rejected)
		}
		m.settle(key)
	}
}

// diff compares the executor with the model, returning what differs.
func (m *model) diff() string {
	var b strings.Builder
	var running, runningTasks, waiting, idle int
	for _, g := range m.groups {
		if g.idle() && !g.shutdown {
			idle++
		}
	}
	if idle > m.maxIdle {
		fmt.Fprintf(&b, "%d idle groups kept, more than %d\n", idle, m.maxIdle)
	}
	var want executor.TaskCounts = m.totals
	served := m.served
	for key, g := range m.groups {
		addCounts(&want, &g.counts)
		served += g.served
		running += g.running
		runningTasks += g.runningTasks
		waiting += len(g.queue)
		gs, ok := m.ex.GroupStats(key)
		if !ok {
			fmt.Fprintf(&b, "group %s: no stats\n", key)
			continue
		}
		w := executor.GroupStats{Group: key, Running: g.running, RunningTasks: g.runningTasks, Waiting: len(g.queue), InFlight: g.admit,
			MaxInFlight: g.limits.MaxInFlight, MaxConcurrency: g.limits.MaxConcurrency, QueueThreshold: g.limits.QueueThreshold, Share: g.limits.Share,
			Shutdown: g.shutdown, Breaker: gs.Breaker, ServedPermits: g.served, TaskCounts: g.counts}
		if gs != w {
			fmt.Fprintf(&b, "group %s:\n got %+v\nwant %+v\n", key, gs, w)
		}
	}
	for i := range 4 {
		key := fmt.Sprint("g", i)
		if _, ok := m.ex.GroupStats(key); ok && m.groups[key] == nil {
			fmt.Fprintf(&b, "group %s: stats kept, want none\n", key)
		}
	}
	s := m.ex.Stats()
	if s.TaskCounts != want || s.ServedPermits != served || s.Running != running || s.RunningTasks != runningTasks || s.Waiting != waiting || s.Groups != len(m.groups) {
		fmt.Fprintf(&b, "stats:\n got %+v\nwant %+v served %d running %d/%d waiting %d groups %d\n", s, want, served, running, runningTasks, waiting, len(m.groups))
	}
	for _, mt := range m.tasks {
		if mt.state == mRunning {
			select {
			case <-mt.entered:
			default:
				fmt.Fprintf(&b, "task %v %s/%s not started\n", mt.kind, mt.group, mt.id)
			}
		}
		if mt.state == mDone && mt.h != nil && !isDone(mt.h) {
			fmt.Fprintf(&b, "task %s not complete\n", mt.id)
		}
	}
	return b.String()
}

// converge waits until the executor agrees with the model: what a call
// leads to (a start on a worker, a completion told to the listener first,
// a group dropped once its last task settles) may follow its return.
func (m *model) converge() {
	m.t.Helper()
	deadline := time.Now().Add(hangGuard)
	for {
		d := m.diff()
		if d == "" {
			return
		}
		if time.Now().After(deadline) {
			m.fail("the executor does not agree with the model within %v:\n%s", hangGuard, d)
		}
		runtime.Gosched()
	}
}

// checkEnd checks, after Close, every task's outcome and events.
func (m *model) checkEnd() {
	t := m.t
	want := map[string]map[string]int{}
	for _, mt := range m.tasks {
		var seq []string
		seq = append(seq, "submitted")
		if mt.refused {
			seq = append(seq, "rejected")
		} else {
			if mt.started {
				seq = append(seq, "started")
			}
			seq = append(seq, fmt.Sprintf("completed/%v/started=%v", mt.status, mt.started))
		}
		if !m.listener {
			continue
		}
		if mt.id == "" {
			if want[mt.group] == nil {
				want[mt.group] = map[string]int{}
			}
			for _, k := range seq {
				want[mt.group][k]++
			}
			continue
		}
		m.evMu.Lock()
		got := slices.Clone(m.events[mt.id])
		m.evMu.Unlock()
		if !slices.Equal(got, seq) {
			t.Errorf("task %s (%s): events %v, want %v", mt.id, mt.group, got, seq)
		}
	}
	for _, mt := range m.tasks {
		if mt.h == nil {
			continue
		}
		r, ok := mt.h.Result()
		if !ok || r.Status != mt.status {
			t.Errorf("task %s: result %+v (%v), want %v", mt.id, r, ok, mt.status)
		}
		if mt.status == executor.Rejected && !errors.Is(r.Err, executor.ErrRejected) {
			t.Errorf("task %s: rejected with %v, which does not match ErrRejected", mt.id, r.Err)
		}
	}
	if m.listener {
		m.evMu.Lock()
		defer m.evMu.Unlock()
		for key, w := range want {
			if got := m.anonEvents[key]; !maps.Equal(got, w) {
				t.Errorf("group %s: Go and Do events %v, want %v", key, got, w)
			}
		}
	}
	if t.Failed() {
		t.Logf("after:\n%s", strings.Join(m.log, "\n"))
	}
}

// TestRandomCallsAgreeWithTheModel drives an executor through random
// sequences of calls, made one at a time: Submit, Go and Do of weights 1
// and 2, tasks finishing with each outcome, Handle.Cancel and contexts
// cancelled, EvictGroup, SetGroupLimits, ShutdownGroup past its deadline,
// and steps of an injected clock onto and past queue deadlines, with or
// without a listener, keeping every idle group or none. After each call
// it waits until the executor agrees with a model of what the doc comments
// say (who runs, who waits, every group's gauges, limits and counts, whether
// its state is kept, the executor's totals), and after Close it checks each
// task's outcome and listener events: OnSubmitted, then OnRejected, or
// OnStarted and OnCompleted, or OnCompleted alone with Started false.
//
// The model knows no global limit, fair dispatch or CallerRuns, nor which
// idle groups WithMaxIdleGroups 1 or 2 reclaims: a group going idle
// reclaims another after the stats the model waits for already agree, so
// the model could not tell a reclamation from a group lost. The targeted
// tests of groups_test.go and accounting_test.go check those limits. The
// clock moves only once the timers it fired have returned (advance).
//
// GROUPEXEC_MODEL_SEED replays one seed; GROUPEXEC_MODEL_RUNS sets the seeds
// per GOMAXPROCS.
func TestRandomCallsAgreeWithTheModel(t *testing.T) {
	seededRuns(t, "GROUPEXEC_MODEL", 20, 4, func(t *testing.T, seed uint64) {
		rnd := rand.New(rand.NewPCG(seed, 2))
		m := &model{t: t, rnd: rnd, listener: rnd.IntN(3) != 0, overrides: map[string]policy.GroupLimits{}, groups: map[string]*modelGroup{},
			events: map[string][]string{}, anonEvents: map[string]map[string]int{}}
		m.clk = clocktest.NewTracked(fakeClock().Now())
		m.epoch = m.clk.Now()
		m.pol = policy.GroupLimits{MaxInFlight: 2 + rnd.IntN(6), MaxConcurrency: 2 + rnd.IntN(2), QueueThreshold: rnd.IntN(4), Share: 1}
		popts := []policy.Option{policy.WithDefaultMaxInFlight(m.pol.MaxInFlight), policy.WithDefaultMaxConcurrency(m.pol.MaxConcurrency), policy.WithDefaultQueueThreshold(m.pol.QueueThreshold)}
		if rnd.IntN(2) == 0 {
			m.timeout = 25 * time.Millisecond
			popts = append(popts, policy.WithQueueTimeout(m.timeout))
		}
		eopts := []executor.Option{executor.WithClock(m.clk)}
		m.maxIdle = []int{0, modelIdleAll}[rnd.IntN(2)]
		eopts = append(eopts, executor.WithMaxIdleGroups(m.maxIdle))
		if m.listener {
			eopts = append(eopts, executor.WithListener(executor.ListenerFuncs{
				Submitted: func(e executor.Event) { m.event("submitted", e) },
				Started:   func(e executor.Event) { m.event("started", e) },
				Completed: func(e executor.Event) { m.event("completed", e) },
				Rejected:  func(e executor.Event) { m.event("rejected", e) },
			}))
		}
		t.Logf("policy %+v timeout %v listener %v max idle groups %v", m.pol, m.timeout, m.listener, m.maxIdle)
		m.ex = newExec(t, popts, eopts...)
		steps := 150
		if testing.Short() {
			steps = 60
		}
		for range steps {
			key := fmt.Sprint("g", rnd.IntN(4))
			switch n := rnd.IntN(100); {
			case n < 20:
				m.submit(mSubmit, key, 1+rnd.IntN(2))
			case n < 30:
				m.submit(mGo, key, 1)
			case n < 40:
				m.submit(mDo, key, 1+rnd.IntN(2))
			case n < 65:
				m.release()
			case n < 75:
				m.cancelTask()
			case n < 80:
				m.evict(key)
			case n < 86:
				m.setLimits(key)
			case n < 89:
				m.shutdownGroup(key)
			default:
				m.advance()
			}
			m.converge()
		}
		// Close: every task left is cancelled.
		for _, mt := range m.tasks {
			if mt.state != mDone {
				m.end(mt, executor.Cancelled)
			}
		}
		for key := range m.groups {
			m.settle(key)
		}
		m.logf("close")
		if err := closeWithin(t, m.ex, "Close"); err != nil {
			t.Fatal(err)
		}
		for _, mt := range m.tasks {
			if mt.doErr != nil && mt.status != executor.Rejected {
				err := recv(t, mt.doErr, "Do returned")
				if (err == nil) != (mt.status == executor.Success) {
					t.Errorf("Do %s: %v, want %v", mt.group, err, mt.status)
				}
			}
		}
		m.converge()
		m.checkEnd()
		t.Logf("%d tasks", len(m.tasks))
	})
}
