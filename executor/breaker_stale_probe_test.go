package executor_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// A task admitted as a probe of one half-open period, still queued when a
// probe of that period failed and reopened the breaker, is no probe of the
// next half-open period: it is refused as it would start there
// (ErrTooManyRequests), as any task admitted before the breaker (re)opened
// is, and never runs beside the new period's probes, where its outcome
// would count nowhere.
func TestQueuedProbeOfAnEndedHalfOpenPeriodRefused(t *testing.T) {
	clk := fakeClock()
	s := tripOnFirstFailure(breaker.Settings{Clock: clk})
	s.MaxRequests = 2
	// Global room for two; one task at a time per group, so that the
	// second probe waits in g's queue behind the first.
	ex := newExec(t, []policy.Option{policy.WithGlobalMaxInFlight(2), policy.WithDefaultMaxConcurrency(1)},
		executor.WithGroupBreaker(s))

	if r := wait(t, submit(t, ex, executor.Task[int]{Group: "g", ID: "trip", Fn: failing})); r.Status != executor.Failed {
		t.Fatalf("trip: %+v, want Failed", r)
	}
	clk.Advance(time.Minute)

	releaseP1, releaseO := make(chan struct{}), make(chan struct{})
	var closeP1, closeO sync.Once
	t.Cleanup(func() {
		closeP1.Do(func() { close(releaseP1) })
		closeO.Do(func() { close(releaseO) })
	})
	blockO := func(context.Context) (int, error) { <-releaseO; return 0, nil }
	p1 := submit(t, ex, executor.Task[int]{Group: "g", ID: "p1", Fn: failOnRelease(releaseP1)})
	var p2Ran atomic.Bool
	p2 := submit(t, ex, executor.Task[int]{Group: "g", ID: "p2", Fn: func(context.Context) (int, error) {
		p2Ran.Store(true)
		return 0, nil
	}})
	if st := groupStats(t, ex, "g"); st.Breaker != breaker.StateHalfOpen || st.Running != 1 || st.Waiting != 1 {
		t.Fatalf("g: %+v, want half-open, probe p1 running and probe p2 queued", st)
	}
	o1 := submit(t, ex, executor.Task[int]{Group: "o1", ID: "o1", Fn: blockO})
	o2 := submit(t, ex, executor.Task[int]{Group: "o2", ID: "o2", Fn: blockO}) // waits for global room
	waitFor(t, func() bool { return groupStats(t, ex, "o2").Waiting == 1 })

	// p1 fails: the breaker reopens; the room p1 frees goes to o2, which
	// waited for it before g, so p2 is not looked at while it is open.
	closeP1.Do(func() { close(releaseP1) })
	if r := wait(t, p1); r.Status != executor.Failed {
		t.Fatalf("p1: %+v, want Failed", r)
	}
	waitFor(t, func() bool { return groupStats(t, ex, "o2").Running == 1 })
	if st := groupStats(t, ex, "g"); st.Breaker != breaker.StateOpen || st.Waiting != 1 {
		t.Fatalf("g: %+v, want open with p2 still queued", st)
	}

	// A new half-open period, with its own probe q queued behind p2.
	clk.Advance(time.Minute)
	q := submit(t, ex, executor.Task[int]{Group: "g", ID: "q", Fn: succeeding})
	if st := groupStats(t, ex, "g"); st.Breaker != breaker.StateHalfOpen || st.Waiting != 2 {
		t.Fatalf("g: %+v, want half-open again with p2 and q queued", st)
	}

	closeO.Do(func() { close(releaseO) })
	wait(t, o1)
	wait(t, o2)
	r := wait(t, p2)
	var re *executor.RejectedError
	if r.Status != executor.Rejected || !errors.Is(r.Err, breaker.ErrTooManyRequests) ||
		!errors.As(r.Err, &re) || re.Limit != executor.LimitBreaker || p2Ran.Load() {
		t.Errorf("p2, a probe of the ended half-open period: %+v (ran %v), want Rejected by the breaker, never run", r, p2Ran.Load())
	}
	if r := wait(t, q); r.Status != executor.Success {
		t.Errorf("q: %+v, want Success", r)
	}
}
