package executor_test

import (
	"context"
	"errors"
	"sync"
	"testing"
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
		var kept context.Context
		if err := ex.Do(parent, "g", func(ctx context.Context) error {
			if askDone {
				ctx.Done()
			}
			kept = ctx
			return nil
		}); err != nil {
			t.Fatal(err)
		}
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
