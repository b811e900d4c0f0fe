package bulkhead_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/bulkhead"
)

// textBomb is an error whose Error panics, as a nil pointer's method may.
type textBomb struct{}

func (*textBomb) Error() string { panic("textBomb.Error") }

// bombErrContext is a context whose Err, once ended is set, returns a
// textBomb: a faulty context of the caller's.
type bombErrContext struct {
	context.Context
	ended atomic.Bool
}

func (c *bombErrContext) Err() error {
	if c.ended.Load() {
		return &textBomb{}
	}
	return nil
}

// The rejection of a waiter whose context has ended names its context's
// error (Event.Detail), read with Error under the bulkhead's mutex, on the
// goroutine serving the queue: the caller's code. One that panics left the
// mutex held, every later call blocked, and the release that served the
// queue panicked in its caller. The waiter fails with its context's error
// all the same.
func TestContextErrorTextPanickingLeavesNoLockHeld(t *testing.T) {
	for _, observed := range []bool{false, true} {
		opts := []bulkhead.Option{bulkhead.WithQueue(2, time.Hour)}
		if observed {
			opts = append(opts, bulkhead.WithEventLog(16))
		}
		b := newBH(t, 1, opts...)
		held := acquire(t, b, 1)
		ctx := &bombErrContext{Context: bg}
		w := queueWith(t, ctx, b, 1)[0]
		ctx.ended.Store(true) // its Done never closes: the release finds it ended
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("observed %v: Release panicked: %v", observed, r)
				}
			}()
			_ = b.Release(held)
		}()
		if bulkhead.Locked(b) {
			t.Fatalf("observed %v: the bulkhead's mutex is held after the release served the queue", observed)
		}
		if _, err := w.wait(t); err == nil {
			t.Fatalf("observed %v: the waiter whose context ended got a permit", observed)
		} else if _, ok := err.(*textBomb); !ok {
			t.Fatalf("observed %v: the waiter failed with %T, want its context's error", observed, err)
		}
		whole(t, b, 0)
		if observed {
			var rejected int
			for _, e := range b.Events() {
				if e.Code == bulkhead.EventRequestRejected && e.Detail != "" {
					rejected++
				}
			}
			if rejected != 1 {
				t.Errorf("%d rejections with a detail logged, want 1: %+v", rejected, b.Events())
			}
		}
	}
}
