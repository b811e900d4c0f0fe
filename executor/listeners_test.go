package executor_test

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// heard is a Listener that logs "name:kind" to a log shared by several.
type heard struct {
	name string
	log  *eventLog
	// fail, if set, is called for each event after it is logged: it may
	// panic or exit the goroutine.
	fail func(kind string)
}

type eventLog struct {
	mu  sync.Mutex
	all []string
}

func (l *eventLog) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all = append(l.all, s)
}

func (l *eventLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.all)
}

func (h heard) on(kind string) {
	h.log.add(h.name + ":" + kind)
	if h.fail != nil {
		h.fail(kind)
	}
}

func (h heard) OnSubmitted(executor.Event) { h.on("submitted") }
func (h heard) OnStarted(executor.Event)   { h.on("started") }
func (h heard) OnCompleted(executor.Event) { h.on("completed") }
func (h heard) OnRejected(executor.Event)  { h.on("rejected") }

// Each listener hears every event, in the order Listeners was given them,
// one event after another; nil ones are skipped, and a Listeners among
// them is flattened in place.
func TestListenersCallsEachInOrder(t *testing.T) {
	log := &eventLog{}
	a, b, c := heard{"a", log, nil}, heard{"b", log, nil}, heard{"c", log, nil}
	ex := newExec(t, nil, executor.WithListener(executor.Listeners(a, nil, executor.Listeners(b, c))))
	if err := ex.Do(bg, "g", func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"a:submitted", "b:submitted", "c:submitted",
		"a:started", "b:started", "c:started",
		"a:completed", "b:completed", "c:completed",
	}
	if got := log.get(); !slices.Equal(got, want) {
		t.Errorf("events heard:\n got %q\nwant %q", got, want)
	}
}

// With no listener left, Listeners means none, as WithListener(nil) does;
// with one, it is that one.
func TestListenersOfNoneOrOne(t *testing.T) {
	if l := executor.Listeners(); l != nil {
		t.Errorf("Listeners() = %v, want nil", l)
	}
	if l := executor.Listeners(nil, nil); l != nil {
		t.Errorf("Listeners(nil, nil) = %v, want nil", l)
	}
	a := &nilListener{}
	if l := executor.Listeners(nil, a); l != a {
		t.Errorf("Listeners(nil, a) = %v, want a", l)
	}
	ex := newExec(t, nil, executor.WithListener(executor.Listeners(nil)))
	if err := ex.Do(bg, "g", func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
}

// A listener that panics is recovered and ignored, as a single one is, and
// the listeners after it still hear the event; so does the one after a
// listener that exits the goroutine, which then ends the worker that made
// the call, as a single listener's exit does, and nothing else: the task
// and the next one of its group complete.
func TestListenersAFailingOneDoesNotSilenceTheRest(t *testing.T) {
	log := &eventLog{}
	panics := heard{"panics", log, func(string) { panic("listener") }}
	var exits sync.Once
	exitsOnce := heard{"exits", log, func(kind string) {
		if kind == "completed" {
			exits.Do(runtime.Goexit)
		}
	}}
	last := heard{"last", log, nil}
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)},
		executor.WithListener(executor.Listeners(panics, exitsOnce, last)))
	release := make(chan struct{})
	first, err := executor.Submit(ex, bg, executor.Task[int]{Group: "g", Fn: func(context.Context) (int, error) { <-release; return 1, nil }})
	if err != nil {
		t.Fatal(err)
	}
	next, err := executor.Submit(ex, bg, executor.Task[int]{Group: "g", Fn: func(context.Context) (int, error) { return 2, nil }})
	if err != nil {
		t.Fatal(err)
	}
	close(release)
	ctx, cancel := context.WithTimeout(bg, 10*time.Second) // a hang guard
	defer cancel()
	for i, h := range []*executor.Handle[int]{first, next} {
		if r, err := h.Wait(ctx); err != nil || r.Status != executor.Success {
			t.Fatalf("task %d: %+v, %v", i, r, err)
		}
	}
	if err := ex.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	var lasts []string
	for _, s := range log.get() {
		if rest, ok := strings.CutPrefix(s, "last:"); ok {
			lasts = append(lasts, rest)
		}
	}
	slices.Sort(lasts) // the second task's submission may come before or after the first's start
	want := []string{"completed", "completed", "started", "started", "submitted", "submitted"}
	if !slices.Equal(lasts, want) {
		t.Errorf("the last listener heard %q, want %q", lasts, want)
	}
}

