package prom_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groupexec/groupexec/bulkhead"
	"github.com/groupexec/groupexec/metrics/prom"
)

// doneNoErrContext is a faulty context whose Done is closed while its Err
// is nil.
type doneNoErrContext struct {
	context.Context
	done chan struct{}
}

func (c *doneNoErrContext) Done() <-chan struct{} { return c.done }
func (c *doneNoErrContext) Err() error            { return nil }

// A waiter whose context's Done closes while its Err is nil fails as a
// cancelled request (its error matches context.Canceled), and is counted
// under code="cancelled", as one whose context was cancelled is: it was
// counted under "other".
func TestWaiterWithDoneButNoErrCountsAsCancelled(t *testing.T) {
	m := prom.NewBulkhead("b", "")
	queued := make(chan struct{}, 1)
	b, err := bulkhead.New(1, bulkhead.WithQueue(1, time.Hour), bulkhead.WithListener(bulkhead.Listeners(m,
		bulkhead.ListenerFunc(func(e bulkhead.Event) {
			if e.Code == bulkhead.EventRequestQueued {
				queued <- struct{}{}
			}
		}))))
	if err != nil {
		t.Fatal(err)
	}
	m.Observe(b)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	held, err := b.TryAcquire(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx := &doneNoErrContext{Context: context.Background(), done: make(chan struct{})}
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
	if err := b.Release(held); err != nil {
		t.Fatal(err)
	}
	for code, want := range map[string]float64{"cancelled": 1, "other": 0} {
		if got := mustValue(t, reg, "bulkhead_rejected_total", map[string]string{"bulkhead": "b", "code": code}); got != want {
			t.Errorf("bulkhead_rejected_total{code=%q} = %v, want %v", code, got, want)
		}
	}
}
