package executor_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// crew runs tasks that report their start on one channel and each wait for
// their own release, so that a test finishes them one at a time.
type crew struct {
	*gate
	release map[string]chan struct{}
}

func newCrew() *crew { return &crew{gate: newGate(), release: map[string]chan struct{}{}} }

func (c *crew) fn(name string) func(context.Context) (string, error) {
	ch := make(chan struct{})
	c.release[name] = ch
	return func(ctx context.Context) (string, error) {
		c.started <- name
		select {
		case <-ch:
		case <-ctx.Done(): // Close, in the cleanup of a test that failed before releasing it
		}
		return name, nil
	}
}

// submit submits a task named name in group grp.
func (c *crew) submit(t *testing.T, ex *executor.Executor, grp, name string, weight int) *executor.Handle[string] {
	t.Helper()
	return submit(t, ex, executor.Task[string]{Group: grp, ID: name, Weight: weight, Fn: c.fn(name)})
}

// finish releases the task named name and waits for its handle: by then its
// permits are back and what they let start has started (under the lock).
func (c *crew) finish(t *testing.T, h *executor.Handle[string]) {
	t.Helper()
	close(c.release[h.ID()])
	if r := wait(t, h); r.Status != executor.Success {
		t.Fatalf("%s: %+v", h.ID(), r)
	}
}

// checkUse compares the executor's permits running and tasks waiting.
func checkUse(t *testing.T, ex *executor.Executor, running, waiting int) {
	t.Helper()
	if s := ex.Stats(); s.Running != running || s.Waiting != waiting {
		t.Fatalf("running %d waiting %d, want %d and %d", s.Running, s.Waiting, running, waiting)
	}
	if msg := ex.CheckInvariants(); msg != "" {
		t.Fatal(msg)
	}
}

// checkUseSoon is checkUse for a start that global room given back makes:
// the finish that gave it back completes its task in its group's locked
// section, and the dispatcher starts another group's task (or the same
// group's, back in line) after it, so a caller of Wait may look before
// that start.
func checkUseSoon(t *testing.T, ex *executor.Executor, running, waiting int) {
	t.Helper()
	waitFor(t, func() bool { s := ex.Stats(); return s.Running == running && s.Waiting == waiting })
	checkUse(t, ex, running, waiting)
}

func checkGroupUse(t *testing.T, ex *executor.Executor, grp string, running, waiting, inFlight int) {
	t.Helper()
	if s := groupStats(t, ex, grp); s.Running != running || s.Waiting != waiting || s.InFlight != inFlight {
		t.Fatalf("group %s: running %d waiting %d in flight %d, want %d, %d, %d", grp, s.Running, s.Waiting, s.InFlight, running, waiting, inFlight)
	}
	if msg := ex.CheckInvariants(); msg != "" {
		t.Fatal(msg)
	}
}

func limits(inFlight, conc, queue, share int) policy.GroupLimits {
	return policy.GroupLimits{MaxInFlight: inFlight, MaxConcurrency: conc, QueueThreshold: queue, Share: share}
}

func TestSetGlobalMaxInFlightRaiseStartsWaiting(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithGlobalMaxInFlight(1), policy.WithDefaultMaxConcurrency(8)})
	c := newCrew()
	hs := []*executor.Handle[string]{c.submit(t, ex, "a", "a0", 1)}
	c.waitStarted(t, 1)
	for i, grp := range []string{"b", "a", "c"} {
		hs = append(hs, c.submit(t, ex, grp, fmt.Sprint(grp, i+1), 1))
	}
	checkUse(t, ex, 1, 3)

	if err := ex.SetGlobalMaxInFlight(3); err != nil {
		t.Fatal(err)
	}
	// Started before the call returned: the permits are taken under the lock.
	checkUse(t, ex, 3, 1)
	if s := ex.Stats(); s.GlobalMaxInFlight != 3 || s.Started != 3 {
		t.Fatalf("stats %+v", s)
	}
	c.waitStarted(t, 2)
	if err := ex.SetGlobalMaxInFlight(policy.Unlimited); err != nil {
		t.Fatal(err)
	}
	checkUse(t, ex, 4, 0)
	for _, h := range hs {
		c.finish(t, h)
	}
	checkUse(t, ex, 0, 0)
	if ex.Policy().GlobalMaxInFlight() != 1 {
		t.Error("the policy changed")
	}
}

