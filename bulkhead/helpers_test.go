package bulkhead_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/groupexec/groupexec/bulkhead"
	"github.com/groupexec/groupexec/clock"
)

var (
	t0     = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	bg     = context.Background()
	remote = bulkhead.WithCapability(bg, "remote")
)

func newBH(t testing.TB, limit int, opts ...bulkhead.Option) *bulkhead.Bulkhead {
	t.Helper()
	b, err := bulkhead.New(limit, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func acquire(t testing.TB, b *bulkhead.Bulkhead, n int) bulkhead.Permit {
	t.Helper()
	p, err := b.TryAcquire(remote, n)
	if err != nil {
		t.Fatalf("TryAcquire(%d): %v", n, err)
	}
	return p
}

func release(t testing.TB, b *bulkhead.Bulkhead, p bulkhead.Permit) {
	t.Helper()
	if err := b.Release(p); err != nil {
		t.Fatalf("Release(%d): %v", p.ID(), err)
	}
}

// wantErr checks that err matches the sentinel and carries its code.
func wantErr(t testing.TB, err error, sentinel *bulkhead.Error) {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Fatalf("error %v, want %v", err, sentinel)
	}
	var coded interface{ Code() string }
	if !errors.As(err, &coded) || coded.Code() != sentinel.Code() {
		t.Fatalf("error %v has no code %s", err, sentinel.Code())
	}
}

// state is what a refused request must leave unchanged.
type state struct{ limit, available, inFlight, queued int }

func stateOf(b *bulkhead.Bulkhead) state {
	return state{b.Limit(), b.Available(), b.InFlight(), b.QueueDepth()}
}

// eventually polls cond (state reached by other goroutines) and fails after
// a bound that only a bug exceeds.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// acquireAsync runs Acquire on its own goroutine.
type pending struct {
	done chan struct{}
	p    bulkhead.Permit
	err  error
}

func acquireAsync(ctx context.Context, b *bulkhead.Bulkhead, n int) *pending {
	r := &pending{done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.p, r.err = b.Acquire(ctx, n)
	}()
	return r
}

func (r *pending) wait(t testing.TB) (bulkhead.Permit, error) {
	t.Helper()
	select {
	case <-r.done:
		return r.p, r.err
	case <-time.After(10 * time.Second):
		t.Fatal("Acquire did not return")
		return bulkhead.Permit{}, nil
	}
}

func (r *pending) returned() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// queueWith starts n acquires of weight 1 and waits until they are queued.
func queueWith(t testing.TB, ctx context.Context, b *bulkhead.Bulkhead, n int) []*pending {
	t.Helper()
	var ps []*pending
	for i := range n {
		want := b.QueueDepth() + 1
		ps = append(ps, acquireAsync(ctx, b, 1))
		eventually(t, fmt.Sprintf("request %d to queue", i), func() bool { return b.QueueDepth() == want })
	}
	return ps
}

// armed waits until clk has n timers waiting to fire. A queued request is
// in the queue (QueueDepth counts it) before it arms its timer, holding
// nothing: a test that moved the clock as soon as it saw the request queued
// could move it before the timer is armed, which then fires that much
// later.
func armed(t testing.TB, clk interface{ Pending() int }, n int) {
	t.Helper()
	eventually(t, fmt.Sprintf("%d timers armed", n), func() bool { return clk.Pending() >= n })
}

// stuckClock is a fake clock whose timers never fire: only the bulkhead's
// own checks can expire a waiter.
type stuckClock struct{ *clock.Fake }

func (stuckClock) AfterFunc(time.Duration, func()) clock.Timer { return stuckTimer{} }

type stuckTimer struct{}

func (stuckTimer) Stop() bool { return true }

// recorder is a Listener that keeps what it is told.
type recorder struct {
	mu     sync.Mutex
	events []bulkhead.Event
}

func (r *recorder) OnEvent(e bulkhead.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

// waitHeard waits until r has heard n events: a listener hears an event
// made by a timer (a queue timeout) on the timer's goroutine, after the
// waiter it times out has been woken.
func (r *recorder) waitHeard(t *testing.T, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		r.mu.Lock()
		got := len(r.events)
		r.mu.Unlock()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the listener heard %d events in 10s, want %d", got, n)
		}
	}
}

func codes(es []bulkhead.Event) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Code)
	}
	return out
}

// fakeNow is a clock set by hand, for single-goroutine tests.
type fakeNow struct{ now time.Time }

func (c *fakeNow) Now() time.Time                              { return c.now }
func (c *fakeNow) AfterFunc(time.Duration, func()) clock.Timer { return stuckTimer{} }
