package executor_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// recorder is a Listener that logs "kind:id" and calls back into the
// executor, which would deadlock if it were called under an executor lock.
type recorder struct {
	mu     sync.Mutex
	events []string
	ex     *executor.Executor
}

func (r *recorder) add(kind string, e executor.Event) {
	if r.ex != nil {
		r.ex.Stats()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, fmt.Sprintf("%s:%s", kind, e.ID))
}

func (r *recorder) OnSubmitted(e executor.Event) { r.add("submitted", e) }
func (r *recorder) OnStarted(e executor.Event)   { r.add("started", e) }
func (r *recorder) OnCompleted(e executor.Event) { r.add("completed/"+e.Status.String(), e) }
func (r *recorder) OnRejected(e executor.Event)  { r.add("rejected", e) }

func (r *recorder) of(id string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		if len(e) > len(id) && e[len(e)-len(id)-1:] == ":"+id {
			out = append(out, e[:len(e)-len(id)-1])
		}
	}
	return out
}

func TestListenerSequences(t *testing.T) {
	rec := &recorder{}
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1), policy.WithDefaultQueueThreshold(1)}, executor.WithListener(rec))
	rec.ex = ex
	g := newGate()
	ok := submit(t, ex, executor.Task[string]{Group: "g", ID: "ok", Fn: g.fn("ok")})
	g.waitStarted(t, 1)
	cancelled := submit(t, ex, executor.Task[string]{Group: "g", ID: "cancelled", Fn: g.fn("x")})
	rejected, _ := executor.Submit(ex, bg, executor.Task[string]{Group: "g", ID: "rejected", Fn: g.fn("x")})
	cancelled.Cancel()
	invalid, _ := executor.Submit(ex, bg, executor.Task[string]{ID: "invalid", Fn: g.fn("x")})
	g.open()
	for _, h := range []*executor.Handle[string]{ok, cancelled, rejected, invalid} {
		wait(t, h)
	}
	want := map[string][]string{
		"ok":        {"submitted", "started", "completed/Success"},
		"cancelled": {"submitted", "completed/Cancelled"},
		"rejected":  {"submitted", "rejected"},
		"invalid":   {"rejected"},
	}
	for id, w := range want {
		if got := rec.of(id); !slices.Equal(got, w) {
			t.Errorf("%s: events %v, want %v", id, got, w)
		}
	}
}

func TestListenerSeesEventBeforeHandleCompletes(t *testing.T) {
	var mu sync.Mutex
	var completed []string
	ex := newExec(t, nil, executor.WithListener(executor.ListenerFuncs{Completed: func(e executor.Event) {
		mu.Lock()
		completed = append(completed, e.ID)
		mu.Unlock()
	}}))
	for i := range 50 {
		id := fmt.Sprint(i)
		wait(t, submit(t, ex, executor.Task[int]{Group: "g", ID: id, Fn: func(context.Context) (int, error) { return 0, nil }}))
		mu.Lock()
		got := slices.Contains(completed, id)
		mu.Unlock()
		if !got {
			t.Fatalf("task %s completed before its OnCompleted", id)
		}
	}
}

func TestPanickingListenerIsIgnored(t *testing.T) {
	p := func(executor.Event) { panic("listener") }
	ex := newExec(t, []policy.Option{policy.WithDefaultQueueThreshold(0)},
		executor.WithListener(executor.ListenerFuncs{Submitted: p, Started: p, Completed: p, Rejected: p}))
	boom := errors.New("boom")
	for range 20 {
		h := submit(t, ex, executor.Task[int]{Group: "g", Fn: func(context.Context) (int, error) { return 1, boom }})
		if r := wait(t, h); r.Status != executor.Failed || !errors.Is(r.Err, boom) {
			t.Fatalf("result %+v", r)
		}
	}
	if s := groupStats(t, ex, "g"); s.Running != 0 || s.InFlight != 0 || s.Failed != 20 {
		t.Errorf("stats %+v", s)
	}
}

// TestListenerSequenceOfTasksRunInTheirCaller: a task refused for lack of
// room and run in its caller sees OnRejected, then OnStarted and
// OnCompleted, whether CallerRuns or a rejection handler's RunInCaller
// runs it.
func TestListenerSequenceOfTasksRunInTheirCaller(t *testing.T) {
	runInCaller := executor.WithRejectionHandler(func(r *executor.Rejection) error { r.RunInCaller(); return nil })
	for _, via := range []string{"CallerRuns", "RunInCaller"} {
		for _, call := range []string{"Submit", "Go", "Do"} {
			t.Run(via+"/"+call, func(t *testing.T) {
				popts := []policy.Option{policy.WithDefaultMaxInFlight(1)}
				rec := &recorder{}
				eopts := []executor.Option{executor.WithListener(rec)}
				if via == "CallerRuns" {
					popts = append(popts, policy.WithRejectionPolicy(policy.CallerRuns))
				} else {
					eopts = append(eopts, runInCaller)
				}
				ex := newExec(t, popts, eopts...)
				rec.ex = ex
				g := newGate()
				defer g.open()
				blocker := submit(t, ex, executor.Task[string]{Group: "g", ID: "blocker", Fn: g.fn("blocker")})
				g.waitStarted(t, 1)
				ran := false
				fn := func(context.Context) error { ran = true; return nil }
				id := ""
				switch call {
				case "Submit":
					id = "refused"
					h, err := executor.Submit(ex, bg, executor.Task[int]{Group: "g", ID: id,
						Fn: func(ctx context.Context) (int, error) { return 0, fn(ctx) }})
					if err != nil {
						t.Fatal(err)
					}
					wait(t, h)
				case "Go":
					if err := ex.Go(bg, "g", fn); err != nil {
						t.Fatal(err)
					}
				case "Do":
					if err := ex.Do(bg, "g", fn); err != nil {
						t.Fatal(err)
					}
				}
				if !ran {
					t.Fatal("the refused task did not run in its caller")
				}
				want := []string{"submitted", "rejected", "started", "completed/Success"}
				if got := rec.of(id); !slices.Equal(got, want) {
					t.Errorf("events %v, want %v", got, want)
				}
				g.open()
				wait(t, blocker)
			})
		}
	}
}
