package redislimit

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"
)

// A reply that is there when the op timeout ends is used: the holder
// does not count it as lost (a granted lease given back, a renewal
// failed) because the timeout was ready at the same moment. Each round
// makes both ready before call waits; select alone takes the timeout in
// about half of them.
func TestCallTakesAReplyReadyAtTheTimeout(t *testing.T) {
	h := &Holder{}
	h.cfg.opTimeout = time.Millisecond
	h.callWaitHook = func(ctx context.Context, replied func() bool) {
		<-ctx.Done()
		for !replied() {
			runtime.Gosched()
		}
	}
	for i := range 64 {
		v, err := call(h, func(context.Context) (int, error) { return i, nil })
		if err != nil || v != i {
			t.Fatalf("round %d: call returned %d, %v; want %d, <nil>", i, v, err, i)
		}
	}
	// The timeout still ends a call with no reply.
	h.callWaitHook = nil
	release := make(chan struct{})
	_, err := call(h, func(context.Context) (int, error) { <-release; return 0, nil })
	close(release)
	var ote *opTimeoutError
	if !errors.As(err, &ote) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a call with no reply returned %v, want the op timeout's error", err)
	}
	if !h.calls.wait(10 * time.Second) {
		t.Fatal("the abandoned call's goroutine did not end")
	}
}
