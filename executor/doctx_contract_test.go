package executor_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// expiringCtx is a call's context that the test ends with
// context.DeadlineExceeded when it chooses, as a deadline would.
type expiringCtx struct {
	context.Context // values and deadline: Background's
	done            chan struct{}
	once            sync.Once
}

func newExpiringCtx() *expiringCtx {
	return &expiringCtx{Context: context.Background(), done: make(chan struct{})}
}

func (c *expiringCtx) Done() <-chan struct{} { return c.done }

func (c *expiringCtx) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

func (c *expiringCtx) expire() { c.once.Do(func() { close(c.done) }) }

// fn's context kept past the call is cancelled when the call ends, as one
// that fn derived with a deferred cancel is: its Err, once non-nil, stays
// the same error when the call's context ends later with another, whether
// fn asked for Done or not.
func TestDoContextKeptErrStaysWhenTheParentEndsLater(t *testing.T) {
	for _, askDone := range []bool{false, true} {
		ex := newExec(t, nil)
		parent := newExpiringCtx()
		defer parent.expire()
		kept := keptDoContext(t, ex, parent, "g", askDone)
		derived, cancel := context.WithCancel(kept)
		defer cancel()
		first := kept.Err()
		if !errors.Is(first, context.Canceled) {
			t.Fatalf("Done asked %v: Err after the call = %v, want context.Canceled", askDone, first)
		}
		parent.expire()
		if err := kept.Err(); err != first {
			t.Errorf("Done asked %v: Err once the call's context expired = %v, was %v", askDone, err, first)
		}
		if err := derived.Err(); err != first {
			t.Errorf("Done asked %v: a context derived after the call: Err = %v, want %v", askDone, err, first)
		}
	}
}

// A Do call refused for lack of room and run in its caller, by CallerRuns
// or by a rejection handler's RunInCaller, has fn's context cancelled when
// the call ends, as an admitted call has: a goroutine that fn started and
// that waits on Done does not wait for the call's context to end, which
// context.Background never does.
func TestDoContextKeptEndsWithACallRunInTheCaller(t *testing.T) {
	runInCaller := executor.WithRejectionHandler(func(r *executor.Rejection) error {
		r.RunInCaller()
		return nil
	})
	for _, via := range []string{"CallerRuns", "RunInCaller"} {
		for _, cancellable := range []bool{true, false} {
			popts := []policy.Option{policy.WithDefaultMaxInFlight(1)}
			var eopts []executor.Option
			if via == "CallerRuns" {
				popts = append(popts, policy.WithRejectionPolicy(policy.CallerRuns))
			} else {
				eopts = append(eopts, runInCaller)
			}
			ex := newExec(t, popts, eopts...)
			parent := bg
			if cancellable {
				var cancel context.CancelFunc
				parent, cancel = context.WithCancel(bg)
				defer cancel()
			}
			started, release, held := make(chan struct{}), make(chan struct{}), make(chan error, 1)
			go func() {
				held <- ex.Do(parent, "g", func(context.Context) error {
					close(started)
					<-release
					return nil
				})
			}()
			recv(t, started, "the call that holds the room started")
			var kept context.Context
			if err := ex.Do(parent, "g", func(ctx context.Context) error {
				kept = ctx
				return ctx.Err()
			}); err != nil {
				t.Fatalf("%s: %v", via, err)
			}
			close(release)
			if err := recv(t, held, "the call that held the room returned"); err != nil {
				t.Fatalf("%s: the call that held the room: %v", via, err)
			}
			if err := kept.Err(); !errors.Is(err, context.Canceled) {
				t.Errorf("%s, cancellable context %v: Err after the call = %v, want context.Canceled", via, cancellable, err)
			}
			select {
			case <-kept.Done():
			default:
				t.Errorf("%s, cancellable context %v: Done after the call is not closed", via, cancellable)
			}
		}
	}
}

// slowCauseCtx is an expiringCtx whose Value, the first time after slow is
// set, waits for release: a context.Cause read of it waits there.
type slowCauseCtx struct {
	*expiringCtx
	slow    atomic.Bool
	asked   chan struct{}
	release chan struct{}
}

func (c *slowCauseCtx) Value(key any) any {
	if c.slow.CompareAndSwap(true, false) {
		c.asked <- struct{}{}
		<-c.release
	}
	return c.expiringCtx.Value(key)
}

// While the call runs, fn's context whose Done fn asked for reports the
// call's context's end only with that channel closed, although the
// function that the call's context runs once it has ended
// (context.AfterFunc) to close it has not yet: Err and Done agree.
func TestDoContextErrWaitsForDoneWhenTheParentEnds(t *testing.T) {
	ex := newExec(t, nil)
	parent := &slowCauseCtx{expiringCtx: newExpiringCtx(), asked: make(chan struct{}, 1), release: make(chan struct{})}
	defer parent.expire()
	released := false
	release := func() {
		if !released {
			released = true
			close(parent.release)
		}
	}
	defer release()
	if err := ex.Do(parent, "g", func(ctx context.Context) error {
		done := ctx.Done()
		parent.slow.Store(true)
		parent.expire()
		recv(t, parent.asked, "the call's context was asked its cause") // the function that closes done waits on the call's context
		if err := ctx.Err(); err != nil && !isClosed(done) {
			t.Errorf("Err = %v while Done is open", err)
		}
		release()
		recv(t, done, "fn's context's Done closed")
		if err := ctx.Err(); err != context.DeadlineExceeded {
			t.Errorf("Err once Done is closed = %v, want the call's context's", err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
