package bulkhead_test

import (
	"context"
	"testing"
	"time"

	"github.com/groupexec/groupexec/bulkhead"
)

// WithRequiredCapability: every acquire without the capability fails at
// once with ErrCapabilityRequired, whatever else is wrong with its
// context. Acquire checks the capability before it looks at an ended
// context; Submit took a context whose Done is closed with a nil Err for
// a cancelled one first, refusing a request without the capability as
// cancelled (and logging it so).
func TestCapabilityCheckedBeforeAnEndedContext(t *testing.T) {
	newGated := func(t *testing.T) *bulkhead.Bulkhead {
		return newBH(t, 1, bulkhead.WithRequiredCapability("remote"), bulkhead.WithQueue(2, time.Hour), bulkhead.WithEventLog(16))
	}
	cancelled, cancel := context.WithCancel(bg)
	cancel()
	doneNoErr := &doneNoErrContext{Context: bg, done: make(chan struct{})}
	close(doneNoErr.done)
	for _, c := range []struct {
		name string
		ctx  context.Context
	}{
		{"cancelled", cancelled},
		{"done with a nil Err", doneNoErr},
	} {
		t.Run("Acquire "+c.name, func(t *testing.T) {
			b := newGated(t)
			_, err := b.Acquire(c.ctx, 1)
			wantErr(t, err, bulkhead.ErrCapabilityRequired)
			if d := lastRejection(t, b); d != bulkhead.ErrCapabilityRequired.Code() {
				t.Fatalf("the rejection's detail is %q, want %q", d, bulkhead.ErrCapabilityRequired.Code())
			}
			whole(t, b, 0)
		})
		t.Run("Submit "+c.name, func(t *testing.T) {
			b := newGated(t)
			_, err := bulkhead.Submit(b, c.ctx, func(context.Context) (int, error) { return 0, nil })
			wantErr(t, err, bulkhead.ErrCapabilityRequired)
			if d := lastRejection(t, b); d != bulkhead.ErrCapabilityRequired.Code() {
				t.Fatalf("the rejection's detail is %q, want %q", d, bulkhead.ErrCapabilityRequired.Code())
			}
			whole(t, b, 0)
		})
	}
}
