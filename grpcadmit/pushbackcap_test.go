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
	refused := make(chan struct{}) // the first attempt of call "2" was refused
	at.hook = func(v string, n int, next func() error) error {
		err := next()
		if v == "2" && n == 1 {
			close(refused)
		}
		return err
	}
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

	// The retry policy waits for the pushback: after its first attempt's
	// refusal the call makes no other, and is still waiting when its
	// context ends. The overflowed pushback retried at once, within a
	// millisecond; retryWindow gives such a retry time to show. It starts
	// once the first attempt has been refused, not when the call begins: a
	// deadline from the call's start was spent, on a loaded machine, on the
	// new connection's setup, and the call ended with no attempt at all.
	const retryWindow = 500 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	retrying := dial(t, addr, retryPolicy("0.001s"))
	ended := make(chan error, 1)
	go func() {
		_, err := call(ctx, retrying, "a", "2")
		ended <- err
	}()
	await(t, refused, "the first attempt's refusal")
	time.Sleep(retryWindow) // time for a retry at once to reach the server, not a wait for an event
	cancel()
	err = await(t, ended, "the call's return once its context ended")
	if n := at.of("2"); n != 1 || status.Code(err) != codes.Canceled {
		t.Errorf("%d attempts, then %v; want 1 attempt and the call waiting for the pushback until cancelled", n, err)
	}
	g.release()
	<-done
}
