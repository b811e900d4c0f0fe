package bulkhead_test

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/bulkhead"
)

// gate is a Listener that holds the goroutine of an acquire that has just
// queued (EventRequestQueued is delivered on it) until the test lets it go:
// the test acts between the queueing and the wait.
type gate struct {
	queued  chan struct{}
	proceed chan struct{}
}

func newGate() *gate { return &gate{queued: make(chan struct{}), proceed: make(chan struct{})} }

func (g *gate) OnEvent(e bulkhead.Event) {
	if e.Code == bulkhead.EventRequestQueued {
		g.queued <- struct{}{}
		<-g.proceed
	}
}

// An acquire whose context ends before any permit is free fails with the
// context's error, even when a permit comes free before it looks, and the
// permit goes to the next in line. Each iteration frees the permit for a
// waiter whose context has already ended before the waiter looks at
// either: a waiter that took whichever came first would return the permit
// in half of them.
func TestAcquireCancelledBeforeGrantFails(t *testing.T) {
	g := newGate()
	b := newBH(t, 1, bulkhead.WithQueue(4, time.Hour), bulkhead.WithListener(g))
	for i := range 64 {
		held := acquire(t, b, 1)
		ctx, cancel := context.WithCancel(bg)
		w1 := acquireAsync(ctx, b, 1)
		<-g.queued
		w2 := acquireAsync(bg, b, 1)
		<-g.queued
		cancel()
		release(t, b, held) // w1's context has ended: the permit goes to w2
		g.proceed <- struct{}{}
		g.proceed <- struct{}{}
		if p, err := w1.wait(t); !errors.Is(err, context.Canceled) {
			t.Fatalf("iteration %d: Acquire returned (permit %d, %v) although its context ended before any permit was free", i, p.ID(), err)
		}
		p2, err := w2.wait(t)
		if err != nil {
			t.Fatalf("iteration %d: the next waiter: %v", i, err)
		}
		release(t, b, p2)
		if s := stateOf(b); s.inFlight != 0 || s.queued != 0 {
			t.Fatalf("iteration %d: %+v", i, s)
		}
		if err := b.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
	}
}

// The rejection of a waiter that gives back the permit it was issued as its
// context ended names that permit, so that an observer counting requests
// can tell it from the rejection of a request that never had one (whose
// PermitID is 0), and not count the request twice.
func TestGivenBackPermitRejectionNamesThePermit(t *testing.T) {
	g := newGate()
	b := newBH(t, 1, bulkhead.WithQueue(4, time.Hour), bulkhead.WithListener(g), bulkhead.WithEventLog(64))
	w1, heldID := grantAsItGivesUp(t, b, g)
	if _, err := w1.wait(t); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire: %v, want context.Canceled", err)
	}
	var issued uint64
	var rejected []bulkhead.Event
	for _, e := range b.Events() {
		switch {
		case e.Code == bulkhead.EventPermitAcquired && e.PermitID != heldID:
			issued = e.PermitID
		case e.Code == bulkhead.EventRequestRejected:
			rejected = append(rejected, e)
		}
	}
	if issued == 0 || len(rejected) != 1 || rejected[0].PermitID != issued || rejected[0].Detail != context.Canceled.Error() {
		t.Fatalf("permit %d issued to the waiter; rejections %+v, want one naming it", issued, rejected)
	}

	// A waiter that gives up before its turn had no permit.
	held := acquire(t, b, 1)
	defer release(t, b, held)
	ctx, cancel := context.WithCancel(bg)
	w2 := acquireAsync(ctx, b, 1)
	<-g.queued
	g.proceed <- struct{}{}
	cancel()
	if _, err := w2.wait(t); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire: %v, want context.Canceled", err)
	}
	es := b.Events()
	if e := es[len(es)-1]; e.Code != bulkhead.EventRequestRejected || e.PermitID != 0 {
		t.Fatalf("last event %+v, want a rejection with no permit", e)
	}
}

