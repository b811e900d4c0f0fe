package executor_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// Each callback the executor runs user code in calls back into the
// executor once, each call in turn. Group "g" is full as it does: a task
// holds its only concurrency permit, another waits in its queue, which
// takes one. The callbacks fire for a task of group "o", which has room,
// or of "g" when they need a refusal or a queue timeout. Whatever the call
// does, it must return, and once the held task is let go every task must
// end once, the executor must go quiescent, and no permit may stay taken.
func TestReentrantCallbackPairs(t *testing.T) {
	callbacks := []string{
		"OnSubmitted", "OnStarted", "OnCompleted", "OnRejected/full", "OnRejected/timeout",
		"RejectionHandler", "OnStateChange/open", "OnStateChange/half-open", "ReadyToTrip",
		"resolver", "Bind", "spawn", "ctx.Done", "ctx.Value", "Fn", "Fn/RunInCaller",
	}
	calls := []string{
		"Submit/g", "Submit/o", "Go/g", "Go/o", "Do/o", "ExecuteAll/o", "Wait/o",
		"Cancel/waiting", "Cancel/running", "SetGroupLimits/g", "ResetGroupLimits/g",
		"SetGlobalMaxInFlight", "EvictGroup/g", "EvictGroup/o", "ShutdownGroup/g",
		"ShutdownGroup/o", "Shutdown/ended", "Shutdown", "Close", "Stats", "GroupStats/g",
		"Cancel/self",
	}
	// Where the task the callback runs for has its handle: Submit has
	// returned it, or returns it without waiting for the callback.
	hasHandle := map[string]bool{
		"OnStarted": true, "OnCompleted": true, "Bind": true, "ctx.Value": true, "Fn": true,
		"ReadyToTrip": true, "OnStateChange/open": true,
	}
	for _, cb := range callbacks {
		for _, call := range calls {
			if (cb == "Fn" || cb == "Fn/RunInCaller") && (call == "Shutdown" || call == "Close") {
				continue // a task's Fn waits there for its own executor: documented never to end
			}
			if call == "Cancel/self" && !hasHandle[cb] {
				continue
			}
			t.Run(cb+"/"+call, func(t *testing.T) { runPair(t, cb, call) })
		}
	}
}

type pair struct {
	t         *testing.T
	ex        *executor.Executor
	clk       *clock.Fake
	cb, call  string
	armed     atomic.Bool
	fired     chan error // what the call returned, once
	release   chan struct{}
	running   *executor.Handle[int]
	waiting   *executor.Handle[int]
	oTask     *executor.Handle[int]
	mu        sync.Mutex
	handles   []*executor.Handle[int]
	limiter   *reLimiterCount
	stopped   bool
	runsByID  sync.Map
	oneOfG    atomic.Int64
	gPeak     atomic.Int64
	gLimitMax int64
	self      atomic.Pointer[executor.Handle[int]]
	selfReady chan struct{}
}