func TestSetGlobalMaxInFlightLowerDrains(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithGlobalMaxInFlight(4), policy.WithDefaultMaxConcurrency(8)})
	c := newCrew()
	var running, waiting []*executor.Handle[string]
	for i := range 4 {
		running = append(running, c.submit(t, ex, fmt.Sprint("g", i%2), fmt.Sprint("r", i), 1))
	}
	c.waitStarted(t, 4)
	for i := range 3 {
		waiting = append(waiting, c.submit(t, ex, fmt.Sprint("g", i%2), fmt.Sprint("w", i), 1))
	}
	checkUse(t, ex, 4, 3)

	if err := ex.SetGlobalMaxInFlight(2); err != nil {
		t.Fatal(err)
	}
	if s := ex.Stats(); s.GlobalMaxInFlight != 2 {
		t.Fatalf("stats %+v", s)
	}
	checkUse(t, ex, 4, 3) // nothing evicted, nothing dropped
	c.finish(t, running[0])
	checkUse(t, ex, 3, 3) // over the limit: no start
	c.finish(t, running[1])
	checkUse(t, ex, 2, 3) // at the limit: no start
	c.finish(t, running[2])
	checkUseSoon(t, ex, 2, 2) // under: starts resume, one at a time
	if s := c.waitStarted(t, 1); s[0] != "w0" {
		t.Fatalf("started %v, want the oldest waiting task w0", s)
	}
	c.finish(t, running[3])
	checkUseSoon(t, ex, 2, 1)
	c.waitStarted(t, 1)
	for _, h := range waiting {
		c.finish(t, h)
	}
	checkUse(t, ex, 0, 0)
	s := ex.Stats()
	if s.Started != 7 || s.Succeeded != 7 || s.Rejected+s.Cancelled+s.Failed != 0 {
		t.Errorf("counts %+v", s.TaskCounts)
	}
}

// TestSetGlobalMaxInFlightLowerDrainsFullGroup: a group running at its own
// concurrency limit, with a backlog, has its finished tasks' permits passed
// to its next ones while no group waits for global room; a lowered global
// limit must stop that until the permits in use are under it.
func TestSetGlobalMaxInFlightLowerDrainsFullGroup(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithGlobalMaxInFlight(4), policy.WithDefaultMaxConcurrency(4)})
	c := newCrew()
	var running, waiting []*executor.Handle[string]
	for i := range 4 {
		running = append(running, c.submit(t, ex, "g", fmt.Sprint("r", i), 1))
	}
	c.waitStarted(t, 4)
	for i := range 2 {
		waiting = append(waiting, c.submit(t, ex, "g", fmt.Sprint("w", i), 1))
	}
	if err := ex.SetGlobalMaxInFlight(2); err != nil {
		t.Fatal(err)
	}
	c.finish(t, running[0])
	checkUse(t, ex, 3, 2) // over the limit: no start
	c.finish(t, running[1])
	checkUse(t, ex, 2, 2) // at the limit: no start
	c.finish(t, running[2])
	checkUseSoon(t, ex, 2, 1) // under: starts resume
	if s := c.waitStarted(t, 1); s[0] != "w0" {
		t.Fatalf("started %v, want the oldest waiting task w0", s)
	}
	c.finish(t, running[3])
	checkUseSoon(t, ex, 2, 0)
	c.waitStarted(t, 1)
	for _, h := range waiting {
		c.finish(t, h)
	}
	checkUse(t, ex, 0, 0)
}

