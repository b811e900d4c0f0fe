package bulkhead_test

import (
	"context"
	"testing"
	"time"

	"github.com/groupexec/groupexec/bulkhead"
)

// A request whose context's error text exits the goroutine as its
// rejection is recorded has failed all the same: observers that count
// requests must see the rejection (ErrGoexit's code, as for a waiter that
// leaves the queue), not a request that never failed.
func TestContextErrorTextExitingIsLoggedAsARejection(t *testing.T) {
	t.Run("refused before the wait", func(t *testing.T) {
		b := newBH(t, 1, bulkhead.WithQueue(2, time.Hour), bulkhead.WithEventLog(16))
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = b.Acquire(exitingErrContext{context.Background()}, 1)
		}()
		<-done
		if d := lastRejection(t, b); d != bulkhead.ErrGoexit.Code() {
			t.Fatalf("the rejection's detail is %q, want %q", d, bulkhead.ErrGoexit.Code())
		}
		whole(t, b, 0)
	})
	t.Run("permit given back", func(t *testing.T) {
		b := newBH(t, 1, bulkhead.WithQueue(2, time.Hour), bulkhead.WithEventLog(16))
		held := acquire(t, b, 1)
		ctx := &endingCtx{Context: context.Background(), done: make(chan struct{})}
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = b.Acquire(ctx, 1)
		}()
		eventually(t, "the request to queue", func() bool { return b.QueueDepth() == 1 })
		ctx.armed.Store(true)
		release(t, b, held)
		<-done
		// The waiter's permit: issued, its rejection, then released.
		var issued uint64
		var got []string
		for _, e := range b.Events() {
			if e.Code == bulkhead.EventPermitAcquired && e.PermitID > held.ID() {
				issued = e.PermitID
			}
			if issued != 0 && e.PermitID == issued {
				got = append(got, e.Code+" "+e.Detail)
			}
		}
		want := []string{
			bulkhead.EventPermitAcquired + " ",
			bulkhead.EventRequestRejected + " " + bulkhead.ErrGoexit.Code(),
			bulkhead.EventPermitReleased + " ",
		}
		if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
			t.Fatalf("the waiter's permit's events: %q, want %q", got, want)
		}
		whole(t, b, 0)
	})
}