func runPair(t *testing.T, cb, call string) {
	p := &pair{t: t, cb: cb, call: call, fired: make(chan error, 1), release: make(chan struct{}), selfReady: make(chan struct{}), clk: fakeClock(), gLimitMax: 2}
	p.limiter = &reLimiterCount{held: map[string]int{}, p: p}
	resolve := func(group string) (int, bool) {
		if group == "r" {
			p.fire("resolver", "r")
		}
		return 0, false
	}
	pol, err := policy.New(
		policy.WithGlobalMaxInFlight(8),
		policy.WithDefaultMaxConcurrency(4),
		policy.WithGroupMaxConcurrency("g", 1),
		policy.WithGroupQueueThreshold("g", 1),
		policy.WithMaxConcurrencyResolver(resolve),
		policy.WithQueueTimeout(time.Minute),
	)
	if err != nil {
		t.Fatal(err)
	}
	listen := func(name string) func(executor.Event) {
		return func(e executor.Event) {
			if e.ID == "trigger" || name == "OnRejected/timeout" && e.ID == "waiting" && e.Status == executor.Rejected {
				p.fire(name, e.Group)
			}
		}
	}
	ex, err := executor.New(pol,
		executor.WithClock(p.clk),
		executor.WithListener(executor.ListenerFuncs{
			Submitted: listen("OnSubmitted"), Started: listen("OnStarted"), Completed: listen("OnCompleted"),
			Rejected: func(e executor.Event) {
				listen("OnRejected/full")(e)
				listen("OnRejected/timeout")(e)
			},
		}),
		executor.WithRejectionHandler(func(r *executor.Rejection) error {
			if r.ID == "trigger" {
				p.fire("RejectionHandler", r.Group)
				if p.cb == "Fn/RunInCaller" {
					r.RunInCaller()
					return nil
				}
			}
			return r.Err
		}),
		executor.WithGroupBreaker(breaker.Settings{
			Timeout: time.Minute,
			ReadyToTrip: func(c breaker.Counts) bool {
				if c.ConsecutiveFailures >= 1 {
					p.fire("ReadyToTrip", "o")
					return true
				}
				return false
			},
			OnStateChange: func(name string, from, to breaker.State) {
				switch {
				case to == breaker.StateOpen:
					p.fire("OnStateChange/open", name)
				case to == breaker.StateHalfOpen:
					p.fire("OnStateChange/half-open", name)
				}
			},
		}),
		executor.WithGroupLimiter(p.limiter),
		executor.WithSpawn(func(f func()) {
			p.fire("spawn", "")
			go f()
		}),
	)
	if err != nil {
		t.Fatal(err)
	}
	p.ex = ex
	p.setUp()
	p.trigger()
	select {
	case err := <-p.fired:
		p.checkCallErr(err)
	case <-time.After(hangGuard):
		t.Fatalf("%s calling %s: the call never returned, or the callback never ran", cb, call)
	}
	p.end()
}

// setUp fills g (a running task, a waiting one) and starts a task in o
// that holds it until released, for Wait/o.
func (p *pair) setUp() {
	t := p.t
	started := make(chan struct{})
	p.running = p.submit("g", "running", func(ctx context.Context) (int, error) {
		close(started)
		select {
		case <-p.release:
		case <-ctx.Done():
		}
		return 1, nil
	})
	recv(t, started, "the task holding g started")
	p.waiting = p.submit("g", "waiting", p.counted("g"))
	if st := groupStats(t, p.ex, "g"); st.Waiting != 1 {
		t.Fatalf("g: %+v, want one task waiting", st)
	}
	p.oTask = p.submit("o", "o-held", func(ctx context.Context) (int, error) {
		select {
		case <-p.release:
		case <-ctx.Done():
		}
		return 1, nil
	})
}

// counted is a task's function that counts itself against g's limit.
func (p *pair) counted(group string) func(context.Context) (int, error) {
	return func(context.Context) (int, error) {
		if group == "g" {
			n := p.oneOfG.Add(1)
			defer p.oneOfG.Add(-1)
			for m := p.gPeak.Load(); n > m && !p.gPeak.CompareAndSwap(m, n); m = p.gPeak.Load() {
			}
		}
		return 1, nil
	}
}

func (p *pair) submit(group, id string, fn func(context.Context) (int, error)) *executor.Handle[int] {
	return p.submitCtx(bg, group, id, fn)
}

func (p *pair) submitCtx(ctx context.Context, group, id string, fn func(context.Context) (int, error)) *executor.Handle[int] {
	runs := new(atomic.Int32)
	if v, loaded := p.runsByID.LoadOrStore(id, runs); loaded && id != "" && id != "trigger" {
		runs = v.(*atomic.Int32)
	}
	h, _ := executor.Submit(p.ex, ctx, executor.Task[int]{Group: group, ID: id, Fn: func(ctx context.Context) (int, error) {
		if n := runs.Add(1); n > 1 && id != "" {
			p.t.Errorf("task %s ran %d times", id, n)
		}
		return fn(ctx)
	}})
	if h != nil {
		p.mu.Lock()
		p.handles = append(p.handles, h)
		p.mu.Unlock()
		if id == "trigger" && p.self.CompareAndSwap(nil, h) {
			close(p.selfReady)
		}
	}
	return h
}