// TestSetGlobalMaxInFlightLowerHoldsForPermitsInTransit: a finished task
// whose group has nothing waiting, while another group waits for global
// room, gives its permits back through the dispatcher (in transit with its
// group). A lowered limit holds for them as for any room: the permits of a
// finished task of weight 2 do not start the waiting head of weight 2
// while the other running task of weight 2 would put the permits in use
// over 3.
func TestSetGlobalMaxInFlightLowerHoldsForPermitsInTransit(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithGlobalMaxInFlight(4), policy.WithDefaultMaxConcurrency(4)})
	c := newCrew()
	a1 := c.submit(t, ex, "a", "a1", 2)
	a2 := c.submit(t, ex, "a", "a2", 2)
	c.waitStarted(t, 2)
	b1 := c.submit(t, ex, "b", "b1", 2)
	checkUse(t, ex, 4, 1) // b waits for global room
	if err := ex.SetGlobalMaxInFlight(3); err != nil {
		t.Fatal(err)
	}
	c.finish(t, a1)
	checkUse(t, ex, 2, 1) // 2 + 2 would be over 3: no start
	c.finish(t, a2)
	checkUseSoon(t, ex, 2, 0)
	if s := c.waitStarted(t, 1); s[0] != "b1" {
		t.Fatalf("started %v, want b1", s)
	}
	c.finish(t, b1)
	checkUse(t, ex, 0, 0)
}

// TestGlobalLimitNearMaxInt: with a global limit close to math.MaxInt, a
// task that does not fit the room left waits: the sum of the permits in
// use and its weight, past math.MaxInt, does not wrap around.
func TestGlobalLimitNearMaxInt(t *testing.T) {
	ex := newExec(t, []policy.Option{
		policy.WithGlobalMaxInFlight(math.MaxInt - 1),
		policy.WithDefaultMaxConcurrency(policy.Unlimited),
		policy.WithDefaultMaxInFlight(policy.Unlimited),
	})
	c := newCrew()
	big := c.submit(t, ex, "a", "big", math.MaxInt-1)
	c.waitStarted(t, 1)
	small := c.submit(t, ex, "b", "small", 2)
	if s := groupStats(t, ex, "b"); s.Running != 0 || s.Waiting != 1 {
		t.Fatalf("b: %d permits running, %d tasks waiting; want 0 and 1 (the global limit is full)", s.Running, s.Waiting)
	}
	c.finish(t, big)
	c.waitStarted(t, 1)
	c.finish(t, small)
}

// TestSetGlobalMaxInFlightBelowWaitingWeight: a waiting task heavier than a
// lowered global limit is kept, does not block the other groups, and starts
// when the limit is raised again.
func TestSetGlobalMaxInFlightBelowWaitingWeight(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithGlobalMaxInFlight(4), policy.WithDefaultMaxConcurrency(4)})
	c := newCrew()
	blocker := c.submit(t, ex, "blocker", "blocker", 4)
	c.waitStarted(t, 1)
	heavy := c.submit(t, ex, "heavy", "heavy", 3)
	light := c.submit(t, ex, "light", "light", 1)
	checkUse(t, ex, 4, 2)

	if err := ex.SetGlobalMaxInFlight(2); err != nil {
		t.Fatal(err)
	}
	c.finish(t, blocker)
	checkUse(t, ex, 1, 1) // light started; heavy waits
	if s := c.waitStarted(t, 1); s[0] != "light" {
		t.Fatalf("started %v", s)
	}
	other := c.submit(t, ex, "other", "other", 1) // starts at once
	checkUse(t, ex, 2, 1)
	c.waitStarted(t, 1)
	_, err := executor.Submit(ex, bg, executor.Task[int]{Group: "x", Weight: 3, Fn: func(context.Context) (int, error) { return 0, nil }})
	var rej *executor.RejectedError
	if !errors.As(err, &rej) || !errors.Is(err, executor.ErrTooHeavy) || rej.Limit != executor.LimitGlobalInFlight || rej.Max != 2 {
		t.Fatalf("heavier than the new limit: err = %v", err)
	}
	if isDone(heavy) {
		t.Fatal("the heavy waiting task was dropped")
	}

	c.finish(t, light)
	c.finish(t, other)
	if err := ex.SetGlobalMaxInFlight(3); err != nil {
		t.Fatal(err)
	}
	checkUse(t, ex, 3, 0) // started before the call returned
	c.waitStarted(t, 1)
	c.finish(t, heavy)
	checkUse(t, ex, 0, 0)
}