// Submit admits through Acquire: a Submit whose context ends before a
// permit is free never runs its function.
func TestSubmitCancelledBeforeGrantNeverRuns(t *testing.T) {
	g := newGate()
	b := newBH(t, 1, bulkhead.WithQueue(4, time.Hour), bulkhead.WithListener(g))
	var ran atomic.Int32
	for i := range 64 {
		held := acquire(t, b, 1)
		ctx, cancel := context.WithCancel(bg)
		type submitted struct {
			h   *bulkhead.Handle[int]
			err error
		}
		done := make(chan submitted, 1)
		go func() {
			h, err := bulkhead.Submit(b, ctx, func(context.Context) (int, error) {
				ran.Add(1)
				return 0, nil
			})
			done <- submitted{h, err}
		}()
		<-g.queued
		cancel()
		release(t, b, held)
		g.proceed <- struct{}{}
		s := <-done
		if s.err == nil {
			result(t, s.h)
			t.Fatalf("iteration %d: Submit admitted a function whose context ended before any permit was free (it ran %d times)", i, ran.Load())
		}
		if !errors.Is(s.err, context.Canceled) {
			t.Fatalf("iteration %d: %v", i, s.err)
		}
		if st := stateOf(b); st.inFlight != 0 || st.queued != 0 {
			t.Fatalf("iteration %d: %+v", i, st)
		}
	}
	if n := ran.Load(); n != 0 {
		t.Fatalf("the function ran %d times", n)
	}
}

// grantAsItGivesUp has a request for one permit wait in b, which must have
// one permit and g for a listener, issues it the permit while g holds it at
// its queuing, then ends its context: the request finds both its context
// ended and a permit issued. It returns the request, let go, and the ID of
// the permit that was held until then.
func grantAsItGivesUp(t *testing.T, b *bulkhead.Bulkhead, g *gate) (w *pending, heldID uint64) {
	t.Helper()
	held := acquire(t, b, 1)
	ctx, cancel := context.WithCancel(bg)
	w = acquireAsync(ctx, b, 1)
	<-g.queued
	release(t, b, held) // issues the permit to w
	cancel()
	g.proceed <- struct{}{}
	return w, held.ID()
}

