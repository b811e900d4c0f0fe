package executor_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// doCall is what one Do call's fn does, and what a goroutine that fn
// starts does with fn's context while the call ends.
type doCall struct {
	askDone      bool // fn asks for Done before it returns
	watchDone    bool // the goroutine asks for Done from the start
	derive       bool // the goroutine derives a context and registers an AfterFunc
	panics       bool
	goexit       bool
	stopGroup    bool // fn stops its group (ShutdownGroup with an ended context)
	cancelDuring bool // fn cancels the call's context
	cancelAfter  bool // the call's context is cancelled once Do returned
}

func doCallFor(i int) doCall {
	b := uint32(i) * 2654435761
	bit := func(n uint) bool { return b>>n&1 != 0 }
	return doCall{
		askDone:      bit(3),
		watchDone:    bit(5),
		derive:       bit(7),
		panics:       b>>9&7 == 0,
		goexit:       b>>9&7 == 1,
		stopGroup:    b>>12&7 == 0,
		cancelDuring: b>>15&7 == 0,
		cancelAfter:  bit(18),
	}
}

// watchInBackground runs watchFnContext for call i in a goroutine that
// wg counts, and sends its error to errs.
func watchInBackground(ctx context.Context, wg *sync.WaitGroup, errs chan<- error, i int, c doCall, returned <-chan struct{}) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := watchFnContext(ctx, c, returned); err != nil {
			errs <- fmt.Errorf("call %d %+v: %w", i, c, err)
		}
	}()
}

// watchFnContext checks fn's context from a goroutine that fn started,
// until well after Do returned: Err is not nil once Do has returned, and
// once not nil it stays the same error; Done is closed once Err is not
// nil, Err is not nil once Done is closed, and Done returns the same
// channel every time. Contexts derived from it, and an AfterFunc, end.
func watchFnContext(ctx context.Context, c doCall, returned <-chan struct{}) error {
	var derived, timed context.Context
	var afterRan chan struct{}
	if c.derive {
		var cancel, cancelTimed context.CancelFunc
		derived, cancel = context.WithCancel(ctx)
		defer cancel()
		timed, cancelTimed = context.WithTimeout(ctx, time.Hour)
		defer cancelTimed()
		afterRan = make(chan struct{})
		context.AfterFunc(ctx, func() { close(afterRan) })
	}
	var ch <-chan struct{}
	var first error
	for seen := 0; seen < 3; runtime.Gosched() {
		after := isClosed(returned)
		err := ctx.Err()
		switch {
		case first != nil && err != first:
			return fmt.Errorf("Err = %v after %v", err, first)
		case err == nil && after:
			return errors.New("Err = nil after Do returned")
		}
		if c.watchDone || err != nil {
			d := ctx.Done()
			if ch == nil {
				ch = d
			} else if d != ch {
				return errors.New("Done returned another channel")
			}
			if err != nil && !isClosed(d) {
				return fmt.Errorf("Err = %v but Done is open", err)
			}
			if isClosed(d) && ctx.Err() == nil {
				return errors.New("Done is closed but Err = nil")
			}
		}
		if err != nil {
			first = err
			seen++
		}
	}
	if c.derive {
		for _, d := range []context.Context{derived, timed} {
			select {
			case <-d.Done():
			case <-time.After(10 * time.Second): // a hang guard
				return errors.New("a context derived from fn's is not done after the call")
			}
			if d.Err() != first {
				return fmt.Errorf("a context derived from fn's: Err = %v, fn's was %v", d.Err(), first)
			}
		}
		select {
		case <-afterRan:
		case <-time.After(10 * time.Second):
			return errors.New("an AfterFunc of fn's context did not run after the call")
		}
	}
	return nil
}

