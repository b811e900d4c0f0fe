package redislimit_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/groupexec/groupexec/cluster/redislimit"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// Every running task holds as many slots as its weight, within 0..limit-1,
// and no two tasks running at once hold one slot, across holders.
func TestTasksHoldDistinctSlots(t *testing.T) {
	addr := startRedis(t)
	const limit = 5
	var mu sync.Mutex
	held := map[int]bool{}
	var problem error
	var hs []*executor.Handle[int]
	for range 2 {
		h := newHolder(t, addr)
		ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(limit)}, h.Groups(limit), nil)
		for i := range 40 {
			w := 1 + i%2
			hd, err := executor.Submit(ex, bg, executor.Task[int]{Group: "g", Weight: w, Fn: func(ctx context.Context) (int, error) {
				f, ok := redislimit.Fencing(ctx)
				mu.Lock()
				switch {
				case !ok || f.Token <= 0:
					problem = errors.New("no fence in a task")
				case len(f.Slots) != w:
					problem = errors.New("a task's slots do not match its weight")
				}
				for _, s := range f.Slots {
					if s < 0 || s >= limit || held[s] {
						problem = errors.New("a slot out of range or held twice")
					}
					held[s] = true
				}
				mu.Unlock()
				time.Sleep(time.Millisecond)
				mu.Lock()
				for _, s := range f.Slots {
					delete(held, s)
				}
				mu.Unlock()
				return 0, nil
			}})
			if err != nil {
				t.Fatal(err)
			}
			hs = append(hs, hd)
		}
	}
	for _, hd := range hs {
		if r, err := hd.Wait(ctxTimeout(t, 30*time.Second)); err != nil || r.Status != executor.Success {
			t.Fatalf("task: %v %v %v", r.Status, r.Err, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if problem != nil {
		t.Fatal(problem)
	}
}

// Valid is true in a task on a live lease, with ValidUntil in the future
// and moved later by renewals; false outside a task, on a fallback permit,
// and once the lease is lost (here: renewals cut, as behind a partition).
func TestValidFollowsTheLease(t *testing.T) {
	addr := startRedis(t)
	h := newHolder(t, addr)
	l := h.Groups(1)
	n := attach(t, l)
	if redislimit.Valid(bg) {
		t.Fatal("Valid outside a task")
	}
	p := acquire(t, l, n, "g", 1, 5*time.Second)
	defer p.Release()
	causes := make(chan error, 1)
	ctx := p.Bind(bg, func(err error) { causes <- err })
	until, ok := redislimit.ValidUntil(ctx)
	if !ok || !redislimit.Valid(ctx) || !until.After(time.Now()) {
		t.Fatalf("a live lease: Valid %v, ValidUntil %v %v", redislimit.Valid(ctx), until, ok)
	}
	eventually(t, "a renewal moves ValidUntil later", 5*time.Second, func() bool {
		u, ok := redislimit.ValidUntil(ctx)
		return ok && u.After(until)
	})
	redislimit.SetRenewHook(h, func() error { return errors.New("renewals cut") })
	select {
	case <-causes:
	case <-time.After(time.Minute):
		t.Fatal("the lease was never lost")
	}
	if redislimit.Valid(ctx) {
		t.Fatal("Valid after the lease was lost")
	}
	if _, ok := redislimit.ValidUntil(ctx); ok {
		t.Fatal("ValidUntil after the lease was lost")
	}
	fctx := redislimit.FallbackPermit(h, "g").Bind(bg, func(error) {})
	if redislimit.Valid(fctx) {
		t.Fatal("Valid on a fallback permit")
	}
	if _, ok := redislimit.Fencing(fctx); ok {
		t.Fatal("a fence on a fallback permit")
	}
}

// A slot leased again after its lease was lost comes with a greater token:
// a holder cut off from Redis loses its slots, another holder leases them,
// and each of its slots' tokens is greater than the lost lease's.
func TestReleasedSlotComesWithAGreaterToken(t *testing.T) {
	addr := startRedis(t)
	const limit = 3
	a, b := newHolder(t, addr), newHolder(t, addr)
	la, lb := a.Groups(limit), b.Groups(limit)
	na, nb := attach(t, la), attach(t, lb)
	pa := acquire(t, la, na, "g", limit, 5*time.Second)
	fa, _ := redislimit.Fencing(pa.Bind(bg, func(error) {}))
	redislimit.SetRenewHook(a, func() error { return errors.New("renewals cut") })
	pb := acquire(t, lb, nb, "g", limit, 3*testTTL)
	defer pb.Release()
	fb, _ := redislimit.Fencing(pb.Bind(bg, func(error) {}))
	pa.Release()
	if !slices.Equal(slices.Sorted(slices.Values(fa.Slots)), slices.Sorted(slices.Values(fb.Slots))) {
		t.Fatalf("slots %v then %v: the whole limit both times", fa.Slots, fb.Slots)
	}
	if fb.Token <= fa.Token {
		t.Fatalf("token %d for the slots leased again, not greater than the lost lease's %d", fb.Token, fa.Token)
	}
}

// Valid reads the monotonic clock, not the holder's state alone: once the
// local validity is over it is false, before the holder has processed the
// loss (here its lock is held, so that neither a renewal nor the lease's
// timer can run, as in a process paused and just resumed).
func TestValidEndsWithTheLocalValidity(t *testing.T) {
	addr := startRedis(t)
	h := newHolder(t, addr)
	l := h.Groups(1)
	n := attach(t, l)
	p := acquire(t, l, n, "g", 1, 5*time.Second)
	defer p.Release()
	causes := make(chan error, 1)
	ctx := p.Bind(bg, func(err error) { causes <- err })
	unlock := redislimit.HoldLock(h)
	until, ok := redislimit.ValidUntil(ctx)
	if !ok {
		unlock()
		t.Fatal("no validity on a live lease")
	}
	time.Sleep(time.Until(until) + time.Millisecond) // the validity runs out
	valid := redislimit.Valid(ctx)
	var cancelled bool
	select {
	case <-causes:
		cancelled = true
	default:
	}
	unlock()
	if cancelled {
		t.Fatal("the lease was lost with the holder's lock held: the test tested nothing")
	}
	if valid {
		t.Fatal("Valid past the lease's local validity")
	}
	select {
	case <-causes: // once the holder runs again, the loss cancels the task
	case <-time.After(time.Minute):
		t.Fatal("the lease was never lost")
	}
}

// A task submitted with its parent task's context (detached from its
// cancellation, as for work that outlives the parent) carries the parent's
// permits among its context's values: Valid and ValidUntil must speak of
// the child's own permits, not of the parent's, which are given back when
// the parent ends.
func TestSubtaskSeesOnlyItsOwnPermits(t *testing.T) {
	addr := startRedis(t)
	h := newHolder(t, addr)
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(2)}, h.Groups(2), h.Global(4))
	run, checked := make(chan struct{}), make(chan struct{})
	var valid bool
	var child *executor.Handle[int]
	hd, err := executor.Submit(ex, bg, executor.Task[int]{Group: "a", Fn: func(ctx context.Context) (int, error) {
		var err error
		child, err = executor.Submit(ex, context.WithoutCancel(ctx), executor.Task[int]{Group: "b", Fn: func(ctx context.Context) (int, error) {
			<-run
			valid = redislimit.Valid(ctx)
			close(checked)
			return 0, nil
		}})
		return 0, err
	}})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := hd.Wait(ctxTimeout(t, 30*time.Second)); err != nil || r.Status != executor.Success {
		t.Fatalf("parent task: %v %v %v", r.Status, r.Err, err)
	}
	// The parent's permits are given back; the child's two (global and
	// group) are in use.
	eventually(t, "the child runs alone", 10*time.Second, func() bool { return h.Stats().PermitsInUse == 2 })
	close(run)
	<-checked
	if r, err := child.Wait(ctxTimeout(t, 30*time.Second)); err != nil || r.Status != executor.Success {
		t.Fatalf("child task: %v %v %v", r.Status, r.Err, err)
	}
	if !valid {
		t.Fatal("Valid is false in a running task whose leases are live: it read its parent's permits, given back")
	}
}