func TestSetGroupLimitsBulkheadDrains(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(4), policy.WithDefaultMaxConcurrency(1)})
	c := newCrew()
	var hs []*executor.Handle[string]
	for i := range 4 {
		hs = append(hs, c.submit(t, ex, "g", fmt.Sprint("t", i), 1))
	}
	c.waitStarted(t, 1)
	checkGroupUse(t, ex, "g", 1, 3, 4)

	if err := ex.SetGroupLimits("g", limits(2, 1, policy.Unlimited, 1)); err != nil {
		t.Fatal(err)
	}
	refused := func(used int) {
		t.Helper()
		h, err := executor.Submit(ex, bg, executor.Task[int]{Group: "g", Fn: func(context.Context) (int, error) { return 0, nil }})
		var rej *executor.RejectedError
		if !errors.As(err, &rej) || rej.Limit != executor.LimitGroupInFlight || rej.Used != used || rej.Max != 2 {
			t.Fatalf("Submit over the lowered bulkhead: err = %v, want group in-flight, used %d of 2", err, used)
		}
		if r := wait(t, h); r.Status != executor.Rejected {
			t.Fatalf("refused task: %+v", r)
		}
	}
	refused(4)
	if s := groupStats(t, ex, "g"); s.MaxInFlight != 2 {
		t.Fatalf("stats %+v", s)
	}
	checkGroupUse(t, ex, "g", 1, 3, 4) // waiting tasks kept
	c.finish(t, hs[0])
	checkGroupUse(t, ex, "g", 1, 2, 3) // the bulkhead does not hold back starts
	refused(3)
	c.finish(t, hs[1])
	refused(2)
	c.finish(t, hs[2])
	checkGroupUse(t, ex, "g", 1, 0, 1)
	hs = append(hs, c.submit(t, ex, "g", "late", 1)) // under the limit: admitted
	checkGroupUse(t, ex, "g", 1, 1, 2)
	c.waitStarted(t, 3)
	c.finish(t, hs[3])
	c.waitStarted(t, 1)
	c.finish(t, hs[4])
	checkGroupUse(t, ex, "g", 0, 0, 0)
	if s := groupStats(t, ex, "g"); s.Succeeded != 5 || s.Rejected != 3 {
		t.Errorf("counts %+v", s.TaskCounts)
	}
}

func TestSetGroupLimitsConcurrencyDrains(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(3)})
	c := newCrew()
	var hs []*executor.Handle[string]
	for i := range 6 {
		hs = append(hs, c.submit(t, ex, "g", fmt.Sprint("t", i), 1))
	}
	c.waitStarted(t, 3)
	checkGroupUse(t, ex, "g", 3, 3, 6)

	if err := ex.SetGroupLimits("g", limits(1024, 1, policy.Unlimited, 1)); err != nil {
		t.Fatal(err)
	}
	if s := groupStats(t, ex, "g"); s.MaxConcurrency != 1 {
		t.Fatalf("stats %+v", s)
	}
	c.finish(t, hs[0])
	checkGroupUse(t, ex, "g", 2, 3, 5)
	c.finish(t, hs[1])
	checkGroupUse(t, ex, "g", 1, 3, 4)
	c.finish(t, hs[2])
	checkGroupUse(t, ex, "g", 1, 2, 3) // under: t3 starts
	if s := c.waitStarted(t, 1); s[0] != "t3" {
		t.Fatalf("started %v", s)
	}

	if err := ex.SetGroupLimits("g", limits(1024, 3, policy.Unlimited, 1)); err != nil {
		t.Fatal(err)
	}
	checkGroupUse(t, ex, "g", 3, 0, 3) // raised: started before the call returned
	c.waitStarted(t, 2)
	for _, h := range hs[3:] {
		c.finish(t, h)
	}
	checkGroupUse(t, ex, "g", 0, 0, 0)
}