// Do calls from several goroutines at once, in two groups (and one group
// per call that stops its group while fn runs), each with its own context
// that fn keeps: a goroutine watches it across the call's end while the
// calls' tasks are reused. Calls panic, exit their goroutine, ask for
// Done or not, cancel the call's context during or after the call; the
// executor has group breakers (whose tasks are not reused), a listener,
// a cluster limiter (fn's context then derives from the permit's), or
// runs refused calls in their callers.
func TestDoContextKeptAcrossEndsAndReuses(t *testing.T) {
	type config struct {
		name    string
		popts   []policy.Option
		eopts   func() []executor.Option
		group   func(key string) // called before a call in a new group
		reaches bool             // a stop of the group reaches fn's context
		// fn's panic comes back as Do's *executor.PanicError (RunInCaller)
		recovers bool
	}
	lim := newMemLimiter()
	configs := []config{
		{name: "plain", popts: []policy.Option{policy.WithDefaultMaxConcurrency(2)}, reaches: true},
		{name: "breaker", popts: []policy.Option{policy.WithDefaultMaxConcurrency(2)}, reaches: true,
			eopts: func() []executor.Option {
				return []executor.Option{executor.WithGroupBreaker(breaker.Settings{Clock: fakeClock(),
					ReadyToTrip: func(breaker.Counts) bool { return false }})}
			}},
		{name: "listener", popts: []policy.Option{policy.WithDefaultMaxConcurrency(2)}, reaches: true,
			eopts: func() []executor.Option {
				nop := func(executor.Event) {}
				return []executor.Option{executor.WithListener(executor.ListenerFuncs{
					Submitted: nop, Started: nop, Completed: nop, Rejected: nop})}
			}},
		{name: "cluster", popts: []policy.Option{policy.WithDefaultMaxConcurrency(2)}, reaches: true,
			eopts: func() []executor.Option {
				return []executor.Option{executor.WithGroupLimiter(lim)}
			},
			group: func(key string) { lim.give(key, 1<<20) }},
		{name: "CallerRuns", popts: []policy.Option{policy.WithDefaultMaxInFlight(1),
			policy.WithRejectionPolicy(policy.CallerRuns)}},
		{name: "RunInCaller", popts: []policy.Option{policy.WithDefaultMaxInFlight(1)}, recovers: true,
			eopts: func() []executor.Option {
				return []executor.Option{executor.WithRejectionHandler(func(r *executor.Rejection) error {
					r.RunInCaller()
					return nil
				})}
			}},
	}
	const callers, calls = 4, 150
	for _, cf := range configs {
		t.Run(cf.name, func(t *testing.T) {
			var eopts []executor.Option
			if cf.eopts != nil {
				eopts = cf.eopts()
			}
			ex := newExec(t, cf.popts, eopts...)
			if cf.group != nil {
				cf.group("g")
				cf.group("h")
			}
			ended, cancel := context.WithCancel(bg)
			cancel()
			var watchers sync.WaitGroup
			errs := make(chan error, 3*callers*calls)
			call := func(i int) {
				c := doCallFor(i)
				group := []string{"g", "h"}[i%2]
				if c.stopGroup {
					group = fmt.Sprint("stop-", i)
					if cf.group != nil {
						cf.group(group)
					}
				}
				parent, cancelParent := context.WithCancel(bg)
				defer cancelParent()
				returned := make(chan struct{}) // closed once Do returned
				fn := func(ctx context.Context) error {
					watchInBackground(ctx, &watchers, errs, i, c, returned)
					if c.askDone {
						ctx.Done()
					}
					if c.cancelDuring {
						cancelParent()
					}
					if c.stopGroup {
						_ = ex.ShutdownGroup(ended, group)
					}
					if (c.cancelDuring || c.stopGroup && cf.reaches) && ctx.Err() == nil {
						errs <- fmt.Errorf("call %d %+v: Err = nil once its context was cancelled", i, c)
					}
					if c.panics {
						panic(errFnPanicked)
					}
					if c.goexit {
						runtime.Goexit()
					}
					return nil
				}
				done := make(chan struct{})
				go func() {
					defer close(done)
					defer close(returned)
					defer func() {
						if r := recover(); r != nil && r != errFnPanicked {
							panic(r)
						}
					}()
					var pe *executor.PanicError
					if err := ex.Do(parent, group, fn); err != nil && !(cf.recovers && c.panics && errors.As(err, &pe)) {
						errs <- fmt.Errorf("call %d %+v: Do = %v", i, c, err)
					}
				}()
				<-done
				if c.cancelAfter {
					cancelParent()
				}
			}
			var callersDone sync.WaitGroup
			for k := range callers {
				callersDone.Add(1)
				go func() {
					defer callersDone.Done()
					for n := range calls {
						call(k*calls + n)
					}
				}()
			}
			callersDone.Wait()
			watchers.Wait()
			close(errs)
			n := 0
			for err := range errs {
				if n++; n <= 5 {
					t.Error(err)
				}
			}
		})
	}
}

