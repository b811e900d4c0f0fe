package bulkhead_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/groupexec/groupexec/bulkhead"
)

// A waiter whose context's Done closes while its Err is nil fails as a
// cancelled request, and its rejection's Detail is context.Canceled's text,
// as for a context that was cancelled: observers that count requests by
// their context's error (metrics/prom, metrics/otel) took the bulkhead's
// own message for an unknown error.
func TestDoneWithoutErrRejectionReadsCancelled(t *testing.T) {
	queued := make(chan struct{}, 1)
	b := newBH(t, 1, bulkhead.WithQueue(1, time.Hour), bulkhead.WithEventLog(16),
		bulkhead.WithListener(bulkhead.ListenerFunc(func(e bulkhead.Event) {
			if e.Code == bulkhead.EventRequestQueued {
				queued <- struct{}{}
			}
		})))
	held := acquire(t, b, 1)
	ctx := &doneNoErrContext{Context: bg, done: make(chan struct{})}
	res := make(chan error, 1)
	go func() {
		_, err := b.Acquire(ctx, 1)
		res <- err
	}()
	<-queued
	close(ctx.done)
	if err := <-res; !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire: %v, want an error matching context.Canceled", err)
	}
	release(t, b, held)
	wantOneCancelledRejection(t, b)
}

// wantOneCancelledRejection checks that b's event log holds one rejection,
// with the Detail of a cancelled context.
func wantOneCancelledRejection(t *testing.T, b *bulkhead.Bulkhead) {
	t.Helper()
	var details []string
	for _, e := range b.Events() {
		if e.Code == bulkhead.EventRequestRejected {
			details = append(details, e.Detail)
		}
	}
	if len(details) != 1 || details[0] != context.Canceled.Error() {
		t.Errorf("rejection details %q, want [%q]", details, context.Canceled.Error())
	}
}