// trigger makes the executor run the callback under test.
func (p *pair) trigger() {
	p.armed.Store(true)
	ok := p.counted("o")
	failing := func(context.Context) (int, error) { return 0, errBackend }
	switch p.cb {
	case "OnSubmitted", "OnStarted", "OnCompleted", "Bind", "spawn":
		p.submit("o", "trigger", ok)
	case "OnRejected/full", "RejectionHandler", "Fn/RunInCaller":
		p.submit("g", "trigger", func(ctx context.Context) (int, error) {
			if p.cb == "Fn/RunInCaller" {
				p.fire("Fn/RunInCaller", "g")
			}
			return 1, nil
		})
	case "OnRejected/timeout":
		p.clk.Advance(time.Minute)
	case "OnStateChange/open", "ReadyToTrip":
		p.submit("o", "trigger", failing)
	case "OnStateChange/half-open":
		p.armed.Store(false)
		h := p.submit("o", "opener", failing)
		wait(p.t, h)
		p.clk.Advance(time.Minute)
		p.armed.Store(true)
		p.submit("o", "trigger", ok)
	case "resolver":
		p.submit("r", "trigger", ok)
	case "ctx.Done":
		p.submitCtx(&pairCtx{Context: bg, p: p}, "o", "trigger", ok)
	case "ctx.Value":
		// The run context looks a key it does not know up in the
		// submitted one, as a task asking for a request's values does.
		p.submitCtx(&pairCtx{Context: bg, p: p}, "o", "trigger", func(ctx context.Context) (int, error) {
			ctx.Value(pairKey{})
			return 1, nil
		})
	case "Fn":
		p.submit("o", "trigger", func(context.Context) (int, error) { p.fire("Fn", "o"); return 1, nil })
	}
}

// fire runs the call under test, once, if the callback under test is
// where.
func (p *pair) fire(where, group string) {
	if where != p.cb || !p.armed.CompareAndSwap(true, false) {
		return
	}
	p.fired <- p.do(where)
}

func (p *pair) do(where string) error {
	ended, cancel := context.WithCancel(bg)
	cancel()
	ex := p.ex
	inFn := where == "Fn" || where == "Fn/RunInCaller"
	switch p.call {
	case "Submit/g":
		p.submit("g", "", p.counted("g"))
	case "Submit/o":
		p.submit("o", "", p.counted("o"))
	case "Go/g":
		ex.Go(bg, "g", func(ctx context.Context) error { _, err := p.counted("g")(ctx); return err })
	case "Go/o":
		ex.Go(bg, "o", func(context.Context) error { return nil })
	case "Do/o":
		return ex.Do(bg, "o2", func(context.Context) error { return nil })
	case "ExecuteAll/o":
		rs := executor.ExecuteAll(ex, bg, []executor.Task[int]{{Group: "o2", Fn: succeeding}, {Group: "o3", Fn: succeeding}})
		for _, r := range rs {
			if r.Status != executor.Success && !p.stoppedByCall() {
				return fmt.Errorf("ExecuteAll: %v %v", r.Status, r.Err)
			}
		}
	case "Wait/o":
		// o's held task ends when the test lets it go: wait for another.
		h := p.submit("o2", "", p.counted("o2"))
		_, err := h.Wait(bg)
		return err
	case "Cancel/waiting":
		p.waiting.Cancel()
	case "Cancel/running":
		p.running.Cancel()
	case "Cancel/self":
		<-p.selfReady
		p.self.Load().Cancel()
	case "SetGroupLimits/g":
		return ex.SetGroupLimits("g", policy.GroupLimits{MaxInFlight: 8, MaxConcurrency: 2, QueueThreshold: 4, Share: 1})
	case "ResetGroupLimits/g":
		return ex.ResetGroupLimits("g")
	case "SetGlobalMaxInFlight":
		return ex.SetGlobalMaxInFlight(6)
	case "EvictGroup/g":
		ex.EvictGroup("g")
	case "EvictGroup/o":
		ex.EvictGroup("o")
	case "ShutdownGroup/g":
		p.mu.Lock()
		p.stopped = true
		p.mu.Unlock()
		if err := ex.ShutdownGroup(ended, "g"); err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
	case "ShutdownGroup/o":
		p.mu.Lock()
		p.stopped = true
		p.mu.Unlock()
		if err := ex.ShutdownGroup(ended, "o"); err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
	case "Shutdown/ended":
		p.mu.Lock()
		p.stopped = true
		p.mu.Unlock()
		err := ex.Shutdown(ended)
		if inFn {
			if err != nil && !errors.Is(err, context.Canceled) {
				return err
			}
		} else if !errors.Is(err, executor.ErrCalledFromTask) {
			return fmt.Errorf("Shutdown: %v, want ErrCalledFromTask", err)
		}
	case "Shutdown", "Close":
		p.mu.Lock()
		p.stopped = true
		p.mu.Unlock()
		var err error
		if p.call == "Close" {
			err = ex.Close()
		} else {
			err = ex.Shutdown(bg)
		}
		if !errors.Is(err, executor.ErrCalledFromTask) {
			return fmt.Errorf("%s: %v, want ErrCalledFromTask", p.call, err)
		}
	case "Stats":
		ex.Stats()
	case "GroupStats/g":
		ex.GroupStats("g")
	}
	return nil
}

