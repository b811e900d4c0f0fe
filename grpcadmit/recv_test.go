package grpcadmit_test

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/grpcadmit"
)

// garbage is a codec that sends bytes no protobuf message decodes from.
type garbage struct{}

func (garbage) Marshal(any) ([]byte, error) { return []byte{0xff, 0xff, 0xff}, nil }
func (garbage) Unmarshal([]byte, any) error { return nil }
func (garbage) Name() string                { return "proto" }

// A stream whose handler returns what its RecvMsg gave for the caller's
// input, a message that does not decode or the missing request of a
// server-streaming call (codes.Internal, as gRPC reports both), counts as
// Cancelled: the caller's input failed, not the handler. Counted by
// ServerFailure, any caller could open its tenant's breaker, which trips on
// the first failure here, with a few bytes of garbage. The caller still
// gets gRPC's status; a failure of the handler's own still counts.
func TestStreamReceiveErrorIsNoFailure(t *testing.T) {
	ev := newEvents()
	ex := newExec(t, nil, tripOnFirstFailure, ev.listener())
	g := newGate()
	g.release()
	cc := dial(t, start(t, g, grpc.ChainStreamInterceptor(grpcadmit.StreamServerInterceptor(ex)), unary(ex)))
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-tenant", "s")

	cs, err := cc.NewStream(ctx, &gateDesc.Streams[0], "/test.Gate/Echo", grpc.ForceCodec(garbage{}))
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.SendMsg(wrapperspb.String("x")); err != nil {
		t.Fatal(err)
	}
	if err := cs.RecvMsg(new(wrapperspb.StringValue)); status.Code(err) != codes.Internal {
		t.Fatalf("garbage: %v, want gRPC's Internal", err)
	}
	// RecvMsg sends its error's status to the caller itself, before the
	// handler returns it to Do: the call is counted only by its Completed.
	if e := <-ev.completed; e.Status != executor.Cancelled {
		t.Fatalf("garbage ended %v, want Cancelled", e.Status)
	}
	cs, err = cc.NewStream(ctx, &gateDesc.Streams[2], "/test.Gate/First")
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if err := cs.RecvMsg(new(wrapperspb.StringValue)); status.Code(err) != codes.Internal {
		t.Fatalf("no request: %v, want gRPC's Internal", err)
	}
	if e := <-ev.completed; e.Status != executor.Cancelled {
		t.Fatalf("no request ended %v, want Cancelled", e.Status)
	}
	if s, _ := ex.GroupStats("s"); s.Failed != 0 || s.Cancelled != 2 || s.Breaker != breaker.StateClosed {
		t.Fatalf("%d failed, %d cancelled, breaker %v; want 0, 2 and closed", s.Failed, s.Cancelled, s.Breaker)
	}
	if _, err := call(context.Background(), cc, "s", "x"); err != nil {
		t.Fatalf("a call after the garbage: %v", err)
	}

	g.reply = func(context.Context, string) error { return status.Error(codes.Internal, "boom") }
	cs, err = cc.NewStream(ctx, &gateDesc.Streams[2], "/test.Gate/First")
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.SendMsg(wrapperspb.String("x")); err != nil {
		t.Fatal(err)
	}
	cs.CloseSend()
	if err := cs.RecvMsg(new(wrapperspb.StringValue)); status.Code(err) != codes.Internal {
		t.Fatalf("failing handler: %v", err)
	}
	if s, _ := ex.GroupStats("s"); s.Failed != 1 || s.Breaker != breaker.StateOpen {
		t.Errorf("after the handler's own failure: %d failed, breaker %v; want 1 and open", s.Failed, s.Breaker)
	}
}