// A permit that comes free while the waiter at the head of the queue has
// given up (its context has ended) goes to the next in line at once: not to
// the one that gave up, to be given back only when its goroutine next runs.
// The gate holds both waiters' goroutines, so neither can act meanwhile.
func TestPermitSkipsWaiterThatGaveUp(t *testing.T) {
	g := newGate()
	b := newBH(t, 1, bulkhead.WithQueue(4, time.Hour), bulkhead.WithListener(g), bulkhead.WithEventLog(64))
	held := acquire(t, b, 1)
	ctx, cancel := context.WithCancel(bg)
	w1 := acquireAsync(ctx, b, 1)
	<-g.queued
	w2 := acquireAsync(bg, b, 1)
	<-g.queued
	cancel()
	release(t, b, held)
	if q := b.QueueDepth(); q != 0 {
		t.Errorf("%d requests wait after the release, want none: the permit went to the request that gave up", q)
	}
	var issued uint64
	var rejected []bulkhead.Event
	for _, e := range b.Events() {
		switch {
		case e.Code == bulkhead.EventPermitAcquired && e.PermitID != held.ID():
			issued = e.PermitID
		case e.Code == bulkhead.EventRequestRejected:
			rejected = append(rejected, e)
		}
	}
	if len(rejected) != 1 || rejected[0].PermitID != 0 || rejected[0].Detail != context.Canceled.Error() {
		t.Errorf("rejections %+v, want one with no permit, for the request that gave up", rejected)
	}
	g.proceed <- struct{}{}
	g.proceed <- struct{}{}
	if _, err := w1.wait(t); !errors.Is(err, context.Canceled) {
		t.Fatalf("the request that gave up: %v, want context.Canceled", err)
	}
	p2, err := w2.wait(t)
	if err != nil {
		t.Fatalf("the next in line: %v", err)
	}
	if p2.ID() != issued {
		t.Errorf("the next in line holds permit %d; permit %d was issued after the release", p2.ID(), issued)
	}
	release(t, b, p2)
	if s := stateOf(b); s.inFlight != 0 || s.queued != 0 {
		t.Fatalf("%+v", s)
	}
	if err := b.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// brokenContext is a context whose Err panics while broken is set, as a
// faulty context of the caller's might.
type brokenContext struct {
	context.Context
	broken atomic.Bool
}

func (c *brokenContext) Err() error {
	if c.broken.Load() {
		panic("brokenContext: Err")
	}
	return c.Context.Err()
}

// The queue reads each waiter's context under the bulkhead's mutex, on the
// goroutine that serves it (here a release): a context's Err that panics
// there must not leave the mutex held, nor fail that goroutine. The waiter
// is served as if its context had not ended.
func TestPanickingContextLeavesNoLockHeld(t *testing.T) {
	b := newBH(t, 1, bulkhead.WithQueue(1, time.Hour))
	held := acquire(t, b, 1)
	ctx := &brokenContext{Context: bg}
	w := queueWith(t, ctx, b, 1)[0]
	ctx.broken.Store(true)
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("Release panicked (%v); the bulkhead's mutex held: %v", r, bulkhead.Locked(b))
			}
		}()
		release(t, b, held)
	}()
	p, err := w.wait(t)
	if err != nil {
		t.Fatalf("the waiter: %v", err)
	}
	release(t, b, p)
	if err := b.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// acquirePanic is the outcome of an Acquire that may panic.
type acquirePanic struct {
	p        bulkhead.Permit
	err      error
	panicked any
}

func acquireRecovering(ctx context.Context, b *bulkhead.Bulkhead) <-chan acquirePanic {
	out := make(chan acquirePanic, 1)
	go func() {
		var r acquirePanic
		defer func() {
			r.panicked = recover()
			out <- r
		}()
		r.p, r.err = b.Acquire(ctx, 1)
	}()
	return out
}

// A waiter's own goroutine reads its context as it wakes, holding nothing:
// a context whose Err panics there makes Acquire panic, but must not leave
// the waiter in the queue, nor keep a permit issued to it, for good. The
// gate holds the waiter's goroutine until its context has ended and
// broken: first with the waiter still queued, then with a permit issued to
// it (the queue reads a panicking Err as a context that has not ended).
func TestPanickingContextInWaitLeavesNothingHeld(t *testing.T) {
	for _, granted := range []bool{false, true} {
		g := newGate()
		b := newBH(t, 1, bulkhead.WithQueue(1, time.Hour), bulkhead.WithListener(g))
		held := acquire(t, b, 1)
		inner, cancel := context.WithCancel(bg)
		ctx := &brokenContext{Context: inner}
		res := acquireRecovering(ctx, b)
		<-g.queued
		ctx.broken.Store(true)
		cancel()
		if granted {
			release(t, b, held)
		}
		g.proceed <- struct{}{}
		r := <-res
		if r.panicked == nil {
			t.Fatalf("granted %v: Acquire returned (permit %d, %v), want the context's panic", granted, r.p.ID(), r.err)
		}
		want := 0
		if !granted {
			want = 1 // held
		}
		if s := stateOf(b); s.inFlight != want || s.queued != 0 {
			t.Fatalf("granted %v: %+v after the Acquire panicked, want %d in flight and none queued", granted, s, want)
		}
		if !granted {
			release(t, b, held)
		}
		release(t, b, acquire(t, b, 1))
		if err := b.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
	}
}

// doneNoErrContext is a faulty context of the caller's whose Done is closed
// (by end) while its Err still reports nil.
type doneNoErrContext struct {
	context.Context
	done chan struct{}
}