var errFnPanicked = errors.New("fn panicked")

// A stop while fns run (ShutdownGroup or Shutdown whose context has ended,
// Close) reaches their contexts whether fn asked for Done or not, and the
// contexts, kept past the calls, keep the contract once the calls have
// ended and their tasks are reused by calls in another executor.
func TestDoContextKeptThroughAStop(t *testing.T) {
	ended, cancel := context.WithCancel(bg)
	cancel()
	stops := map[string]func(*executor.Executor) error{
		"ShutdownGroup": func(ex *executor.Executor) error { return ex.ShutdownGroup(ended, "g") },
		"Shutdown":      func(ex *executor.Executor) error { return ex.Shutdown(ended) },
		"Close":         func(ex *executor.Executor) error { return ex.Close() },
	}
	for name, stop := range stops {
		t.Run(name, func(t *testing.T) {
			const calls = 16
			ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(calls)})
			other := newExec(t, nil)
			var watchers, callers sync.WaitGroup
			errs := make(chan error, 2*calls)
			running := make(chan struct{}, calls)
			stopped := make(chan struct{})
			for i := range calls {
				c := doCall{askDone: i%2 == 0, watchDone: i%4 == 1, derive: i%3 == 0}
				returned := make(chan struct{})
				callers.Add(1)
				go func() {
					defer callers.Done()
					defer close(returned)
					parent, cancel := context.WithCancel(bg)
					defer cancel()
					err := ex.Do(parent, "g", func(ctx context.Context) error {
						watchInBackground(ctx, &watchers, errs, i, c, returned)
						if c.askDone {
							ctx.Done()
						}
						running <- struct{}{}
						<-stopped
						// Close cancels before it waits for fn: polled.
						for give := time.Now().Add(10 * time.Second); ctx.Err() == nil; runtime.Gosched() {
							if name != "Close" || time.Now().After(give) {
								return errors.New("Err = nil once the group stopped")
							}
						}
						if c.askDone && !isClosed(ctx.Done()) {
							return errors.New("Done is open once the group stopped")
						}
						return nil
					})
					if err != nil {
						errs <- fmt.Errorf("call %d %+v: %w", i, c, err)
					}
				}()
			}
			for range calls {
				select {
				case <-running:
				case <-time.After(10 * time.Second): // a hang guard
					close(stopped)
					t.Fatal("the calls did not all start")
				}
			}
			stopDone := make(chan error, 1)
			go func() { stopDone <- stop(ex) }()
			if name != "Close" {
				if err := <-stopDone; !errors.Is(err, context.Canceled) {
					t.Errorf("%s = %v, want context.Canceled", name, err)
				}
			}
			close(stopped)
			callers.Wait()
			if name == "Close" {
				if err := <-stopDone; err != nil {
					t.Errorf("Close = %v", err)
				}
			}
			// The tasks go to other calls while the contexts are watched.
			for range 4 * calls {
				parent, cancel := context.WithCancel(bg)
				if err := other.Do(parent, "g", func(ctx context.Context) error { return ctx.Err() }); err != nil {
					t.Error(err)
				}
				cancel()
			}
			watchers.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
}