// A task with no cluster permit of its own (run by an executor without a
// cluster limiter) that was given the context of a task with permits,
// as it is or detached from its cancellation, finds those permits among
// its context's values. They are not its own: Valid, ValidUntil and
// Fencing must answer for it as outside any task run under a cluster
// permit, even while the task whose permits they are runs.
func TestTaskWithoutPermitsSeesNoOtherTasks(t *testing.T) {
	addr := startRedis(t)
	h := newHolder(t, addr)
	ex := newExec(t, nil, h.Groups(1), h.Global(1))
	plain := newExec(t, nil, nil, nil) // no cluster limiter
	type seen struct {
		valid, until, fenced bool
	}
	look := func(ctx context.Context) seen {
		_, until := redislimit.ValidUntil(ctx)
		_, fenced := redislimit.Fencing(ctx)
		return seen{redislimit.Valid(ctx), until, fenced}
	}
	for _, tc := range []struct {
		name  string
		run   func(ctx context.Context, fn func(context.Context)) error // runs fn as a task of plain
		ctxOf func(ctx context.Context) context.Context
	}{
		{"Submit with the context", submitTo(plain), func(ctx context.Context) context.Context { return ctx }},
		{"Submit detached", submitTo(plain), context.WithoutCancel},
		{"Do with the context", doIn(plain), func(ctx context.Context) context.Context { return ctx }},
		{"Do detached", doIn(plain), context.WithoutCancel},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var own, child seen
			hd, err := executor.Submit(ex, bg, executor.Task[int]{Group: "a", Fn: func(ctx context.Context) (int, error) {
				own = look(ctx)
				// The task's permits are held while the other runs.
				return 0, tc.run(tc.ctxOf(ctx), func(ctx context.Context) { child = look(ctx) })
			}})
			if err != nil {
				t.Fatal(err)
			}
			if r, err := hd.Wait(ctxTimeout(t, 30*time.Second)); err != nil || r.Status != executor.Success {
				t.Fatalf("task: %v %v %v", r.Status, r.Err, err)
			}
			if own != (seen{true, true, true}) {
				t.Fatalf("the task with permits sees %+v of its own, want all true", own)
			}
			if child != (seen{}) {
				t.Fatalf("a task without permits sees the other task's: Valid, ValidUntil, Fencing = %+v, want all false", child)
			}
		})
	}
}

// submitTo runs fn as a task of ex submitted with ctx, and waits for it.
func submitTo(ex *executor.Executor) func(ctx context.Context, fn func(context.Context)) error {
	return func(ctx context.Context, fn func(context.Context)) error {
		hd, err := executor.Submit(ex, ctx, executor.Task[int]{Group: "a", Fn: func(ctx context.Context) (int, error) {
			fn(ctx)
			return 0, nil
		}})
		if err != nil {
			return err
		}
		r, err := hd.Wait(bg)
		if err == nil {
			err = r.Err
		}
		return err
	}
}

// doIn runs fn with ex.Do, given ctx.
func doIn(ex *executor.Executor) func(ctx context.Context, fn func(context.Context)) error {
	return func(ctx context.Context, fn func(context.Context)) error {
		return ex.Do(ctx, "a", func(ctx context.Context) error {
			fn(ctx)
			return nil
		})
	}
}
