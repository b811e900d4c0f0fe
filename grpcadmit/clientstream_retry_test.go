package grpcadmit_test

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/grpcadmit"
	"github.com/groupexec/groupexec/policy"
)

// reopen is a stream interceptor that opens its stream twice, as one that
// retries a failed attempt does: its first attempt ends (cancelled), and
// it opens the stream again with the same call options.
func reopen(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	first, err := streamer(actx, desc, cc, method, opts...)
	if err != nil {
		return nil, err
	}
	cancel()
	first.RecvMsg(new(wrapperspb.StringValue)) // the first attempt's end, read
	return streamer(ctx, desc, cc, method, opts...)
}

// A retrying stream interceptor chained before StreamClientInterceptor has
// each attempt admitted: the first attempt's admission ends with it, the
// stream opened again holds the slot, and the group, full, refuses
// another stream.
func TestStreamClientRetryingInterceptorBefore(t *testing.T) {
	ev := newEvents()
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1)}, ev.listener())
	g := newGate()
	cc := dial(t, start(t, g), grpc.WithChainStreamInterceptor(reopen, grpcadmit.StreamClientInterceptor(ex)))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := cc.NewStream(ctx, &gateDesc.Streams[0], "/test.Gate/Echo"); err != nil {
		t.Fatal(err)
	}
	if e := <-ev.completed; e.Status != executor.Cancelled {
		t.Errorf("the first attempt's admission ended %v (%v), want Cancelled", e.Status, e.Err)
	}
	if st, _ := ex.GroupStats(cc.Target()); st.Running != 1 {
		t.Errorf("%d permits running, want 1: the stream opened again holds its slot", st.Running)
	}
	if _, err := cc.NewStream(ctx, &gateDesc.Streams[0], "/test.Gate/Echo"); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("another stream: %v, want ResourceExhausted", err)
	}
}