func TestSetGroupLimitsQueueThreshold(t *testing.T) {
	for _, rp := range []policy.RejectionPolicy{policy.Abort, policy.DiscardOldest} {
		t.Run(rp.String(), func(t *testing.T) {
			ex := newExec(t, []policy.Option{policy.WithDefaultQueueThreshold(4), policy.WithRejectionPolicy(rp)})
			c := newCrew()
			var hs []*executor.Handle[string]
			for i := range 5 {
				hs = append(hs, c.submit(t, ex, "g", fmt.Sprint("t", i), 1))
			}
			c.waitStarted(t, 1)
			checkGroupUse(t, ex, "g", 1, 4, 5)
			if err := ex.SetGroupLimits("g", limits(1024, 1, 1, 1)); err != nil {
				t.Fatal(err)
			}
			refused := func(waiting int) {
				t.Helper()
				h, err := executor.Submit(ex, bg, executor.Task[int]{Group: "g", Fn: func(context.Context) (int, error) { return 0, nil }})
				r := wait(t, h)
				var rej *executor.RejectedError
				if r.Status != executor.Rejected || !errors.As(r.Err, &rej) || rej.Limit != executor.LimitGroupQueue ||
					rej.Used != waiting || rej.Max != 1 || errors.Is(r.Err, executor.ErrDisplaced) {
					t.Fatalf("Submit over the lowered threshold: %+v (err %v)", r, err)
				}
				if (err == nil) != (rp == policy.DiscardOldest) { // DiscardOldest refuses as Discard does
					t.Fatalf("Submit returned %v", err)
				}
			}
			refused(4)
			checkGroupUse(t, ex, "g", 1, 4, 5) // nothing displaced
			rejected := 1
			for i := range 4 {
				c.finish(t, hs[i])
				c.waitStarted(t, 1)
				// Over the threshold, every policy refuses. At it, the
				// queue is merely full: DiscardOldest would displace.
				if waiting := 3 - i; waiting > 1 || (waiting == 1 && rp == policy.Abort) {
					refused(waiting)
					rejected++
				}
			}
			checkGroupUse(t, ex, "g", 1, 0, 1)
			hs = append(hs, c.submit(t, ex, "g", "late", 1)) // under the threshold: admitted
			checkGroupUse(t, ex, "g", 1, 1, 2)
			for _, h := range hs[4:] {
				c.finish(t, h)
				if h.ID() == "t4" {
					c.waitStarted(t, 1)
				}
			}
			checkGroupUse(t, ex, "g", 0, 0, 0)
			if s := groupStats(t, ex, "g"); s.Succeeded != 6 || s.Rejected != uint64(rejected) {
				t.Errorf("counts %+v", s.TaskCounts)
			}
		})
	}
}

// TestSetGroupLimitsShareTakesEffect: with one global permit and two deep
// backlogs, raising a group's share changes the order of starts at once.
func TestSetGroupLimitsShareTakesEffect(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithGlobalMaxInFlight(1), policy.WithDefaultMaxConcurrency(2)})
	release := hold(t, ex, 1)
	var log startLog
	var hs []*executor.Handle[int]
	for range 40 {
		for _, grp := range []string{"a", "b"} {
			hs = append(hs, submit(t, ex, executor.Task[int]{Group: grp, Fn: log.fn(grp, 1)}))
		}
	}
	if err := ex.SetGroupLimits("a", limits(1024, 2, policy.Unlimited, 3)); err != nil {
		t.Fatal(err)
	}
	if s := groupStats(t, ex, "a"); s.Share != 3 {
		t.Fatalf("stats %+v", s)
	}
	release()
	for _, h := range hs {
		wait(t, h)
	}
	if got := permits(log.snapshot()[:40]); got["a"] < 28 || got["a"] > 32 {
		t.Errorf("first 40 starts: %v, want a:b about 3:1", got)
	}
}

