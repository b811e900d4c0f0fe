package grpcadmit_test

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/groupexec/groupexec/grpcadmit"
	"github.com/groupexec/groupexec/policy"
)

// nopStream is a server stream whose messages go nowhere.
type nopStream struct{ serverStream }

func (nopStream) SendMsg(any) error { return nil }
func (nopStream) RecvMsg(any) error { return nil }

// BenchmarkStreamServerMessages: the interceptor's cost per message of an
// admitted stream, its handler sending and receiving through the stream the
// interceptor gives it, on a stream that costs nothing itself.
func BenchmarkStreamServerMessages(b *testing.B) {
	ex := newExec(b, []policy.Option{policy.WithDefaultMaxConcurrency(64)})
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-tenant", "acme"))
	icp := grpcadmit.StreamServerInterceptor(ex)
	m := wrapperspb.String("x")
	b.ReportAllocs()
	err := icp(nil, &nopStream{serverStream{ctx: ctx}}, &grpc.StreamServerInfo{FullMethod: "/test.Gate/Echo"},
		func(_ any, ss grpc.ServerStream) error {
			for b.Loop() {
				if err := ss.RecvMsg(m); err != nil {
					return err
				}
				if err := ss.SendMsg(m); err != nil {
					return err
				}
			}
			return nil
		})
	if err != nil {
		b.Fatal(err)
	}
}

// Receiving and sending through the stream the interceptor gives its
// handler allocates nothing per message.
func TestStreamServerMessagesAllocateNothing(t *testing.T) {
	ex := newExec(t, nil)
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-tenant", "acme"))
	m := wrapperspb.String("x")
	var allocs float64
	err := grpcadmit.StreamServerInterceptor(ex)(nil, &nopStream{serverStream{ctx: ctx}}, &grpc.StreamServerInfo{FullMethod: "/test.Gate/Echo"},
		func(_ any, ss grpc.ServerStream) error {
			allocs = testing.AllocsPerRun(100, func() {
				_ = ss.RecvMsg(m)
				_ = ss.SendMsg(m)
			})
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if allocs != 0 {
		t.Errorf("%v allocations per message received and sent, want 0", allocs)
	}
}
