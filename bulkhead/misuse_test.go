package bulkhead_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/groupexec/groupexec/bulkhead"
)

// A second WithRequiredCapability is refused, as a second WithListener is:
// taking its name in place of the first would drop a requirement the
// program stated, without a word, and admit contexts without it.
func TestRequiredCapabilityGivenTwiceIsInvalid(t *testing.T) {
	b, err := bulkhead.New(1, bulkhead.WithRequiredCapability("a"), bulkhead.WithRequiredCapability("b"))
	var ce *bulkhead.ConfigError
	if b != nil || !errors.As(err, &ce) || ce.Option != "WithRequiredCapability name" || ce.Value != "b" {
		t.Fatalf("New made a bulkhead: %t, error %v; want a *ConfigError naming the second WithRequiredCapability", b != nil, err)
	}
	wantErr(t, err, bulkhead.ErrInvalidConfig)
	// The same name twice states one requirement: nothing is dropped.
	b = newBH(t, 1, bulkhead.WithRequiredCapability("a"), bulkhead.WithRequiredCapability("a"))
	if _, err := b.TryAcquire(bg, 1); !errors.Is(err, bulkhead.ErrCapabilityRequired) {
		t.Fatalf("TryAcquire without the capability: %v", err)
	}
}

// Submit on a nil bulkhead is an invalid argument, as a nil fn or ctx is:
// a *ConfigError naming it, not a nil pointer dereference from inside
// Acquire.
func TestSubmitNilBulkheadIsInvalid(t *testing.T) {
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("panic: %v", r)
			}
		}()
		_, err = bulkhead.Submit(nil, bg, func(context.Context) (int, error) { return 1, nil })
	}()
	var ce *bulkhead.ConfigError
	if !errors.As(err, &ce) || ce.Option != "Submit b" {
		t.Fatalf("Submit(nil, ...) = %v; want a *ConfigError naming Submit b", err)
	}
}

// WithCapability with a nil context panics as context.WithValue does,
// with a message that says so, not with a nil pointer dereference.
func TestWithCapabilityNilContextPanicsClearly(t *testing.T) {
	var r any
	func() {
		defer func() { r = recover() }()
		var none context.Context // nil: the input under test
		bulkhead.WithCapability(none, "remote")
	}()
	if _, runtimeErr := r.(interface{ RuntimeError() }); r == nil || runtimeErr || !strings.Contains(fmt.Sprint(r), "nil parent") {
		t.Fatalf("WithCapability(nil, ...) panicked with %v; want context's nil parent panic", r)
	}
}

// An option given twice takes its later value (the Option doc): the queue
// of the second WithQueue is the one a full bulkhead queues in.
func TestOptionGivenTwiceTakesItsLaterValue(t *testing.T) {
	b := newBH(t, 1, bulkhead.WithQueue(1, time.Hour), bulkhead.WithQueue(2, time.Hour))
	held := acquire(t, b, 1)
	q := queueWith(t, bg, b, 2) // the second WithQueue's depth: both wait
	if _, err := b.Acquire(bg, 1); !errors.Is(err, bulkhead.ErrQueueSaturated) {
		t.Fatalf("a third waiter: %v; want ErrQueueSaturated", err)
	}
	release(t, b, held)
	for _, r := range q {
		p, err := r.wait(t)
		if err != nil {
			t.Fatal(err)
		}
		release(t, b, p)
	}
}