func (p *pair) stoppedByCall() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stopped
}

func (p *pair) checkCallErr(err error) {
	if err == nil {
		return
	}
	// A refusal is an answer: the executor may be full or stopped.
	if errors.Is(err, executor.ErrRejected) {
		return
	}
	p.t.Errorf("%s calling %s: %v", p.cb, p.call, err)
}

func (p *pair) end() {
	t := p.t
	close(p.release)
	p.mu.Lock()
	hs := append([]*executor.Handle[int](nil), p.handles...)
	p.mu.Unlock()
	for _, h := range hs {
		wait(t, h)
	}
	// A task the call queued in g starts once the held one has finished.
	await(t, "the executor went quiescent", func() bool {
		s := p.ex.Stats()
		return s.Running == 0 && s.RunningTasks == 0 && s.Waiting == 0
	})
	if msg := p.ex.CheckInvariants(); msg != "" {
		t.Error(msg)
	}
	if err := closeWithin(t, p.ex, "Close after the test"); err != nil {
		t.Errorf("Close: %v", err)
	}
	s := p.ex.Stats()
	if ended := s.Succeeded + s.Failed + s.Cancelled + s.Rejected; ended != s.Submitted {
		t.Errorf("%d tasks submitted, %d ended: %+v", s.Submitted, ended, s.TaskCounts)
	}
	if n := p.limiter.outstanding(); n != 0 {
		t.Errorf("%d cluster permits never released", n)
	}
	if n := p.limiter.doubles.Load(); n != 0 {
		t.Errorf("%d cluster permits released twice", n)
	}
	if n := p.gPeak.Load(); n > p.gLimitMax {
		t.Errorf("%d tasks of g ran at once", n)
	}
	if n := executor.DoubleCompletions(); n != 0 {
		t.Errorf("%d handles completed twice", n)
	}
}

type pairKey struct{}

// pairCtx is a submitted context whose Done or Value fires the call.
type pairCtx struct {
	context.Context
	p *pair
}

func (c *pairCtx) Done() <-chan struct{} { c.p.fire("ctx.Done", "o"); return c.Context.Done() }
func (c *pairCtx) Value(k any) any       { c.p.fire("ctx.Value", "o"); return c.Context.Value(k) }

// reLimiterCount is a group limiter that never refuses, counting permits
// held and released twice; its permits' Bind fires the call.
type reLimiterCount struct {
	mu      sync.Mutex
	held    map[string]int
	doubles atomic.Int64
	p       *pair
}

func (l *reLimiterCount) Attach(func(string)) error { return nil }

func (l *reLimiterCount) TryAcquire(key string, n int) (executor.LimiterPermit, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held[key] += n
	return &countPermit{l: l, key: key, n: n}, nil
}

func (l *reLimiterCount) outstanding() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, h := range l.held {
		n += h
	}
	return n
}

type countPermit struct {
	l        *reLimiterCount
	key      string
	n        int
	released atomic.Bool
}

func (p *countPermit) Bind(ctx context.Context, _ context.CancelCauseFunc) context.Context {
	if p.l.p != nil && p.key == "o" {
		p.l.p.fire("Bind", "o")
	}
	return ctx
}

func (p *countPermit) Release() {
	if p.released.Swap(true) {
		p.l.doubles.Add(1)
		return
	}
	p.l.mu.Lock()
	p.l.held[p.key] -= p.n
	p.l.mu.Unlock()
}