// TestSetGroupLimitsOutlivesGroupState: limits set before the group exists
// apply when it is created, survive idle reclamation and EvictGroup, and
// replace the policy's (whose resolver is not called) until
// ResetGroupLimits.
func TestSetGroupLimitsOutlivesGroupState(t *testing.T) {
	var calls atomic.Int64
	ex := newExec(t, []policy.Option{
		policy.WithDefaultMaxConcurrency(1),
		policy.WithMaxConcurrencyResolver(func(string) (int, bool) { calls.Add(1); return 2, true }),
	}, executor.WithMaxIdleGroups(0))
	want := limits(7, 3, 5, 2)
	if err := ex.SetGroupLimits("g", want); err != nil {
		t.Fatal(err)
	}
	if _, ok := ex.GroupStats("g"); ok {
		t.Fatal("SetGroupLimits created the group's state")
	}
	fromStats := func(s executor.GroupStats) policy.GroupLimits {
		return limits(s.MaxInFlight, s.MaxConcurrency, s.QueueThreshold, s.Share)
	}
	use := func(want policy.GroupLimits) {
		t.Helper()
		c := newCrew()
		h := c.submit(t, ex, "g", "t", 1)
		if got := fromStats(groupStats(t, ex, "g")); got != want {
			t.Fatalf("limits %+v, want %+v", got, want)
		}
		c.finish(t, h)
		if _, ok := ex.GroupStats("g"); ok {
			t.Fatal("idle group not reclaimed")
		}
	}
	use(want)
	use(want) // after idle reclamation
	ex.EvictGroup("g")
	use(want) // after eviction
	if n := calls.Load(); n != 0 {
		t.Fatalf("resolver called %d times for a group with limits set", n)
	}

	// Reset on a live group applies the policy's limits at once.
	c := newCrew()
	h := c.submit(t, ex, "g", "t", 1)
	if err := ex.ResetGroupLimits("g"); err != nil {
		t.Fatal(err)
	}
	policyLimits := limits(policy.DefaultMaxInFlight, 2, policy.Unlimited, 1)
	if got := fromStats(groupStats(t, ex, "g")); got != policyLimits || calls.Load() != 1 {
		t.Fatalf("after reset: limits %+v, resolver calls %d", got, calls.Load())
	}
	c.finish(t, h)
	use(policyLimits) // recreated from the policy
	if err := ex.ResetGroupLimits("g"); err != nil || calls.Load() != 2 {
		t.Fatalf("reset without limits set: %v, resolver calls %d (want no call)", err, calls.Load())
	}
}

// TestResetGroupLimitsKeepsHeavierWaitingTask: a task admitted while a
// raised concurrency limit let it in, and heavier than the policy's, keeps
// waiting after ResetGroupLimits (it is neither dropped nor refused), holds
// its group's queue without delaying other groups, and starts when the
// limit is raised again; a cancel ends its wait.
func TestResetGroupLimitsKeepsHeavierWaitingTask(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)})
	if err := ex.SetGroupLimits("g", limits(1024, 4, policy.Unlimited, 1)); err != nil {
		t.Fatal(err)
	}
	c := newCrew()
	blocker := c.submit(t, ex, "g", "blocker", 2)
	c.waitStarted(t, 1)
	heavy := c.submit(t, ex, "g", "heavy", 3) // 2+3 > 4: waits
	checkGroupUse(t, ex, "g", 2, 1, 5)

	if err := ex.ResetGroupLimits("g"); err != nil {
		t.Fatal(err)
	}
	if s := groupStats(t, ex, "g"); s.MaxConcurrency != 1 {
		t.Fatalf("after reset: concurrency limit %d, want the policy's 1", s.MaxConcurrency)
	}
	c.finish(t, blocker)
	checkGroupUse(t, ex, "g", 0, 1, 3) // heavy (3 > 1) keeps waiting
	behind := c.submit(t, ex, "g", "behind", 1)
	checkGroupUse(t, ex, "g", 0, 2, 4) // FIFO: queued behind heavy
	other := c.submit(t, ex, "other", "other", 1)
	if s := c.waitStarted(t, 1); s[0] != "other" {
		t.Fatalf("started %v, want other", s)
	}
	c.finish(t, other)
	if isDone(heavy) || isDone(behind) {
		t.Fatal("a waiting task of g completed")
	}

	if err := ex.SetGroupLimits("g", limits(1024, 3, policy.Unlimited, 1)); err != nil {
		t.Fatal(err)
	}
	checkGroupUse(t, ex, "g", 3, 1, 4) // heavy started before the call returned
	if s := c.waitStarted(t, 1); s[0] != "heavy" {
		t.Fatalf("started %v, want heavy", s)
	}
	c.finish(t, heavy)
	c.waitStarted(t, 1)
	c.finish(t, behind)

	// The same wait, ended by a cancel.
	if err := ex.SetGroupLimits("g", limits(1024, 4, policy.Unlimited, 1)); err != nil {
		t.Fatal(err)
	}
	blocker = c.submit(t, ex, "g", "blocker2", 2)
	c.waitStarted(t, 1)
	heavy = c.submit(t, ex, "g", "heavy2", 3)
	if err := ex.ResetGroupLimits("g"); err != nil {
		t.Fatal(err)
	}
	c.finish(t, blocker)
	checkGroupUse(t, ex, "g", 0, 1, 3)
	if !heavy.Cancel() {
		t.Fatal("Cancel of a waiting task reported false")
	}
	if r := wait(t, heavy); r.Status != executor.Cancelled {
		t.Fatalf("cancelled heavy task: %+v", r)
	}
	checkGroupUse(t, ex, "g", 0, 0, 0)
}

