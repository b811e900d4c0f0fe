package grpcadmit_test

import (
	"context"
	"math"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/groupexec/groupexec/grpcadmit"
	"github.com/groupexec/groupexec/policy"
)

// A retry delay too long for a client to read (WithRetryAfter of the
// longest Duration, meant as "do not come back soon") is sent as the
// longest pushback every gRPC client reads, 2^31-1 ms: grpc-go multiplies
// the value by a millisecond, which overflowed into a negative delay, and
// its retry policy retried at once, into the same refusal, until its
// attempts ran out; grpc-java parses an int, and stops at a longer one.
func TestHugeRetryAfterIsNoImmediateRetry(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1)})
	g := newGate()
	at := &attempts{}
	addr := start(t, g, grpc.ChainUnaryInterceptor(at.interceptor,
		grpcadmit.UnaryServerInterceptor(ex, grpcadmit.WithRetryAfter(math.MaxInt64))))
	cc := dial(t, addr)
	done := make(chan struct{})
	go func() { defer close(done); call(context.Background(), cc, "a", "1") }()
	<-g.entered

	// The pushback as the server sends it, read without a retry policy.
	var trailer metadata.MD
	err := cc.Invoke(metadata.AppendToOutgoingContext(context.Background(), "x-tenant", "a"), "/test.Gate/Call",
		wrapperspb.String("plain"), new(wrapperspb.StringValue), grpc.Trailer(&trailer))
	if v := trailer.Get("grpc-retry-pushback-ms"); status.Code(err) != codes.ResourceExhausted || len(v) != 1 || v[0] != strconv.Itoa(math.MaxInt32) {
		t.Errorf("refusal: %v, pushback %q; want ResourceExhausted and %d", err, v, math.MaxInt32)
	}

	// The retry policy waits for the pushback: the call ends with its own
	// deadline, after one attempt. The deadline only bounds the wait; the
	// overflowed pushback retried at once, well within it.
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err = call(ctx, dial(t, addr, retryPolicy("0.001s")), "a", "2")
	if n := at.of("2"); n != 1 {
		t.Errorf("%d attempts (%v), want 1: the client did not wait for the pushback", n, err)
	}
	g.release()
	<-done
}
