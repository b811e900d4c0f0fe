package bulkhead_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/groupexec/groupexec/bulkhead"
)

func Example() {
	b, err := bulkhead.New(2) // at most 2 calls to the backend at once
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	p1, _ := b.TryAcquire(ctx, 1)
	p2, _ := b.TryAcquire(ctx, 1)

	_, err = b.TryAcquire(ctx, 1) // full: refused at once, not queued
	var rej *bulkhead.RejectedError
	if errors.As(err, &rej) {
		fmt.Println(rej.Code(), rej.InFlight, "of", rej.Limit)
	}

	_ = b.Release(p1)
	_ = b.Release(p2)
	fmt.Println(b.Release(p2)) // a second release is refused
	// Output:
	// RB_ERR_AT_CAPACITY 2 of 2
	// bulkhead: unknown permit: 2
}

func ExampleSubmit() {
	b, err := bulkhead.New(8, bulkhead.WithQueue(16, 100*time.Millisecond))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	h, err := bulkhead.Submit(b, ctx, func(ctx context.Context) (string, error) {
		return "fetched", nil
	})
	if err != nil {
		fmt.Println("shed:", err) // ErrQueueSaturated, ErrQueueTimeout, ...
		return
	}
	r, _ := h.Wait(ctx)
	fmt.Println(r.Status, r.Value, b.InFlight())
	// Output: Success fetched 0
}

func ExampleBulkhead_TryAcquire() {
	b, err := bulkhead.New(3)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	p, err := b.TryAcquire(ctx, 2) // a call that counts for two
	fmt.Println(err, p.Weight(), b.Available())

	_, err = b.TryAcquire(ctx, 2) // 1 free: refused at once, nothing taken
	fmt.Println(errors.Is(err, bulkhead.ErrAtCapacity), b.Available())
	_ = b.Release(p)
	// Output:
	// <nil> 2 1
	// true 1
}

func ExampleBulkhead_Acquire() {
	queued := make(chan struct{}, 1)
	b, err := bulkhead.New(1,
		bulkhead.WithQueue(8, time.Minute), // up to 8 wait, each for a minute at most
		bulkhead.WithListener(bulkhead.ListenerFunc(func(e bulkhead.Event) {
			if e.Code == bulkhead.EventRequestQueued {
				queued <- struct{}{}
			}
		})),
	)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	first, _ := b.Acquire(ctx, 1) // free: issued at once

	got := make(chan bulkhead.Permit)
	go func() {
		p, err := b.Acquire(ctx, 1) // full: waits in the queue
		if err != nil {
			panic(err)
		}
		got <- p
	}()
	<-queued
	fmt.Println("waiting:", b.QueueDepth())
	_ = b.Release(first) // hands the permit to the waiter
	second := <-got
	fmt.Println("issued:", second.ID(), "in flight:", b.InFlight())
	_ = b.Release(second)

	_, err = b.Acquire(ctx, 2) // more than the limit: it could never be issued
	fmt.Println(errors.Is(err, bulkhead.ErrAtCapacity))
	// Output:
	// waiting: 1
	// issued: 2 in flight: 1
	// true
}

func ExampleBulkhead_SetLimit() {
	b, _ := bulkhead.New(3)
	ctx := context.Background()
	var held []bulkhead.Permit
	for range 3 {
		p, _ := b.TryAcquire(ctx, 1)
		held = append(held, p)
	}
	_ = b.SetLimit(1) // below in-flight: drain, revoking nothing
	_, err := b.TryAcquire(ctx, 1)
	fmt.Println(errors.Is(err, bulkhead.ErrDraining), b.InFlight())

	for _, p := range held {
		_ = b.Release(p)
	}
	p, err := b.TryAcquire(ctx, 1)
	fmt.Println(err, p.Limit())
	// Output:
	// true 3
	// <nil> 1
}

func ExampleWithCapability() {
	b, _ := bulkhead.New(4, bulkhead.WithRequiredCapability("remote"))
	_, err := b.TryAcquire(context.Background(), 1)
	fmt.Println(errors.Is(err, bulkhead.ErrCapabilityRequired))

	ctx := bulkhead.WithCapability(context.Background(), "remote")
	p, err := b.TryAcquire(ctx, 1)
	fmt.Println(err, p.ID())
	// Output:
	// true
	// <nil> 1
}

func ExampleWithEventLog() {
	b, _ := bulkhead.New(1, bulkhead.WithEventLog(8))
	ctx := context.Background()
	p, _ := b.TryAcquire(ctx, 1)
	_, _ = b.TryAcquire(ctx, 1)
	_ = b.Release(p)
	for _, e := range b.Events() {
		fmt.Println(strings.TrimSpace(fmt.Sprintf("%s in-flight=%d %s", e.Code, e.InFlight, e.Detail)))
	}
	// Output:
	// RB_PERMIT_ACQUIRED in-flight=1
	// RB_AT_CAPACITY in-flight=1
	// RB_REQUEST_REJECTED in-flight=1 RB_ERR_AT_CAPACITY
	// RB_PERMIT_RELEASED in-flight=0
}

func ExampleBulkhead_P99() {
	b, _ := bulkhead.New(1, bulkhead.WithLatencyTarget(50*time.Millisecond))
	for i := range 100 {
		b.RecordLatency(time.Duration(i+1) * time.Millisecond) // 1ms .. 100ms
	}
	p99, _ := b.P99()
	fmt.Println(p99, b.WithinTarget())
	// Output: 99ms false
}