func TestSetLimitsInvalid(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithGlobalMaxInFlight(8), policy.WithDefaultMaxConcurrency(2)})
	c := newCrew()
	h := c.submit(t, ex, "g", "t", 1)
	before, beforeG := ex.Stats(), groupStats(t, ex, "g")
	valid := limits(8, 2, 4, 1)
	with := func(edit func(*policy.GroupLimits)) policy.GroupLimits {
		l := valid
		edit(&l)
		return l
	}
	tests := []struct {
		name   string
		set    func() error
		option string
		value  any
	}{
		{"global zero", func() error { return ex.SetGlobalMaxInFlight(0) }, "GlobalMaxInFlight", 0},
		{"global negative", func() error { return ex.SetGlobalMaxInFlight(-5) }, "GlobalMaxInFlight", -5},
		{"in-flight zero", func() error { return ex.SetGroupLimits("g", with(func(l *policy.GroupLimits) { l.MaxInFlight = 0 })) }, "GroupLimits.MaxInFlight", 0},
		{"concurrency negative", func() error {
			return ex.SetGroupLimits("g", with(func(l *policy.GroupLimits) { l.MaxConcurrency = -1 }))
		}, "GroupLimits.MaxConcurrency", -1},
		{"threshold negative", func() error {
			return ex.SetGroupLimits("g", with(func(l *policy.GroupLimits) { l.QueueThreshold = -2 }))
		}, "GroupLimits.QueueThreshold", -2},
		{"share zero", func() error { return ex.SetGroupLimits("g", with(func(l *policy.GroupLimits) { l.Share = 0 })) }, "GroupLimits.Share", 0},
		{"zero value", func() error { return ex.SetGroupLimits("g", policy.GroupLimits{}) }, "GroupLimits.MaxInFlight", 0},
		{"not-yet-created group", func() error { return ex.SetGroupLimits("fresh", with(func(l *policy.GroupLimits) { l.Share = -1 })) }, "GroupLimits.Share", -1},
		{"empty group key", func() error { return ex.SetGroupLimits("", valid) }, "group", `""`},
		{"reset, empty group key", func() error { return ex.ResetGroupLimits("") }, "group", `""`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.set()
			var oe *policy.OptionError
			if !errors.Is(err, policy.ErrInvalidOption) || !errors.As(err, &oe) {
				t.Fatalf("err = %v, want a *policy.OptionError matching policy.ErrInvalidOption", err)
			}
			if oe.Option != tt.option || oe.Value != tt.value {
				t.Errorf("err names %s(%v), want %s(%v)", oe.Option, oe.Value, tt.option, tt.value)
			}
			if msg := err.Error(); !strings.Contains(msg, tt.option) || !strings.Contains(msg, fmt.Sprint(tt.value)) {
				t.Errorf("message %q does not name %s and %v", msg, tt.option, tt.value)
			}
		})
	}
	// Nothing changed.
	if s := ex.Stats(); s.GlobalMaxInFlight != before.GlobalMaxInFlight || s.Running != before.Running {
		t.Errorf("stats %+v, before %+v", s, before)
	}
	if s := groupStats(t, ex, "g"); s != beforeG {
		t.Errorf("group stats %+v, before %+v", s, beforeG)
	}
	c.finish(t, h)
	wait(t, submit(t, ex, executor.Task[int]{Group: "fresh", Fn: func(context.Context) (int, error) { return 0, nil }}))
	if s := groupStats(t, ex, "fresh"); s.Share != 1 || s.MaxConcurrency != 2 {
		t.Errorf("fresh group created with %+v, want the policy's limits", s)
	}
}

