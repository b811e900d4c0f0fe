package executor_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// TestShutdownOutOfTimeRacesQueuedDoCallerRuns: Do callers contend under
// CallerRuns (full bulkheads and a full global queue run fn in the caller)
// and, once each has made its first calls, some of their functions
// blocked until their context ends and some of their calls queued, when a Shutdown whose context has already
// ended cancels what is left, and the callers go on calling through it and
// the Close that follows. Each call's function runs at most once; a Do
// returns nil exactly when its function ran and returned nil, and
// otherwise the function's error or a refusal; a call made once Shutdown
// has returned is refused with ErrShutdown (or its context's error, if it
// had ended) without running its function
// (a shutdown is no refusal CallerRuns answers); the functions that ran
// are the tasks started under the limits plus those run by their callers;
// and the counts sum up, with nothing left running or waiting.
func TestShutdownOutOfTimeRacesQueuedDoCallerRuns(t *testing.T) {
	atProcs(t, func(t *testing.T) {
		var callerRuns, cancelled uint64
		for range 8 {
			c := testShutdownRacesDoCallerRuns(t)
			callerRuns, cancelled = callerRuns+c.CallerRuns, cancelled+c.Cancelled
		}
		t.Logf("run by their callers %d, cancelled %d", callerRuns, cancelled)
	})
}

func testShutdownRacesDoCallerRuns(t *testing.T) executor.TaskCounts {
	const (
		callers = 10
		groups  = 3
		before  = 20 // calls each caller makes before the shutdown may begin
	)
	seed := uint64(time.Now().UnixNano())
	ex := newExec(t, []policy.Option{
		policy.WithGlobalMaxInFlight(3),
		policy.WithDefaultMaxInFlight(4),
		policy.WithDefaultMaxConcurrency(2),
		policy.WithGlobalQueueThreshold(4),
		policy.WithRejectionPolicy(policy.CallerRuns),
	})
	var (
		v           violations
		runs        atomic.Int64 // functions that ran
		shutDown    atomic.Bool  // Shutdown has returned
		callsBefore sync.WaitGroup
		wg          sync.WaitGroup
	)
	// The callers' contexts end after Close: a function run by its caller
	// and blocked until its context ends would otherwise block for ever.
	callerCtx, endCallers := context.WithCancel(bg)
	defer endCallers()
	stop, goOn := make(chan struct{}), make(chan struct{})
	callsBefore.Add(callers)
	for ci := range callers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seed, uint64(ci)))
			afterCalls := 0
			for i := 0; ; i++ {
				if i == before {
					callsBefore.Done()
					<-goOn
				}
				select {
				case <-stop:
					return
				default:
				}
				after := shutDown.Load()
				if after {
					if afterCalls++; afterCalls > 8 {
						return
					}
				}
				var ran atomic.Int32
				// Blocked until their context ends once the shutdown may begin,
				// so that some hold their permits and others wait then.
				blocks, fails := i >= before && r.IntN(4) == 0, r.IntN(5) == 0
				errFn := errors.New("fn failed")
				ctx := callerCtx
				var cancel context.CancelFunc = func() {}
				if r.IntN(4) == 0 {
					ctx, cancel = context.WithCancel(callerCtx)
					if r.IntN(2) == 0 {
						cancel() // now or from another goroutine, racing the call
					} else {
						go cancel()
					}
				}
				err := ex.DoWeighted(ctx, fmt.Sprint("g", r.IntN(groups)), 1+r.IntN(2), func(ctx context.Context) error {
					if ran.Add(1) > 1 {
						v.add("a function ran twice")
					}
					runs.Add(1)
					if blocks {
						<-ctx.Done()
						return ctx.Err()
					}
					runtime.Gosched()
					if fails {
						return errFn
					}
					return nil
				})
				cancel()
				n := ran.Load()
				switch {
				case err == nil && (n != 1 || blocks || fails):
					v.add(fmt.Sprintf("Do returned nil after %d runs (blocks %v, fails %v)", n, blocks, fails))
				case err != nil && n == 0 && errors.Is(err, errFn):
					v.add("Do returned its function's error without running it")
				case after && n != 0:
					v.add(fmt.Sprintf("a call once Shutdown had returned ran its function (%v)", err))
				case after && !errors.Is(err, executor.ErrShutdown) && (ctx.Err() == nil || !errors.Is(err, context.Canceled)):
					v.add(fmt.Sprintf("a call once Shutdown had returned: %v, want ErrShutdown (or its context's end)", err))
				}
			}
		})
	}
	recv(t, waitChan(&callsBefore), "the callers made their first calls")
	close(goOn)
	for range seed % 64 { // the shutdown lands among the calls that block and wait
		runtime.Gosched()
	}
	ended, cancel := context.WithCancel(bg)
	cancel()
	err := ex.Shutdown(ended)
	shutDown.Store(true)
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("Shutdown out of time: %v", err)
	}
	if err := closeWithin(t, ex, "Close after Shutdown out of time"); err != nil {
		t.Errorf("Close: %v", err)
	}
	close(stop)
	endCallers()
	waitAll(t, &wg, "the callers returned")
	v.check(t)
	wantInvariants(t, ex)
	s := ex.Stats()
	if s.Running != 0 || s.RunningTasks != 0 || s.Waiting != 0 {
		t.Errorf("after Close: %+v", s)
	}
	if got := s.Succeeded + s.Failed + s.Cancelled + s.Rejected; got != s.Submitted {
		t.Errorf("outcomes sum to %d, Submitted %d (%+v)", got, s.Submitted, s.TaskCounts)
	}
	if got, want := uint64(runs.Load()), s.Started+s.CallerRuns; got != want {
		t.Errorf("%d functions ran, want Started+CallerRuns = %d (%+v)", got, want, s.TaskCounts)
	}
	return s.TaskCounts
}

// waitChan returns a channel closed once wg is done.
func waitChan(wg *sync.WaitGroup) <-chan struct{} {
	c := make(chan struct{})
	go func() { wg.Wait(); close(c) }()
	return c
}