func (c *doneNoErrContext) Done() <-chan struct{} { return c.done }
func (c *doneNoErrContext) Err() error            { return nil }

// A waiter whose context's Done closes while its Err reports nil has ended
// all the same: Acquire fails, with an error that matches context.Canceled,
// and holds nothing. Taken at its word, Err's nil would be a rejection
// without an error, whose event's detail panics under the mutex and leaves
// it held; or, for a waiter issued a permit as its Done closed, a nil error
// with the zero Permit, which the caller would take for a grant. The gate
// holds the waiter's goroutine until its Done is closed: first with the
// waiter still queued, then with a permit issued to it.
func TestDoneWithoutErrEndsTheWait(t *testing.T) {
	for _, granted := range []bool{false, true} {
		g := newGate()
		b := newBH(t, 1, bulkhead.WithQueue(1, time.Hour), bulkhead.WithListener(g))
		held := acquire(t, b, 1)
		ctx := &doneNoErrContext{Context: bg, done: make(chan struct{})}
		res := acquireRecovering(ctx, b)
		<-g.queued
		if granted {
			release(t, b, held)
		}
		close(ctx.done)
		g.proceed <- struct{}{}
		r := <-res
		if r.panicked != nil || !errors.Is(r.err, context.Canceled) {
			t.Fatalf("granted %v: Acquire returned (permit %d, %v) and panicked with %v; want context.Canceled",
				granted, r.p.ID(), r.err, r.panicked)
		}
		if bulkhead.Locked(b) {
			t.Fatalf("granted %v: the bulkhead's mutex is held after the Acquire returned", granted)
		}
		want := 0
		if !granted {
			want = 1 // held
		}
		if s := stateOf(b); s.inFlight != want || s.queued != 0 {
			t.Fatalf("granted %v: %+v after the Acquire failed, want %d in flight and none queued", granted, s, want)
		}
		if !granted {
			release(t, b, held)
		}
		release(t, b, acquire(t, b, 1))
		if err := b.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
	}
}

// exitingContext is a context whose Err exits the goroutine that calls it
// (runtime.Goexit) once exit is set, as a faulty context of the caller's
// might.
type exitingContext struct {
	context.Context
	exit atomic.Bool
}

func (c *exitingContext) Err() error {
	if c.exit.Load() {
		runtime.Goexit()
	}
	return c.Context.Err()
}

// The queue reads each waiter's context under the bulkhead's mutex, on the
// goroutine that serves it (here a release's). A context whose Err exits
// that goroutine cannot be stopped, but must not leave the mutex held: its
// waiter fails with ErrGoexit, and the rest of the queue is served, as the
// goroutine exits.
func TestExitingContextLeavesNoLockHeld(t *testing.T) {
	b := newBH(t, 1, bulkhead.WithQueue(2, time.Hour))
	held := acquire(t, b, 1)
	ctx := &exitingContext{Context: bg}
	w := queueWith(t, ctx, b, 1)[0]
	next := queueWith(t, bg, b, 1)[0]
	ctx.exit.Store(true)
	released := make(chan struct{})
	go func() {
		defer close(released)
		_ = b.Release(held)
	}()
	<-released
	if bulkhead.Locked(b) {
		t.Fatal("the bulkhead's mutex is held after a waiter's context exited the goroutine serving the queue")
	}
	if _, err := w.wait(t); !errors.Is(err, bulkhead.ErrGoexit) {
		t.Fatalf("the waiter whose context exited the goroutine: %v, want ErrGoexit", err)
	}
	p, err := next.wait(t)
	if err != nil {
		t.Fatalf("the next in line: %v", err)
	}
	release(t, b, p)
	if s := stateOf(b); s.inFlight != 0 || s.queued != 0 {
		t.Fatalf("%+v", s)
	}
	if err := b.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}