func TestSetLimitsAfterShutdown(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithGlobalMaxInFlight(8)})
	wait(t, submit(t, ex, executor.Task[int]{Group: "g", Fn: func(context.Context) (int, error) { return 0, nil }}))
	if err := ex.SetGroupLimits("g", limits(4, 2, 1, 1)); err != nil { // an override to reset below
		t.Fatal(err)
	}
	before, beforeG := ex.Stats(), groupStats(t, ex, "g")
	check := func(when string) {
		t.Helper()
		for name, err := range map[string]error{
			"SetGlobalMaxInFlight": ex.SetGlobalMaxInFlight(2),
			"SetGroupLimits":       ex.SetGroupLimits("g", limits(9, 9, 9, 9)),
			"SetGroupLimits (new)": ex.SetGroupLimits("new", limits(9, 9, 9, 9)),
			"ResetGroupLimits":     ex.ResetGroupLimits("g"),
		} {
			if !errors.Is(err, executor.ErrShutdown) {
				t.Errorf("%s: %s = %v, want ErrShutdown", when, name, err)
			}
		}
		if s := ex.Stats(); s.GlobalMaxInFlight != before.GlobalMaxInFlight {
			t.Errorf("%s: global limit %d", when, s.GlobalMaxInFlight)
		}
		if s := groupStats(t, ex, "g"); s != beforeG {
			t.Errorf("%s: group stats %+v, before %+v", when, s, beforeG)
		}
	}
	if err := ex.Shutdown(bg); err != nil {
		t.Fatal(err)
	}
	check("after Shutdown")
	ex.Close()
	check("after Close")
}

// TestSetGroupLimitsOnShutDownGroup: a group shut down with ShutdownGroup
// still refuses new tasks, but raising its concurrency starts its waiting
// tasks, so it drains sooner.
func TestSetGroupLimitsOnShutDownGroup(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)})
	c := newCrew()
	var hs []*executor.Handle[string]
	for i := range 3 {
		hs = append(hs, c.submit(t, ex, "g", fmt.Sprint("t", i), 1))
	}
	c.waitStarted(t, 1)
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- ex.ShutdownGroup(ctx, "g") }()
	await(t, "ShutdownGroup marked the group shut down", func() bool { return groupStats(t, ex, "g").Shutdown })
	if _, err := executor.Submit(ex, bg, executor.Task[int]{Group: "g", Fn: func(context.Context) (int, error) { return 0, nil }}); !errors.Is(err, executor.ErrGroupShutdown) {
		t.Fatalf("Submit to a shut-down group: %v", err)
	}
	if err := ex.SetGroupLimits("g", limits(1024, 3, policy.Unlimited, 1)); err != nil {
		t.Fatal(err)
	}
	checkGroupUse(t, ex, "g", 3, 0, 3)
	c.waitStarted(t, 2)
	for _, h := range hs {
		close(c.release[h.ID()])
	}
	if err := recv(t, done, "ShutdownGroup returned once the group drained"); err != nil {
		t.Fatalf("ShutdownGroup: %v", err)
	}
	for _, h := range hs {
		if r := wait(t, h); r.Status != executor.Success {
			t.Errorf("%s: %+v", h.ID(), r)
		}
	}
}

// TestResetGroupLimitsRacesGroupCreation: a group whose state is made
// while ResetGroupLimits runs has the policy's limits once the reset has
// returned, not those of the override it dropped: made before the reset,
// the reset finds it; made after, it asks the policy.
func TestResetGroupLimitsRacesGroupCreation(t *testing.T) {
	atProcs(t, func(t *testing.T) {
		ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(2)})
		over := limits(policy.Unlimited, 3, policy.Unlimited, 1)
		nop := func(context.Context) error { return nil }
		for round := range 2000 {
			key := fmt.Sprint("k", round)
			if err := ex.SetGroupLimits(key, over); err != nil {
				t.Fatal(err)
			}
			// Goroutines making the group race the reset.
			start := make(chan struct{})
			var wg sync.WaitGroup
			for range 4 {
				wg.Go(func() {
					<-start
					ex.Go(bg, key, nop)
				})
			}
			close(start)
			for range round % 4 {
				runtime.Gosched()
			}
			if err := ex.ResetGroupLimits(key); err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			// No override is in force: whenever k's state was made, before
			// the reset or after, it has the policy's limits.
			if s, ok := ex.GroupStats(key); ok && s.MaxConcurrency != 2 {
				t.Fatalf("round %d: after ResetGroupLimits(%q) returned, the group has MaxConcurrency %d, want the policy's 2", round, key, s.MaxConcurrency)
			}
			ex.EvictGroup(key)
		}
	})
}