// Called directly, a Listeners whose member panics, or exits the
// goroutine, lets the members after it hear the event, then goes on with
// the panic or the exit: the caller sees what it would of that member
// alone. An exit wins over a panic, whichever comes first: a panic after
// it can be recovered, and then the exit goes on.
func TestListenersPassesOnThePanicOrTheExit(t *testing.T) {
	panicking := func(v any) func(string) { return func(string) { panic(v) } }
	exiting := func(string) { runtime.Goexit() }
	errFirst, errSecond := errors.New("first"), errors.New("second")
	for _, tc := range []struct {
		name      string
		fails     []func(string)
		exit      bool
		recovered any
	}{
		{"panic", []func(string){panicking(errFirst)}, false, errFirst},
		{"exit", []func(string){exiting}, true, nil},
		{"two panics", []func(string){panicking(errFirst), panicking(errSecond)}, false, errSecond},
		{"panic then exit", []func(string){panicking(errFirst), exiting}, true, nil},
		{"exit then panic", []func(string){exiting, panicking(errFirst)}, true, errFirst},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := &eventLog{}
			var ls []executor.Listener
			for _, f := range tc.fails {
				ls = append(ls, heard{"failing", log, f})
			}
			ls = append(ls, heard{"last", log, nil})
			l := executor.Listeners(ls...)
			var recovered any
			returned, exited := false, true
			done := make(chan struct{})
			go func() {
				defer close(done)
				func() {
					defer func() { recovered = recover() }()
					l.OnStarted(executor.Event{})
					returned = true
				}()
				exited = false // not reached if the goroutine exits
			}()
			<-done
			if returned {
				t.Fatal("the call returned")
			}
			if exited != tc.exit {
				t.Errorf("the goroutine exited: %v, want %v", exited, tc.exit)
			}
			if recovered != tc.recovered {
				t.Errorf("recovered %v, want %v", recovered, tc.recovered)
			}
			if got := log.get(); got[len(got)-1] != "last:started" || len(got) != len(ls) {
				t.Errorf("heard %q: every listener must hear the event, the last one too", got)
			}
		})
	}
}

// Given twice, WithListener would replace the first listener, a metrics
// collector say, without a word: New refuses it, naming the option and
// Listeners. A nil pointer among the listeners that Listeners combines is
// refused as one given alone is.
func TestWithListenerTwiceIsRefused(t *testing.T) {
	p, err := policy.New()
	if err != nil {
		t.Fatal(err)
	}
	log := &eventLog{}
	_, err = executor.New(p, executor.WithListener(heard{"a", log, nil}), executor.WithListener(heard{"b", log, nil}))
	if err == nil {
		t.Fatal("New with WithListener twice succeeded")
	}
	if !strings.Contains(err.Error(), "WithListener") || !strings.Contains(err.Error(), "Listeners") {
		t.Errorf("the error %q does not name WithListener and Listeners", err)
	}
	// After WithListener(nil), none, a listener replaces nothing.
	ex, err := executor.New(p, executor.WithListener(nil), executor.WithListener(heard{"c", log, nil}))
	if err != nil {
		t.Fatalf("WithListener(nil), then a listener: %v", err)
	}
	if err := ex.Do(context.Background(), "g", func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	ex.Close()
	if !slices.ContainsFunc(log.get(), func(s string) bool { return strings.HasPrefix(s, "c:") }) {
		t.Errorf("the listener given after WithListener(nil) heard nothing: %v", log.get())
	}
	_, err = executor.New(p, executor.WithListener(executor.Listeners(heard{"a", log, nil}, (*nilListener)(nil))))
	if err == nil {
		t.Fatal("WithListener(Listeners(a, (*nilListener)(nil))): New succeeded")
	}
	if !strings.Contains(err.Error(), "WithListener") || !strings.Contains(err.Error(), "nilListener") {
		t.Errorf("the error %q does not name WithListener and the listener", err)
	}
}
